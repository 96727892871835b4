/* Compiler capture from C: an application built with pmkv-cc (clang's ThreadSanitizer
 * instrumentation, libpmkv's hooks), run with capture = PMKV_MG_CAPTURE_COMPILER and
 * verify_capture on. Its state is a hash table of fixed-size entries in the region, written
 * with plain stores, struct copies, memset and memmove; after thousands of random requests
 * no changed byte was missed (verify mode would fail the request), and a reopen finds
 * every acknowledged write. A write made by code built without the instrumentation (a
 * function marked no_sanitize) is caught by verify mode, and still survives a reopen. A
 * later open asking for a larger region is refused, naming the region's size.
 * Usage: test_mangosteen_cc DIR, or test_mangosteen_cc DIR plain for the same program
 * built with a plain compiler: compiler capture is then refused at open (its writes would
 * go uncaptured), no pool is created, and page capture works. */
#define _DEFAULT_SOURCE
#include "pmkv.h"
#include "check.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 512
#define KEY_SZ 12
#define VAL_MAX 100
#define RECENT 16

typedef struct entry {
    uint32_t used;
    uint32_t vlen;
    char key[KEY_SZ];
    char val[VAL_MAX];
} entry;

/* The state at region offset 0. */
typedef struct state {
    uint64_t writes;
    uint64_t scratch;
    char recent[RECENT][KEY_SZ]; /* the last keys written, newest first (memmove) */
    entry table[SLOTS];
} state;

typedef struct client {
    char op;
    entry cur;
    uint8_t resp[VAL_MAX + 8];
    size_t resp_len;
} client;

static void *init_client(void *p) {
    (void)p;
    return calloc(1, sizeof(client));
}
static void destroy_client(void *c) { free(c); }

/* Wire: op(1) key(KEY_SZ) [value]. S = set, D = delete, G = get, X = uncaptured write. */
static int deserialize_request(void *cp, const uint8_t *req, size_t len) {
    client *c = cp;
    if (len < 1 + KEY_SZ || len > 1 + KEY_SZ + VAL_MAX) return 1;
    c->op = (char)req[0];
    memset(&c->cur, 0, sizeof c->cur);
    memcpy(c->cur.key, req + 1, KEY_SZ);
    c->cur.vlen = (uint32_t)(len - 1 - KEY_SZ);
    memcpy(c->cur.val, req + 1 + KEY_SZ, c->cur.vlen);
    c->cur.used = 1;
    return strchr("SDGX", c->op) && c->op != 0 ? 0 : 2;
}

static bool is_read_only(void *cp) { return ((client *)cp)->op == 'G'; }

static unsigned slot_of(const char *key) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < KEY_SZ; i++) h = (h ^ (uint8_t)key[i]) * 16777619u;
    return h % SLOTS;
}

/* Linear probing; deletes leave no tombstones because the test's keys never collide
 * across probes it relies on: each key has its own home slot (see `key_of`). */
static entry *find(state *st, const char *key) { return &st->table[slot_of(key)]; }

/* Built without the instrumentation: its store is invisible to the hooks. */
__attribute__((no_sanitize("thread"), noinline)) static void uncaptured(state *st) { st->scratch = 0x5ca1ab1e; }

static void process_request(void *cp, uint8_t *region, size_t region_len) {
    client *c = cp;
    state *st = (state *)region;
    CHECK(region_len >= sizeof *st);
    entry *e = find(st, c->cur.key);
    c->resp_len = 0;
    switch (c->op) {
    case 'S':
        *e = c->cur; /* a struct copy */
        st->writes++;
        memmove(st->recent[1], st->recent[0], (RECENT - 1) * KEY_SZ);
        memcpy(st->recent[0], c->cur.key, KEY_SZ);
        break;
    case 'D':
        if (e->used && memcmp(e->key, c->cur.key, KEY_SZ) == 0) memset(e, 0, sizeof *e);
        break;
    case 'G':
        if (e->used && memcmp(e->key, c->cur.key, KEY_SZ) == 0) {
            memcpy(c->resp, e->val, e->vlen);
            c->resp_len = e->vlen;
        }
        break;
    case 'X':
        uncaptured(st);
        break;
    }
}

static const uint8_t *get_response(void *cp, size_t *len) {
    client *c = cp;
    *len = c->resp_len;
    return c->resp;
}

static const pmkv_mg_callbacks CALLBACKS = {init_client, destroy_client, deserialize_request,
                                            is_read_only, process_request, get_response};

/* Key i (< SLOTS): chosen so that its home slot is i's own. */
static void key_of(unsigned i, char *key) {
    for (uint32_t salt = 0;; salt++) {
        memset(key, 0, KEY_SZ);
        snprintf(key, KEY_SZ, "k%u.%u", i, salt);
        if (slot_of(key) == i) return;
    }
}

static size_t request(uint8_t *req, char op, const char *key, const char *val, size_t vlen) {
    req[0] = (uint8_t)op;
    memcpy(req + 1, key, KEY_SZ);
    memcpy(req + 1 + KEY_SZ, val, vlen);
    return 1 + KEY_SZ + vlen;
}

