/* kvserver: a durable key-value server made of an unchanged hash table (uthash, Debian's
 * uthash-dev) behind a small Redis-protocol (RESP) front end, made durable by nothing but
 * its build: compiled with bindings/c/bin/pmkv-cc and linked with libpmkv, it runs on
 * Mangosteen with compiler capture. The table lives in the runtime's durable region: its
 * entries and buckets come from `malloc`, which libpmkv serves from the region's
 * persistent heap while a write runs, and every store uthash makes is captured by the
 * instrumentation. Nothing here calls a persistence function.
 *
 * Commands: GET, SET key value, DEL key..., EXISTS key..., DBSIZE, FLUSHALL, FLUSHDB,
 * PING, QUIT, INFO, SELECT 0, HELLO 2|3 and CLIENT (the handshake of RESP3 clients), and
 * CONFIG / COMMAND (an empty answer, for clients that ask at start). RESP arrays and inline commands; pipelining. A reply to a write is sent
 * only once the write is durable.
 *
 * Each connection is a thread and a local-mode client of the runtime. The complete
 * commands of one read from the socket are grouped into runs of writes and runs of reads;
 * a run is one request (its RESP bytes), so a pipeline of SETs is one request and,
 * combined with other clients' requests, one batch: one commit.
 *
 * Usage: kvserver --pool PATH [--port N (0: any free port)] [--region-mib N (new pool,
 * default 64)] [--mode adr|eadr|msync|none] [--verify]. Prints "ready PORT" once listening.
 * --verify turns on the runtime's verify mode (every batch's writes checked against a
 * diff of the region; a write the capture missed fails the request): for tests. */
#define _GNU_SOURCE
#include "pmkv.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* uthash's configuration hooks (its code is unchanged): an allocation that fails inside
 * the table (its buckets) leaves the table as it was and reports here, instead of
 * exit(). Thread-local: requests run on whichever thread combines the batch. */
static __thread int table_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (table_oom = 1)
#include <uthash.h>

/* The largest bulk string and argument count a command may have, and the most commands
 * and bytes in one request. */
#define MAX_BULK (64u << 20)
#define MAX_ARGS (1u << 20)
#define GROUP_CMDS 256
#define GROUP_BYTES (1u << 20)

/* ---- The durable state: uthash's table, in the region's heap. ---- */

typedef struct item {
    UT_hash_handle hh;
    uint32_t klen, vlen;
    char data[]; /* the key, then the value */
} item;

#define ROOT_MAGIC 0x31766b766b6d70ull /* "pmkvkv1" */

typedef struct root {
    uint64_t magic;
    item *head;
} root;

/* ---- RESP parsing. ---- */

typedef struct arg {
    const char *p;
    size_t n;
} arg;

typedef struct args {
    arg *v;
    size_t n, cap;
} args;

static int args_push(args *a, const char *p, size_t n) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        arg *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n].p = p;
    a->v[a->n].n = n;
    a->n++;
    return 0;
}

/* A decimal number up to `max` ending at a CRLF within [p, end): 1 and the position
 * after the CRLF, 0 if the line is incomplete, -1 if malformed. */
static int parse_num(const char *p, const char *end, long long max, long long *out, const char **next) {
    const char *cr = memchr(p, '\r', (size_t)(end - p));
    if (!cr || cr + 1 >= end) return (end - p) > 32 ? -1 : 0;
    if (cr[1] != '\n' || cr == p) return -1;
    long long v = 0;
    bool neg = false;
    const char *q = p;
    if (*q == '-') neg = true, q++;
    if (q == cr) return -1;
    for (; q < cr; q++) {
        if (*q < '0' || *q > '9') return -1;
        v = v * 10 + (*q - '0');
        if (v > max) return -1;
    }
    *out = neg ? -v : v;
    *next = cr + 2;
    return 1;
}

/* Parse one command at [buf, buf+len) into `a` (cleared first): bytes consumed, 0 when
 * more bytes are needed, -1 on a protocol error (`*err` says which). An empty inline
 * line is consumed with no arguments. */
