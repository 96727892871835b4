/* Split allocation from C (SPEC M7): an application that keeps its state in ordinary
 * malloc'd structures — a chained hash table of malloc'd nodes, values grown with realloc,
 * nodes freed on delete — made durable by Mangosteen with `split_heap`, without a single
 * change to how it allocates. Checks: blocks malloc'd inside read-write requests lie in
 * the region, others do not; the table survives a close and reopen at the same address
 * (its pointers stay valid) and matches a model after every phase; freed blocks are
 * reused; pmkv_mg_set_root is refused outside a request. Needs libpmkv_malloc (the opt-in
 * interposer). Every other allocation entry point (posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc, reallocarray, malloc_usable_size) serves a request from the
 * region too, aligned as asked; inside pmkv_mg_transient_begin/end they are the C
 * library's, so a buffer a write request makes and a later read reuses is not persistent.
 * A request that fills the heap (malloc returns NULL) and calls pmkv_mg_abort leaves none
 * of its writes.
 * Usage: test_mangosteen_heap DIR; or test_mangosteen_heap DIR refused, for a
 * build linked with plain -lpmkv: split_heap must then be refused, naming the fix. */
#define _DEFAULT_SOURCE
#define _GNU_SOURCE
#include "pmkv.h"
#include "check.h"
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define BUCKETS 64
#define KEYS 300

/* The application's state: nothing but malloc'd memory and pointers. */
typedef struct node {
    struct node *next;
    unsigned key;
    size_t len;
    char *value; /* malloc'd, grown with realloc */
} node;

typedef struct table {
    node *buckets[BUCKETS];
    unsigned count;
} table;

typedef struct client {
    char op; /* 'S' set, 'D' delete, 'G' get */
    unsigned key;
    char value[64];
    char response[80];
    size_t response_len;
} client;

/* What the test saw inside requests. */
static unsigned outside_region = 0; /* malloc'd blocks of read-write requests outside the region */

static bool in_region(const void *p, const uint8_t *region, size_t len) {
    return (const uint8_t *)p >= region && (const uint8_t *)p < region + len;
}

static void *init_client(void *params) {
    (void)params;
    return calloc(1, sizeof(client));
}
static void destroy_client(void *c) { free(c); }

/* Wire format: op(1) key(4, LE) value(rest, for 'S'). */
static int deserialize_request(void *cp, const uint8_t *req, size_t len) {
    client *c = cp;
    if (len < 5 || !strchr("SDGARTF", req[0]) || req[0] == 0) return 1;
    if (len - 5 >= sizeof c->value) return 2;
    c->op = (char)req[0];
    c->key = req[1] | req[2] << 8 | req[3] << 16 | (unsigned)req[4] << 24;
    memset(c->value, 0, sizeof c->value);
    memcpy(c->value, req + 5, len - 5);
    return 0;
}

static bool is_read_only(void *cp) { return ((client *)cp)->op == 'G' || ((client *)cp)->op == 'R'; }

/* A block from an entry point inside a write request: in the region, aligned, usable. */
static void *entry_point(void *p, size_t align, size_t n, const uint8_t *region, size_t len) {
    CHECK(p != NULL);
    CHECK(in_region(p, region, len));
    CHECK((uintptr_t)p % align == 0);
    CHECK(malloc_usable_size(p) >= n);
    memset(p, 0x5a, n);
    return p;
}

/* 'A': every allocation entry point, inside a write request. */
static void all_entry_points(uint8_t *region, size_t len) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    void *p[8];
    CHECK(posix_memalign(&p[0], 64, 100) == 0);
    entry_point(p[0], 64, 100, region, len);
    p[1] = entry_point(aligned_alloc(128, 256), 128, 256, region, len);
    p[2] = entry_point(memalign(32, 40), 32, 40, region, len);
    p[3] = entry_point(valloc(100), pg, 100, region, len);
    p[4] = entry_point(pvalloc(100), pg, pg, region, len);
    p[5] = entry_point(reallocarray(NULL, 10, 8), 16, 80, region, len);
    p[5] = entry_point(reallocarray(p[5], 100, 8), 16, 800, region, len);
    p[6] = entry_point(calloc(3, 5), 16, 15, region, len);
    p[7] = entry_point(realloc(NULL, 33), 16, 33, region, len);
    errno = 0;
    volatile size_t huge = SIZE_MAX; /* not a constant: the compiler would refuse the call */
    CHECK(reallocarray(NULL, huge, 2) == NULL && errno == ENOMEM);
    void *bad = NULL;
    CHECK(posix_memalign(&bad, 24, 8) == EINVAL && bad == NULL);
    for (int i = 0; i < 8; i++) free(p[i]);
    /* A transient section: the C library's blocks, inside the request too. */
    pmkv_mg_transient_begin();
    void *t = malloc(50);
    void *ta = aligned_alloc(64, 64);
    CHECK(t && !in_region(t, region, len) && ta && !in_region(ta, region, len));
    CHECK(pmkv_mg_transient_end() == 0);
    free(t);
    free(ta);
    CHECK(pmkv_mg_transient_end() == PMKV_E_INVALID_ARGUMENT);
}