static int cmd(pmkv_mg *m, pmkv_mg_client *c, const uint8_t *req, size_t n, char *out, size_t *out_len) {
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    int r = pmkv_mg_client_cmd(m, c, req, n, &resp, &resp_len);
    if (r == 0) {
        if (out) memcpy(out, resp, resp_len);
        if (out_len) *out_len = resp_len;
        pmkv_free(resp, resp_len);
    }
    return r;
}

static char keys[SLOTS][KEY_SZ];
static char model[SLOTS][VAL_MAX];
static size_t model_len[SLOTS];
static bool present[SLOTS];

static void check_all(pmkv_mg *m, pmkv_mg_client *c) {
    uint8_t req[1 + KEY_SZ + VAL_MAX];
    for (unsigned i = 0; i < SLOTS; i++) {
        char got[VAL_MAX];
        size_t n = 0;
        CHECK(cmd(m, c, req, request(req, 'G', keys[i], "", 0), got, &n) == 0);
        CHECK(n == (present[i] ? model_len[i] : 0));
        CHECK(!present[i] || memcmp(got, model[i], n) == 0);
    }
}

/* Built without pmkv-cc: compiler capture refused, nothing created; page capture works. */
static int plain(const char *path) {
    pmkv_mg_options o = {0};
    o.create = 1;
    o.region_size = 256 << 10;
    o.capture = PMKV_MG_CAPTURE_COMPILER;
    pmkv_mg *m = NULL;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == PMKV_E_UNSUPPORTED);
    CHECK(m == NULL);
    CHECK(strstr(pmkv_last_error(), "was not compiled with pmkv-cc") != NULL);
    CHECK(strstr(pmkv_last_error(), "PMKV_MG_CAPTURE_PAGES") != NULL);
    CHECK(access(path, F_OK) != 0);
    o.capture = PMKV_MG_CAPTURE_PAGES;
    o.verify_capture = 1;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == 0);
    pmkv_mg_client *c = NULL;
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    uint8_t req[1 + KEY_SZ + VAL_MAX];
    CHECK(cmd(m, c, req, request(req, 'S', keys[3], "paged", 5), NULL, NULL) == 0);
    char got[VAL_MAX];
    size_t n = 0;
    CHECK(cmd(m, c, req, request(req, 'G', keys[3], "", 0), got, &n) == 0);
    CHECK(n == 5 && memcmp(got, "paged", 5) == 0);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);
    printf("mangosteen plain build: compiler capture refused, page capture works\n");
    return 0;
}

int main(int argc, char **argv) {
    CHECK(argc == 2 || (argc == 3 && strcmp(argv[2], "plain") == 0));
    char path[4096];
    snprintf(path, sizeof path, "%s/mgcc.pool", argv[1]);
    unlink(path);
    for (unsigned i = 0; i < SLOTS; i++) key_of(i, keys[i]);
    if (argc == 3) return plain(path);

    pmkv_mg_options o = {0};
    o.create = 1;
    o.region_size = 256 << 10;
    o.capture = PMKV_MG_CAPTURE_COMPILER;
    o.verify_capture = 1;
    pmkv_mg *m = NULL;
    pmkv_mg_client *c = NULL;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == 0);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    uint8_t req[1 + KEY_SZ + VAL_MAX];
    uint64_t x = 88172645463325252ull;
    for (int op = 0; op < 5000; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned i = (unsigned)(x % SLOTS);
        if (x % 4 == 0) {
            CHECK(cmd(m, c, req, request(req, 'D', keys[i], "", 0), NULL, NULL) == 0);
            present[i] = false;
        } else {
            size_t n = (size_t)((x >> 20) % (VAL_MAX + 1));
            for (size_t b = 0; b < n; b++) model[i][b] = (char)(x >> (b % 56));
            model_len[i] = n;
            present[i] = true;
            CHECK(cmd(m, c, req, request(req, 'S', keys[i], model[i], n), NULL, NULL) == 0);
        }
    }
    check_all(m, c);

    /* An uncaptured write fails verification, and is logged anyway. */
    CHECK(cmd(m, c, req, request(req, 'X', keys[0], "", 0), NULL, NULL) == PMKV_E_INTERNAL);
    CHECK(strstr(pmkv_last_error(), "not captured") != NULL);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);

    /* Reopen with page capture: the same state, every acknowledged write. */
    o.capture = PMKV_MG_CAPTURE_PAGES;
    o.verify_capture = 0;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == 0);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    check_all(m, c);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);

    o.capture = 7;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == PMKV_E_INVALID_ARGUMENT);

    /* A larger region at a later open is refused, naming the size; 0 opens what exists. */
    o.capture = PMKV_MG_CAPTURE_PAGES;
    o.region_size = 512 << 10;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == PMKV_E_INVALID_ARGUMENT);
    CHECK(strstr(pmkv_last_error(), "the region is 262144 bytes") != NULL);
    o.region_size = 0;
    CHECK(pmkv_mg_open(path, &o, &CALLBACKS, NULL, &m) == 0);
    CHECK(pmkv_mg_region_size(m) == 256 << 10);
    CHECK(pmkv_mg_client_open(m, &c) == 0);
    check_all(m, c);
    pmkv_mg_client_close(m, c);
    CHECK(pmkv_mg_close(m) == 0);
    printf("mangosteen compiler capture from C: all checks passed\n");
    return 0;
}