static long parse_command(const char *buf, size_t len, args *a, const char **err) {
    const char *p = buf, *end = buf + len;
    a->n = 0;
    if (len == 0) return 0;
    if (*p == '*') {
        long long argc;
        int r = parse_num(p + 1, end, MAX_ARGS, &argc, &p);
        if (r <= 0) {
            *err = "invalid multibulk length";
            return r;
        }
        for (long long i = 0; i < argc; i++) {
            if (p >= end) return 0;
            if (*p != '$') {
                *err = "expected '$'";
                return -1;
            }
            long long n;
            r = parse_num(p + 1, end, MAX_BULK, &n, &p);
            if (r <= 0 || n < 0) {
                *err = "invalid bulk length";
                return r == 0 ? 0 : -1;
            }
            if ((size_t)(end - p) < (size_t)n + 2) return 0;
            if (p[n] != '\r' || p[n + 1] != '\n') {
                *err = "bulk string not followed by CRLF";
                return -1;
            }
            if (args_push(a, p, (size_t)n) != 0) {
                *err = "out of memory";
                return -1;
            }
            p += n + 2;
        }
        return p - buf;
    }
    /* Inline: words separated by blanks, up to LF. */
    const char *lf = memchr(p, '\n', len);
    if (!lf) {
        if (len > 64 << 10) {
            *err = "too big inline request";
            return -1;
        }
        return 0;
    }
    const char *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    while (p < e) {
        while (p < e && (*p == ' ' || *p == '\t')) p++;
        const char *w = p;
        while (p < e && *p != ' ' && *p != '\t') p++;
        if (p > w && args_push(a, w, (size_t)(p - w)) != 0) {
            *err = "out of memory";
            return -1;
        }
    }
    return lf + 1 - buf;
}

/* ---- Commands. ---- */

enum cls { C_NONE, C_READ, C_WRITE, C_LOCAL, C_ERROR };
enum op { OP_GET, OP_EXISTS, OP_DBSIZE, OP_INFO, OP_SET, OP_DEL, OP_FLUSH, OP_PING, OP_QUIT, OP_SELECT, OP_EMPTY, OP_HELLO, OP_OK };

static const struct {
    const char *name;
    enum op op;
    enum cls cls;
    int min, max; /* argument counts, the name included; max -1: any */
} COMMANDS[] = {
    {"get", OP_GET, C_READ, 2, 2},        {"exists", OP_EXISTS, C_READ, 2, -1}, {"dbsize", OP_DBSIZE, C_READ, 1, 1},
    {"info", OP_INFO, C_READ, 1, 2},      {"set", OP_SET, C_WRITE, 3, 3},       {"del", OP_DEL, C_WRITE, 2, -1},
    {"flushall", OP_FLUSH, C_WRITE, 1, 2}, {"flushdb", OP_FLUSH, C_WRITE, 1, 2}, {"ping", OP_PING, C_LOCAL, 1, 2},
    {"quit", OP_QUIT, C_LOCAL, 1, -1},    {"select", OP_SELECT, C_LOCAL, 2, 2}, {"config", OP_EMPTY, C_LOCAL, 1, -1},
    {"command", OP_EMPTY, C_LOCAL, 1, -1}, {"hello", OP_HELLO, C_LOCAL, 1, -1},  {"client", OP_OK, C_LOCAL, 2, -1},
};

/* The command `a` names: its index in COMMANDS, -1 unknown, -2 wrong arity. */
static int lookup(const args *a) {
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++) {
        if (strlen(COMMANDS[i].name) == a->v[0].n && strncasecmp(COMMANDS[i].name, a->v[0].p, a->v[0].n) == 0) {
            int n = (int)a->n;
            if (n < COMMANDS[i].min || (COMMANDS[i].max >= 0 && n > COMMANDS[i].max)) return -2;
            return (int)i;
        }
    }
    return -1;
}

/* ---- Output buffers (transient memory: never written inside a write's heap scope). ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static int buf_reserve(buf *b, size_t more) {
    if (b->n + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Append without growing: the caller reserved the room. */