/* 'T': a buffer the client keeps across requests, made by a write request (value "1": in
 * a transient section); 'R': a read that writes it again. */
static char *kept = NULL;

static void respond(client *c, const char *s) {
    c->response_len = strlen(s);
    memcpy(c->response, s, c->response_len);
}

static void process_request(void *cp, uint8_t *region, size_t region_len) {
    client *c = cp;
    table *t = pmkv_mg_root(region, region_len);
    if (c->op == 'A') {
        all_entry_points(region, region_len);
        respond(c, "OK");
        return;
    }
    if (c->op == 'F') { /* new nodes until malloc finds the heap full: then abort */
        for (unsigned k = KEYS;; k++) {
            node *n = malloc(sizeof *n);
            if (!n) {
                CHECK(pmkv_mg_abort() == 0);
                return;
            }
            n->key = k;
            n->len = 0;
            n->value = NULL;
            n->next = t->buckets[k % BUCKETS];
            t->buckets[k % BUCKETS] = n;
            t->count++;
        }
    }
    if (c->op == 'T') { /* value "1": in a transient section; "0": not */
        if (c->value[0] == '1') pmkv_mg_transient_begin();
        kept = malloc(32);
        if (c->value[0] == '1') CHECK(pmkv_mg_transient_end() == 0);
        CHECK(in_region(kept, region, region_len) == (c->value[0] == '0'));
        strcpy(kept, "made");
        respond(c, "OK");
        return;
    }
    if (c->op == 'R') { /* a read that reuses the kept buffer */
        strcpy(kept, "reused");
        respond(c, kept);
        return;
    }
    if (c->op == 'G') {
        node *n = t ? t->buckets[c->key % BUCKETS] : NULL;
        while (n && n->key != c->key) n = n->next;
        respond(c, n ? n->value : "-");
        return;
    }
    if (!t) { /* the first write: the table itself comes from malloc too */
        t = calloc(1, sizeof *t);
        if (!in_region(t, region, region_len)) outside_region++;
        CHECK(pmkv_mg_set_root(region, region_len, t) == 0);
    }
    node **at = &t->buckets[c->key % BUCKETS];
    while (*at && (*at)->key != c->key) at = &(*at)->next;
    if (c->op == 'D') {
        if (*at) {
            node *n = *at;
            *at = n->next;
            free(n->value);
            free(n);
            t->count--;
        }
        respond(c, "OK");
        return;
    }
    size_t len = strlen(c->value) + 1;
    if (!*at) {
        node *n = malloc(sizeof *n);
        if (!in_region(n, region, region_len)) outside_region++;
        n->next = NULL;
        n->key = c->key;
        n->len = 0;
        n->value = NULL;
        *at = n;
        t->count++;
    }
    node *n = *at;
    if (n->len < len) { /* grow (and move) with realloc, as applications do */
        char *v = realloc(n->value, len);
        if (!in_region(v, region, region_len)) outside_region++;
        n->value = v;
        n->len = len;
    }
    memcpy(n->value, c->value, len);
    respond(c, "OK");
}

static const uint8_t *get_response(void *cp, size_t *len) {
    client *c = cp;
    *len = c->response_len;
    return (const uint8_t *)c->response;
}

static const pmkv_mg_callbacks CALLBACKS = {
    init_client, destroy_client, deserialize_request, is_read_only, process_request, get_response,
};

/* The model: each key's value, or "" for absent. */
static char model[KEYS][64];

static int cmd_rc(pmkv_mg *m, pmkv_mg_client *c, char op, unsigned key, const char *value, char *out) {
    uint8_t req[80] = {(uint8_t)op, key & 0xff, (key >> 8) & 0xff, (key >> 16) & 0xff, key >> 24};
    size_t n = 5;
    if (value) {
        memcpy(req + 5, value, strlen(value));
        n += strlen(value);
    }
    uint8_t *resp;
    size_t resp_len;
    int r = pmkv_mg_client_cmd(m, c, req, n, &resp, &resp_len);
    if (r != 0) return r;
    CHECK(resp_len < 80);
    memcpy(out, resp, resp_len);
    out[resp_len] = 0;
    pmkv_free(resp, resp_len);
    return 0;
}

static void cmd(pmkv_mg *m, pmkv_mg_client *c, char op, unsigned key, const char *value, char *out) {
    CHECK(cmd_rc(m, c, op, key, value, out) == 0);
}

static void check_model(pmkv_mg *m, pmkv_mg_client *c) {
    char got[80];
    for (unsigned k = 0; k < KEYS; k++) {
        cmd(m, c, 'G', k, NULL, got);
        CHECK(strcmp(got, model[k][0] ? model[k] : "-") == 0);
    }
}

static pmkv_mg *open_store_with(const char *path, int create, int verify) {
    pmkv_mg_options o = {0};
    o.create = create;
    o.verify_capture = verify;
    o.region_size = 256 << 10;
    o.split_heap = 1;
    pmkv_mg *m = NULL;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == 0);
    return m;
}

static pmkv_mg *open_store(const char *path, int create) { return open_store_with(path, create, 0); }

/* Every allocation entry point, and a kept response buffer with and without a transient
 * section, in verify mode. */
static void entry_points_and_transient(const char *path) {
    pmkv_mg *m = open_store_with(path, 0, 1);
    pmkv_mg_client *c = NULL;
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    char out[80];
    cmd(m, c, 'A', 0, NULL, out);
    CHECK(strcmp(out, "OK") == 0);
    /* Outside requests the same calls are the C library's. */
    void *p = NULL;
    CHECK(posix_memalign(&p, 64, 64) == 0 && p != NULL);
    free(p);
    p = aligned_alloc(64, 64);
    CHECK(p != NULL && malloc_usable_size(p) >= 64);
    free(p);
    /* A buffer kept by the client, made by a write request in a transient section: the C
     * library's, so a later read may write it (page capture keeps the region read-only
     * outside batches: a block of the region written there would fault; under compiler
     * capture verify mode reports it, see test_mangosteen_cxx). */
    cmd(m, c, 'T', 0, "1", out);
    cmd(m, c, 'R', 0, NULL, out);
    CHECK(strcmp(out, "reused") == 0);
    cmd(m, c, 'S', 1, "after", out);
    strcpy(model[1], "after");
    /* A request that fills the heap and aborts leaves nothing: not a node, not a count. */
    CHECK(cmd_rc(m, c, 'F', 0, NULL, out) == PMKV_E_INVALID_ARGUMENT);
    CHECK(strstr(pmkv_last_error(), "rolled back") != NULL);
    CHECK(pmkv_mg_abort() == PMKV_E_INVALID_ARGUMENT);
    check_model(m, c);
    cmd(m, c, 'S', 2, "still", out);
    strcpy(model[2], "still");
    check_model(m, c);
    free(kept);
    kept = NULL;
    check_model(m, c);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);
}

int main(int argc, char **argv) {
    CHECK(argc == 2 || (argc == 3 && strcmp(argv[2], "refused") == 0));
    char path[4096];
    snprintf(path, sizeof path, "%s/mg-heap.pool", argv[1]);
    unlink(path);
    if (argc == 3) {
        /* libpmkv alone leaves malloc to the C library, so split_heap cannot work. */
        pmkv_mg_options o = {0};
        o.create = 1;
        o.split_heap = 1;
        pmkv_mg *m = NULL;
        CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == PMKV_E_UNSUPPORTED);
        CHECK(m == NULL);
        CHECK(strstr(pmkv_last_error(), "libpmkv_malloc") != NULL);
        CHECK(strstr(pmkv_last_error(), "LD_PRELOAD") != NULL);
        unlink(path);
        return 0;
    }

    pmkv_mg *m = open_store(path, 1);
    pmkv_mg_client *c = NULL;
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    char out[80];
    /* Sets with values that grow (realloc), deletes, re-sets. */
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned k = 0; k < KEYS; k++) {
            if ((k + round) % 4 == 0 && model[k][0]) {
                cmd(m, c, 'D', k, NULL, out);
                model[k][0] = 0;
                continue;
            }
            char v[64];
            snprintf(v, sizeof v, "value %u of round %u%.*s", k, round, (int)(round * 9), "xxxxxxxxxxxxxxxxxxxxxxxxxxx");
            cmd(m, c, 'S', k, v, out);
            CHECK(strcmp(out, "OK") == 0);
            strcpy(model[k], v);
        }
        check_model(m, c);
    }
    CHECK(outside_region == 0);
    /* Outside requests, malloc is the C library's. */
    uint8_t *probe = malloc(100);
    CHECK(probe != NULL);
    free(probe);
    /* pmkv_mg_set_root only inside a read-write request. */
    CHECK(pmkv_mg_set_root(NULL, 0, NULL) == PMKV_E_INVALID_ARGUMENT);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);

    /* Reopen: the region is back at its address, the table's pointers are valid, every
     * value is the model's; then more writes (freed blocks are reused: the region
     * (256 KiB) would not hold 30 rounds of fresh nodes and values otherwise). */
    m = open_store(path, 0);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    check_model(m, c);
    for (unsigned round = 0; round < 30; round++) {
        for (unsigned k = 0; k < KEYS; k++) {
            if ((k + round) % 2 == 0) {
                cmd(m, c, 'D', k, NULL, out);
                model[k][0] = 0;
            } else {
                char v[64];
                snprintf(v, sizeof v, "r%u k%u %.*s", round, k, (int)(k % 40), "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
                cmd(m, c, 'S', k, v, out);
                strcpy(model[k], v);
            }
        }
    }
    check_model(m, c);
    CHECK(outside_region == 0);
    /* The heap filled and the request aborted, without verify mode: the before images
     * come from the PM copy. */
    CHECK(cmd_rc(m, c, 'F', 0, NULL, out) == PMKV_E_INVALID_ARGUMENT);
    check_model(m, c);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);
    m = open_store(path, 0);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    check_model(m, c);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);
    entry_points_and_transient(path);
    printf("mangosteen split heap from C: all checks passed\n");
    return 0;
}