static void put(buf *b, const void *p, size_t n) {
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void putf(buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (n > 0) b->n += (size_t)n < b->cap - b->n ? (size_t)n : b->cap - b->n - 1;
}

/* ---- The runtime's callbacks (Listing 1). ---- */

/* A client's context: its current request (a run of commands, parsed) and response. */
typedef struct client {
    buf req;  /* a copy of the request's bytes */
    args a;   /* every argument of every command */
    size_t *cmd_start; /* command i: arguments [cmd_start[i], cmd_start[i+1]) */
    size_t ncmds, cmd_cap;
    bool read_only;
    bool resp3; /* the connection speaks RESP3 (HELLO 3): a missing value is `_` */
    buf out;
} client;

/* Room a write's reply takes at most: the write path must not allocate (inside a write
 * every malloc is the persistent heap's), so deserialize reserves it. */
#define WRITE_REPLY_MAX 64

static void *init_client(void *params) {
    (void)params;
    return calloc(1, sizeof(client));
}

static void destroy_client(void *cp) {
    client *c = cp;
    free(c->req.p);
    free(c->a.v);
    free(c->cmd_start);
    free(c->out.p);
    free(c);
}

/* The request is the protocol version ('2' or '3'), then the RESP bytes of a run of
 * commands the connection already checked; a malformed or mixed run is refused all the
 * same. */
static int deserialize_request(void *cp, const uint8_t *req, uintptr_t len) {
    client *c = cp;
    if (len < 1 || (req[0] != '2' && req[0] != '3')) return 1;
    c->resp3 = req[0] == '3';
    req++, len--;
    c->req.n = 0;
    c->a.n = 0;
    c->ncmds = 0;
    c->out.n = 0;
    if (buf_reserve(&c->req, len) != 0) return 1;
    put(&c->req, req, len);
    const char *p = c->req.p, *end = c->req.p + len;
    args one = {0};
    int cls = C_NONE;
    int rc = 0;
    while (p < end) {
        const char *err = NULL;
        long r = parse_command(p, (size_t)(end - p), &one, &err);
        if (r <= 0 || one.n == 0) {
            rc = 2;
            break;
        }
        int i = lookup(&one);
        if (i < 0 || (COMMANDS[i].cls != C_READ && COMMANDS[i].cls != C_WRITE) ||
            (cls != C_NONE && (int)COMMANDS[i].cls != cls)) {
            rc = 3;
            break;
        }
        cls = COMMANDS[i].cls;
        if (c->ncmds + 2 > c->cmd_cap) {
            size_t cap = c->cmd_cap ? c->cmd_cap * 2 : 64;
            size_t *v = realloc(c->cmd_start, cap * sizeof *v);
            if (!v) {
                rc = 4;
                break;
            }
            c->cmd_start = v;
            c->cmd_cap = cap;
        }
        c->cmd_start[c->ncmds++] = c->a.n;
        for (size_t k = 0; k < one.n; k++) {
            if (args_push(&c->a, one.v[k].p, one.v[k].n) != 0) {
                rc = 4;
                break;
            }
        }
        p += r;
    }
    free(one.v);
    if (rc != 0 || c->ncmds == 0) return rc ? rc : 5;
    c->cmd_start[c->ncmds] = c->a.n;
    c->read_only = cls == C_READ;
    if (!c->read_only && buf_reserve(&c->out, c->ncmds * WRITE_REPLY_MAX) != 0) return 4;
    return 0;
}

static bool is_read_only(void *cp) { return ((client *)cp)->read_only; }

static item *find(root *r, const arg *k) {
    item *it = NULL;
    if (r) HASH_FIND(hh, r->head, k->p, k->n, it);
    return it;
}

static const char OOM_REPLY[] = "-OOM the durable region is full\r\n";

/* SET: a new entry, or the value replaced in place when its length is unchanged. */
static void do_set(root *r, const arg *k, const arg *v, buf *out) {
    item *old = find(r, k);
    if (old && old->vlen == v->n) {
        memcpy(old->data + old->klen, v->p, v->n);
        put(out, "+OK\r\n", 5);
        return;
    }
    item *it = malloc(sizeof *it + k->n + v->n);
    if (!it) {
        put(out, OOM_REPLY, sizeof OOM_REPLY - 1);
        return;
    }
    it->klen = (uint32_t)k->n;
    it->vlen = (uint32_t)v->n;
    memcpy(it->data, k->p, k->n);
    memcpy(it->data + k->n, v->p, v->n);
    table_oom = 0;
    HASH_ADD_KEYPTR(hh, r->head, it->data, it->klen, it);
    if (table_oom) {
        free(it);
        put(out, OOM_REPLY, sizeof OOM_REPLY - 1);
        return;
    }
    if (old) {
        HASH_DEL(r->head, old);
        free(old);
    }
    put(out, "+OK\r\n", 5);
}

static void process_write(client *c, uint8_t *region, uintptr_t region_len) {
    root *r = pmkv_mg_root(region, region_len);
    if (!r) {
        r = malloc(sizeof *r);
        if (!r || pmkv_mg_set_root(region, region_len, r) != 0) {
            for (size_t i = 0; i < c->ncmds; i++) put(&c->out, OOM_REPLY, sizeof OOM_REPLY - 1);
            return;
        }
        r->magic = ROOT_MAGIC;
        r->head = NULL;
    }
    for (size_t i = 0; i < c->ncmds; i++) {
        args one = {c->a.v + c->cmd_start[i], c->cmd_start[i + 1] - c->cmd_start[i], 0};
        switch (COMMANDS[lookup(&one)].op) {
        case OP_SET:
            do_set(r, &one.v[1], &one.v[2], &c->out);
            break;
        case OP_DEL: {
            long long n = 0;
            for (size_t k = 1; k < one.n; k++) {
                item *it = find(r, &one.v[k]);
                if (it) {
                    HASH_DEL(r->head, it);
                    free(it);
                    n++;
                }
            }
            putf(&c->out, ":%lld\r\n", n);
            break;
        }
        case OP_FLUSH: {
            item *it, *tmp;
            HASH_ITER(hh, r->head, it, tmp) {
                HASH_DEL(r->head, it);
                free(it);
            }
            put(&c->out, "+OK\r\n", 5);
            break;
        }
        default:
            put(&c->out, "-ERR not a write\r\n", 18);
        }
    }
}

static void process_read(client *c, uint8_t *region, uintptr_t region_len) {
    root *r = pmkv_mg_root(region, region_len);
    for (size_t i = 0; i < c->ncmds; i++) {
        args one = {c->a.v + c->cmd_start[i], c->cmd_start[i + 1] - c->cmd_start[i], 0};
        if (buf_reserve(&c->out, 512) != 0) goto oom;
        switch (COMMANDS[lookup(&one)].op) {
        case OP_GET: {
            item *it = find(r, &one.v[1]);
            if (!it) {
                put(&c->out, c->resp3 ? "_\r\n" : "$-1\r\n", c->resp3 ? 3 : 5);
                break;
            }
            putf(&c->out, "$%u\r\n", it->vlen);
            if (buf_reserve(&c->out, it->vlen + 2) != 0) goto oom;
            put(&c->out, it->data + it->klen, it->vlen);
            put(&c->out, "\r\n", 2);
            break;
        }
        case OP_EXISTS: {
            long long n = 0;
            for (size_t k = 1; k < one.n; k++) n += find(r, &one.v[k]) != NULL;
            putf(&c->out, ":%lld\r\n", n);
            break;
        }
        case OP_DBSIZE:
            putf(&c->out, ":%u\r\n", r ? HASH_COUNT(r->head) : 0u);
            break;
        case OP_INFO: {
            char text[400];
            int n = snprintf(text, sizeof text,
                             "# Server\r\nredis_version:7.0.0\r\npmkv_server:kvserver (uthash on Mangosteen, "
                             "compiler capture)\r\n\r\n# Keyspace\r\ndb0:keys=%u,expires=0,avg_ttl=0\r\n",
                             r ? HASH_COUNT(r->head) : 0u);
            putf(&c->out, "$%d\r\n%s\r\n", n, text);
            break;
        }
        default:
            put(&c->out, "-ERR not a read\r\n", 17);
        }
    }
    return;
oom:
    c->out.n = 0; /* the connection answers every command of the run with an error */
}

static void process_request(void *cp, uint8_t *region, uintptr_t region_len) {
    client *c = cp;
    if (c->read_only)
        process_read(c, region, region_len);
    else
        process_write(c, region, region_len);
}

static const uint8_t *get_response(void *cp, uintptr_t *len) {
    client *c = cp;
    *len = c->out.n;
    return (const uint8_t *)c->out.p;
}

static const pmkv_mg_callbacks CALLBACKS = {init_client,  destroy_client,  deserialize_request,
                                            is_read_only, process_request, get_response};

/* ---- Connections. ---- */

static pmkv_mg *runtime;
static int verify;

typedef struct conn {
    int fd;
    pmkv_mg_client *mc;
    buf in, out, req;
    char proto; /* '2' or '3' (HELLO) */
    size_t gstart, gend, gcount; /* the pending run: bytes [gstart, gend) of `in` */
    int gcls;
} conn;

static int out_reserve(conn *k, size_t n) { return buf_reserve(&k->out, n); }

static void out_str(conn *k, const char *s) {
    size_t n = strlen(s);
    if (out_reserve(k, n) == 0) put(&k->out, s, n);
}

/* Run the pending run of commands as one request and append its replies. */
static void flush_group(conn *k) {
    if (k->gcount == 0) return;
    uint8_t *resp = NULL;
    uintptr_t rlen = 0;
    size_t n = k->gend - k->gstart;
    k->req.n = 0;
    int r = 1; /* 1: no room for the request here (pmkv's errors are negative) */
    if (buf_reserve(&k->req, n + 1) == 0) {
        put(&k->req, &k->proto, 1);
        put(&k->req, k->in.p + k->gstart, n);
        r = pmkv_mg_client_cmd(runtime, k->mc, (const uint8_t *)k->req.p, k->req.n, &resp, &rlen);
    }
    if (r == 0 && rlen > 0) {
        if (out_reserve(k, rlen) == 0) put(&k->out, resp, rlen);
    } else {
        const char *e = r >= 0 ? "out of memory" : pmkv_last_error();
        fprintf(stderr, "kvserver: a request of %zu commands failed: %s\n", k->gcount, e ? e : "?");
        char line[300];
        snprintf(line, sizeof line, "-ERR pmkv: %s\r\n", e ? e : "request failed");
        for (char *q = line; *q && q < line + sizeof line - 3; q++)
            if (*q == '\r' || *q == '\n') *q = ' ';
        size_t n = strlen(line);
        memcpy(line + n - 2, "\r\n", 2);
        for (size_t i = 0; i < k->gcount; i++) out_str(k, line);
        if (verify && r == PMKV_E_INTERNAL) {
            fprintf(stderr, "kvserver: verify mode failed, exiting\n");
            exit(3);
        }
    }
    pmkv_free(resp, rlen);
    k->gcount = 0;
}

static void handle_local(conn *k, const args *a, int i, bool *quit) {
    char line[128];
    switch (COMMANDS[i].op) {
    case OP_PING:
        if (a->n == 2) {
            snprintf(line, sizeof line, "$%zu\r\n", a->v[1].n);
            out_str(k, line);
            if (out_reserve(k, a->v[1].n + 2) == 0) {
                put(&k->out, a->v[1].p, a->v[1].n);
                put(&k->out, "\r\n", 2);
            }
        } else {
            out_str(k, "+PONG\r\n");
        }
        break;
    case OP_QUIT:
        out_str(k, "+OK\r\n");
        *quit = true;
        break;
    case OP_HELLO: {
        /* The handshake of RESP3 clients (redis-py 5 and later): the replies are the
         * same in both versions (RESP3 clients read RESP2's simple types). */
        int v = a->n >= 2 && a->v[1].n == 1 ? a->v[1].p[0] - '0' : 2;
        if (a->n >= 2 && (a->v[1].n != 1 || (v != 2 && v != 3))) {
            out_str(k, "-NOPROTO unsupported protocol version\r\n");
            break;
        }
        snprintf(line, sizeof line,
                 "%c3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n$5\r\nproto\r\n:%d\r\n",
                 v == 3 ? '%' : '*', v);
        if (v == 2) line[1] = '6'; /* an array of the 6 keys and values */
        out_str(k, line);
        k->proto = (char)('0' + v);
        break;
    }
    case OP_OK:
        out_str(k, "+OK\r\n");
        break;
    case OP_SELECT:
        out_str(k, a->v[1].n == 1 && a->v[1].p[0] == '0' ? "+OK\r\n" : "-ERR DB index is out of range\r\n");
        break;
    default:
        out_str(k, "*0\r\n");
    }
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *serve_conn(void *arg) {
    conn *k = arg;
    args a = {0};
    bool quit = false;
    if (pmkv_mg_client_open(runtime, &k->mc) != 0) {
        fprintf(stderr, "kvserver: client: %s\n", pmkv_last_error());
        goto done;
    }
    while (!quit) {
        if (buf_reserve(&k->in, 16 << 10) != 0) break;
        ssize_t n = read(k->fd, k->in.p + k->in.n, k->in.cap - k->in.n);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        k->in.n += (size_t)n;
        size_t pos = 0;
        k->gcount = 0;
        while (!quit && pos < k->in.n) {
            const char *err = "protocol error";
            long r = parse_command(k->in.p + pos, k->in.n - pos, &a, &err);
            if (r == 0) break;
            if (r < 0) {
                flush_group(k);
                char line[128];
                snprintf(line, sizeof line, "-ERR Protocol error: %s\r\n", err);
                out_str(k, line);
                quit = true;
                break;
            }
            if (a.n == 0) { /* an empty inline line */
                pos += (size_t)r;
                continue;
            }
            int i = lookup(&a);
            int cls = i >= 0 ? (int)COMMANDS[i].cls : C_ERROR;
            if (cls == C_READ || cls == C_WRITE) {
                if (k->gcount > 0 && (k->gcls != cls || k->gcount >= GROUP_CMDS || k->gend - k->gstart >= GROUP_BYTES))
                    flush_group(k);
                if (k->gcount == 0) {
                    k->gstart = pos;
                    k->gcls = cls;
                }
                k->gend = pos + (size_t)r;
                k->gcount++;
            } else {
                flush_group(k);
                if (cls == C_LOCAL) {
                    handle_local(k, &a, i, &quit);
                } else {
                    char line[160];
                    int nn = (int)(a.v[0].n > 40 ? 40 : a.v[0].n);
                    for (int q = 0; q < nn; q++)
                        if ((unsigned char)a.v[0].p[q] < 32) nn = q;
                    if (i == -2)
                        snprintf(line, sizeof line, "-ERR wrong number of arguments for '%.*s' command\r\n", nn,
                                 a.v[0].p);
                    else
                        snprintf(line, sizeof line, "-ERR unknown command '%.*s'\r\n", nn, a.v[0].p);
                    out_str(k, line);
                }
            }
            pos += (size_t)r;
        }
        flush_group(k);
        if (k->out.n > 0 && write_all(k->fd, k->out.p, k->out.n) != 0) break;
        k->out.n = 0;
        memmove(k->in.p, k->in.p + pos, k->in.n - pos);
        k->in.n -= pos;
        /* Give back the memory of a large request once it is done. */
        if (k->in.n == 0 && k->in.cap > (1u << 20)) {
            free(k->in.p);
            k->in = (buf){0};
        }
        if (k->out.cap > (1u << 20)) {
            free(k->out.p);
            k->out = (buf){0};
        }
    }
done:
    if (k->mc) pmkv_mg_client_close(runtime, k->mc);
    close(k->fd);
    free(a.v);
    free(k->in.p);
    free(k->out.p);
    free(k->req.p);
    free(k);
    return NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: kvserver --pool PATH [--port N] [--region-mib N] [--mode adr|eadr|msync|none] [--verify]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *pool = NULL, *mode = NULL;
    long port = 6379, region_mib = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verify")) {
            verify = 1;
            continue;
        }
        if (i + 1 >= argc) usage();
        if (!strcmp(argv[i], "--pool"))
            pool = argv[++i];
        else if (!strcmp(argv[i], "--port"))
            port = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--region-mib"))
            region_mib = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--mode"))
            mode = argv[++i];
        else
            usage();
    }
    if (!pool || port < 0 || port > 65535 || region_mib < 1 || region_mib > 4096) usage();
    signal(SIGPIPE, SIG_IGN);

    pmkv_mg_options o = {0};
    o.mode = mode;
    o.create = 1;
    o.region_size = (uint64_t)region_mib << 20;
    o.split_heap = 1;
    o.capture = PMKV_MG_CAPTURE_COMPILER;
    o.verify_capture = verify;
    if (pmkv_mg_open(pool, &o, &CALLBACKS, NULL, &runtime) != 0) {
        fprintf(stderr, "kvserver: %s: %s\n", pool, pmkv_last_error());
        return 1;
    }

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    socklen_t sl = sizeof sa;
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 512) != 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) {
        perror("kvserver: listen");
        return 1;
    }
    printf("ready %u\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE) continue;
            perror("kvserver: accept");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *k = calloc(1, sizeof *k);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (k) k->proto = '2';
        if (!k || (k->fd = fd, pthread_create(&t, &at, serve_conn, k)) != 0) {
            close(fd);
            free(k);
        }
        pthread_attr_destroy(&at);
    }
}
