/* C tests of the pmkv C API: every function, every error path, NULL and oversized
 * arguments. Built and run by tests/run.sh (plainly and under AddressSanitizer, against
 * the debug and the release library) once per engine: `test_pmkv DIR [ENGINE]`. */
#include "pmkv.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    pmkv_last_error());                                              \
            failures++;                                                              \
        }                                                                            \
    } while (0)

#define K(s) (const uint8_t *)(s), strlen(s)
/* A bound from a string literal, embedded NUL bytes included; OPEN: no bound. */
#define B(s) (const uint8_t *)(s), sizeof(s) - 1
#define OPEN NULL, 0

/* Whether a cursor over [start, end) (backwards if `reverse`), stopped after `limit`
 * records, yields exactly the keys `want` (NULL-terminated, in order), each with the value
 * "v:KEY". */
static int range_is(pmkv_store *s, const uint8_t *start, size_t start_len, const uint8_t *end, size_t end_len,
                    int reverse, int limit, const char *const *want) {
    pmkv_cursor *c = NULL;
    if (pmkv_cursor_open(s, start, start_len, end, end_len, reverse, &c) != PMKV_OK) return 0;
    const uint8_t *k, *v;
    size_t kl, vl;
    int n = 0, ok = 1;
    while (n < limit && pmkv_cursor_next(c, &k, &kl, &v, &vl) == PMKV_OK) {
        if (want[n] == NULL || kl != strlen(want[n]) || memcmp(k, want[n], kl) != 0 || vl != kl + 2 ||
            memcmp(v, "v:", 2) != 0 || memcmp(v + 2, k, kl) != 0) {
            ok = 0;
            break;
        }
        n++;
    }
    if (n < limit && want[n] != NULL) ok = 0;
    pmkv_cursor_close(c);
    return ok;
}

/* The range edge cases of docs/design/api.md ("Range edge cases", 1-9; C has no named
 * inclusive end or exclusive start, so not 10) over that list's keys, on a fresh pool. */
static void range_edge_cases(const char *dir, const char *engine) {
    char path[512];
    snprintf(path, sizeof path, "%s/c-range-%s-%d.pool", dir, engine, (int)getpid());
    unlink(path);
    pmkv_options o = {0};
    o.engine = engine;
    o.create = 1;
    o.initial_size = 8 << 20;
    pmkv_store *s = NULL;
    CHECK(pmkv_open(path, &o, &s) == PMKV_OK);
    if (s == NULL) return;
    const char *keys[] = {"", "a", "b", "ba", "bb", "b\xff", "c", NULL};
    for (int i = 0; keys[i]; i++) {
        char v[16];
        snprintf(v, sizeof v, "v:%s", keys[i]);
        CHECK(pmkv_put(s, K(keys[i]), K(v)) == PMKV_OK);
    }
    const int ALL = 1 << 30;
    const char *none[] = {NULL};
    /* 1: no key between the bounds. */
    CHECK(range_is(s, B("a\0"), B("b"), 0, ALL, none));
    /* 2: start == end, present and absent. */
    CHECK(range_is(s, B("b"), B("b"), 0, ALL, none));
    CHECK(range_is(s, B("b0"), B("b0"), 1, ALL, none));
    /* 3: end before start: empty, no error, not swapped. */
    CHECK(range_is(s, B("c"), B("a"), 0, ALL, none));
    CHECK(range_is(s, B("c"), B("a"), 1, ALL, none));
    /* 4: bounds at present keys: start in, end out. */
    CHECK(range_is(s, B("a"), B("ba"), 0, ALL, (const char *[]){"a", "b", NULL}));
    /* 5: bounds at absent keys. */
    CHECK(range_is(s, B("a0"), B("bc"), 0, ALL, (const char *[]){"b", "ba", "bb", NULL}));
    /* 6: open ends. */
    CHECK(range_is(s, B("b"), OPEN, 0, ALL, (const char *[]){"b", "ba", "bb", "b\xff", "c", NULL}));
    CHECK(range_is(s, OPEN, B("b"), 0, ALL, (const char *[]){"", "a", NULL}));
    CHECK(range_is(s, OPEN, OPEN, 0, ALL, keys));
    /* 7: the empty key is a key: a non-NULL pointer of length 0 bounds at it. */
    CHECK(range_is(s, B(""), OPEN, 0, ALL, keys));
    CHECK(range_is(s, OPEN, B(""), 0, ALL, none));
    CHECK(range_is(s, OPEN, B(""), 1, ALL, none));
    /* 8: backwards: the same records, highest first; stopping early keeps the highest. */
    CHECK(range_is(s, B("a"), B("bb"), 1, ALL, (const char *[]){"ba", "b", "a", NULL}));
    CHECK(range_is(s, B("a"), B("bb"), 1, 2, (const char *[]){"ba", "b", NULL}));
    /* 9: a prefix is [P, successor of P): "b" -> [b, c); "b\xff" -> [b\xff, c). */
    CHECK(range_is(s, B("b"), B("c"), 0, ALL, (const char *[]){"b", "ba", "bb", "b\xff", NULL}));
    CHECK(range_is(s, B("b"), B("c"), 1, ALL, (const char *[]){"b\xff", "bb", "ba", "b", NULL}));
    CHECK(range_is(s, B("b\xff"), B("c"), 0, ALL, (const char *[]){"b\xff", NULL}));
    /* NULL with a length is an error, not an open end. */
    pmkv_cursor *c = NULL;
    CHECK(pmkv_cursor_open(s, NULL, 3, OPEN, 0, &c) == PMKV_E_INVALID_ARGUMENT && c == NULL);
    CHECK(pmkv_cursor_open(s, OPEN, NULL, 1, 0, &c) == PMKV_E_INVALID_ARGUMENT && c == NULL);
    CHECK(pmkv_close(s) == PMKV_OK);
    unlink(path);
}

/* The errors a C user meets first say what to do next, in the library's own words (the
 * CLI and Python print the same texts): a damaged value names `pmkv check` and
 * `pmkv salvage` on this pool; a pool open elsewhere names who holds it. */
static void errors_say_what_to_do(const char *dir, const char *engine) {
    char path[512];
    snprintf(path, sizeof path, "%s/c-errors-%s-%d.pool", dir, engine, (int)getpid());
    unlink(path);
    pmkv_options o = {0};
    o.engine = engine;
    o.create = 1;
    o.initial_size = 8 << 20;
    pmkv_store *s = NULL;
    CHECK(pmkv_open(path, &o, &s) == PMKV_OK);
    if (s == NULL) return;
    char val[256];
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof key, "key%03d", i);
        val[0] = 0;
        for (int r = 0; r < 20; r++) snprintf(val + strlen(val), sizeof val - strlen(val), "VALUE-%03d-", i);
        CHECK(pmkv_put(s, K(key), K(val)) == PMKV_OK);
    }

    /* A second handle in this process: refused, and the message says so. */
    pmkv_store *s2 = NULL;
    CHECK(pmkv_open(path, NULL, &s2) == PMKV_E_LOCKED && s2 == NULL);
    CHECK(strstr(pmkv_last_error(), "this process (another handle)") != NULL);
    CHECK(strstr(pmkv_last_error(), "--wait SECONDS") != NULL);
    CHECK(pmkv_close(s) == PMKV_OK);

    /* Flip one byte in every copy of key007's value in the file (a log may hold a stale
     * copy beside the live one). */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f == NULL) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    char *data = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    CHECK(fread(data, 1, (size_t)size, f) == (size_t)size);
    int copies = 0;
    for (long i = 0; i + 10 <= size; i++)
        if (memcmp(data + i, "VALUE-007-", 10) == 0) {
            fseek(f, i + 3, SEEK_SET);
            fputc((unsigned char)data[i + 3] ^ 0xFF, f);
            copies++;
            i += 199;
        }
    CHECK(copies > 0);
    fclose(f);
    free(data);

    /* Found at the first read of that value (hart, nbtree: per-record checks), or at the
     * open (mangosteen verifies every line of its copy at every open): either way the
     * error is PMKV_E_CORRUPT and names the two commands. */
    uint8_t buf[256];
    size_t len = 0;
    int rc = pmkv_open(path, NULL, &s);
    if (rc == PMKV_OK) rc = pmkv_get(s, K("key007"), buf, sizeof buf, &len);
    CHECK(rc == PMKV_E_CORRUPT);
    char want[700];
    snprintf(want, sizeof want, "pmkv check %s", path);
    CHECK(strstr(pmkv_last_error(), want) != NULL);
    snprintf(want, sizeof want, "pmkv salvage %s NEW_POOL", path);
    CHECK(strstr(pmkv_last_error(), want) != NULL);
    if (s != NULL) {
        /* Damage found at a read leaves the rest readable. */
        CHECK(pmkv_get(s, K("key008"), buf, sizeof buf, &len) == PMKV_OK && len == 200 &&
              memcmp(buf, "VALUE-008-", 10) == 0);
        pmkv_close(s);
    }
    unlink(path);
}

/* Mode wal and its sync policies: what a power loss keeps, by policy (1 every acknowledged
 * write, -2 all but about the last second, -3 a consistent prefix), no warning, the
 * policy named; no mode given opens a disk pool in wal with "always" (adr elsewhere); an
 * unknown policy is refused. */
static void wal_sync_policies(const char *dir, const char *engine) {
    char path[512];
    snprintf(path, sizeof path, "%s/c-wal-%s-%d.pool", dir, engine, (int)getpid());
    const char *policy[] = {NULL, "always", "everysec", "no"};
    const int power_loss[] = {1, 1, -2, -3};
    for (int i = 0; i < 4; i++) {
        unlink(path);
        pmkv_options o = {0};
        o.engine = engine;
        o.create = 1;
        o.mode = i == 0 ? NULL : "wal";
        o.sync = policy[i];
        pmkv_store *s = NULL;
        CHECK(pmkv_open(path, &o, &s) == PMKV_OK);
        if (s == NULL) return;
        CHECK(pmkv_put(s, K("k"), K("v")) == PMKV_OK);
        pmkv_durability d;
        memset(&d, 0, sizeof d);
        CHECK(pmkv_store_durability(s, &d) == PMKV_OK);
        if (i == 0 && strcmp(d.medium, "disk") != 0) {
            /* Not a disk: the default is adr, which has no sync policy. */
            CHECK(strcmp(d.mode, "adr") == 0 && d.sync == NULL);
        } else {
            CHECK(strcmp(d.mode, "wal") == 0);
            CHECK(d.sync != NULL && strcmp(d.sync, policy[i] ? policy[i] : "always") == 0);
            CHECK(d.process_crash == 1);
            if (strcmp(d.medium, "memory") != 0) {
                CHECK(d.power_loss == power_loss[i] && d.kernel_crash == power_loss[i] && d.reboot == 1);
                CHECK(d.warning == NULL);
            }
        }
        CHECK(pmkv_close(s) == PMKV_OK);
    }
    /* Reopened in adr: no sync policy to report. */
    pmkv_options o = {0};
    o.mode = "adr";
    pmkv_store *s = NULL;
    CHECK(pmkv_open(path, &o, &s) == PMKV_OK);
    if (s != NULL) {
        pmkv_durability d;
        CHECK(pmkv_store_durability(s, &d) == PMKV_OK && d.sync == NULL && strcmp(d.mode, "adr") == 0);
        uint8_t buf[8];
        size_t len = 0;
        CHECK(pmkv_get(s, K("k"), buf, sizeof buf, &len) == PMKV_OK && len == 1 && buf[0] == 'v');
        CHECK(pmkv_close(s) == PMKV_OK);
    }
    o.mode = "wal";
    o.sync = "sometimes";
    CHECK(pmkv_open(path, &o, &s) == PMKV_E_INVALID_ARGUMENT && s == NULL);
    CHECK(strstr(pmkv_last_error(), "sometimes") != NULL);
    unlink(path);
}

int main(int argc, char **argv) {
    const char *engine = argc > 2 ? argv[2] : "hart";
    char path[512];
    snprintf(path, sizeof path, "%s/c-test-%s-%d.pool", argc > 1 ? argv[1] : "/tmp", engine, (int)getpid());
    unlink(path);

    pmkv_store *s = NULL;
    /* Opening a missing pool without create: an error with a message. */
    s = (pmkv_store *)&failures; /* any stale value: a failed open sets NULL */
    CHECK(pmkv_open(path, NULL, &s) < 0);
    CHECK(strlen(pmkv_last_error()) > 0);
    CHECK(s == NULL);
    /* NULL arguments. */
    CHECK(pmkv_open(NULL, NULL, &s) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_open(path, NULL, NULL) == PMKV_E_INVALID_ARGUMENT);
    pmkv_options bad = {0};
    bad.engine = "no-such-engine";
    bad.create = 1;
    CHECK(pmkv_open(path, &bad, &s) == PMKV_E_UNKNOWN_ENGINE);
    bad.engine = NULL;
    bad.mode = "warp";
    CHECK(pmkv_open(path, &bad, &s) == PMKV_E_INVALID_ARGUMENT);

    pmkv_options o = {0};
    o.engine = engine;
    o.mode = "eadr";
    o.create = 1;
    o.initial_size = 8 << 20;
    CHECK(pmkv_open(path, &o, &s) == PMKV_OK);
    CHECK(s != NULL);

    /* A second open of the same pool is refused while it is open. */
    pmkv_store *s2 = NULL;
    CHECK(pmkv_open(path, &o, &s2) == PMKV_E_LOCKED);

    CHECK(pmkv_put(s, K("alpha"), K("1")) == PMKV_OK);
    CHECK(pmkv_put(s, K("beta"), K("two")) == PMKV_OK);
    CHECK(pmkv_put(s, K("gamma"), K("a value longer than eight bytes")) == PMKV_OK);
    CHECK(pmkv_put(s, (const uint8_t *)"", 0, K("empty key")) == PMKV_OK);
    CHECK(pmkv_put(s, NULL, 3, K("x")) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_put(NULL, K("k"), K("v")) == PMKV_E_INVALID_ARGUMENT);

    /* Oversized key: a clear error, nothing stored. */
    size_t big = 1 << 17;
    uint8_t *bigkey = calloc(big, 1);
    CHECK(pmkv_put(s, bigkey, big, K("v")) == PMKV_E_KEY_TOO_LARGE);
    free(bigkey);

    uint64_t n = 0;
    CHECK(pmkv_len(s, &n) == PMKV_OK && n == 4);
    CHECK(pmkv_len(s, NULL) == PMKV_E_INVALID_ARGUMENT);

    /* What acknowledged writes survive: the mode asked for, the medium detected. A process
     * crash never loses them on a file; eadr promises a power loss that only DAX (on eADR
     * hardware) gives, so anywhere else there is a warning to show. */
    pmkv_durability d;
    memset(&d, 0, sizeof d);
    CHECK(pmkv_store_durability(s, &d) == PMKV_OK);
    CHECK(d.mode != NULL && strcmp(d.mode, "eadr") == 0);
    CHECK(d.medium != NULL && (strcmp(d.medium, "disk") == 0 || strcmp(d.medium, "memory") == 0 ||
                               strcmp(d.medium, "dax") == 0));
    CHECK(d.process_crash == 1);
    if (strcmp(d.medium, "dax") == 0) {
        CHECK(d.power_loss == -1 && d.warning == NULL);
    } else {
        CHECK(d.power_loss == 0 && d.kernel_crash == 0 && d.warning != NULL && strlen(d.warning) > 0);
        CHECK(d.reboot == (strcmp(d.medium, "disk") == 0));
    }
    CHECK(pmkv_store_durability(s, NULL) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_store_durability(NULL, &d) == PMKV_E_INVALID_ARGUMENT);

    /* get into a caller buffer: exact, too small, absent. */
    uint8_t buf[64];
    size_t len = 0;
    CHECK(pmkv_get(s, K("beta"), buf, sizeof buf, &len) == PMKV_OK && len == 3 && memcmp(buf, "two", 3) == 0);
    CHECK(pmkv_get(s, K("gamma"), buf, 4, &len) == PMKV_E_BUFFER && len == 31);
    CHECK(pmkv_get(s, K("nope"), buf, sizeof buf, &len) == PMKV_ABSENT);
    CHECK(pmkv_get(s, K("beta"), NULL, 8, &len) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_get(s, K("beta"), buf, sizeof buf, NULL) == PMKV_E_INVALID_ARGUMENT);

    /* get with a returned buffer. */
    uint8_t *v = NULL;
    CHECK(pmkv_get_alloc(s, K("gamma"), &v, &len) == PMKV_OK && len == 31 && memcmp(v, "a value", 7) == 0);
    pmkv_free(v, len);
    CHECK(pmkv_get_alloc(s, K("nope"), &v, &len) == PMKV_ABSENT && v == NULL);
    pmkv_free(NULL, 0);

    /* Cursors: forward over everything, backward over a range. */
    pmkv_cursor *c = NULL;
    const uint8_t *ck, *cv;
    size_t ckl, cvl;
    CHECK(pmkv_cursor_open(s, NULL, 0, NULL, 0, 0, &c) == PMKV_OK);
    int count = 0;
    const char *order[] = {"", "alpha", "beta", "gamma"};
    while (pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_OK) {
        CHECK(count < 4 && ckl == strlen(order[count]) && memcmp(ck, order[count], ckl) == 0);
        count++;
    }
    CHECK(count == 4);
    CHECK(pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_ABSENT);
    pmkv_cursor_close(c);
    CHECK(pmkv_cursor_open(s, K("alpha"), K("gamma"), 1, &c) == PMKV_OK);
    CHECK(pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_OK && ckl == 4 && memcmp(ck, "beta", 4) == 0);
    CHECK(pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_OK && ckl == 5 && memcmp(ck, "alpha", 5) == 0);
    CHECK(pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_ABSENT);
    CHECK(pmkv_cursor_next(c, NULL, &ckl, &cv, &cvl) == PMKV_E_INVALID_ARGUMENT);
    pmkv_cursor_close(c);
    pmkv_cursor_close(NULL);
    CHECK(pmkv_cursor_next(NULL, &ck, &ckl, &cv, &cvl) == PMKV_E_INVALID_ARGUMENT);

    CHECK(pmkv_delete(s, K("alpha")) == PMKV_OK);
    CHECK(pmkv_delete(s, K("alpha")) == PMKV_ABSENT);
    CHECK(pmkv_check(s) == PMKV_OK);
    CHECK(pmkv_check(NULL) == PMKV_E_INVALID_ARGUMENT);
    CHECK(pmkv_close(s) == PMKV_OK);
    CHECK(pmkv_close(NULL) == PMKV_OK);

    /* Reopen (engine from the header), read-only: data is there, writes refused. */
    pmkv_options ro = {0};
    ro.read_only = 1;
    CHECK(pmkv_open(path, &ro, &s) == PMKV_OK);
    CHECK(pmkv_get(s, K("beta"), buf, sizeof buf, &len) == PMKV_OK && len == 3);
    CHECK(pmkv_put(s, K("k"), K("v")) == PMKV_E_READ_ONLY);
    CHECK(pmkv_len(s, &n) == PMKV_OK && n == 3);
    CHECK(pmkv_close(s) == PMKV_OK);

    /* A file that is not a pool is refused. */
    char junk[600];
    snprintf(junk, sizeof junk, "%s.junk", path);
    FILE *f = fopen(junk, "w");
    fputs("not a pool at all, just some text that is long enough", f);
    fclose(f);
    CHECK(pmkv_open(junk, NULL, &s) == PMKV_E_NOT_A_POOL);
    unlink(junk);
    unlink(path);

    range_edge_cases(argc > 1 ? argv[1] : "/tmp", engine);
    errors_say_what_to_do(argc > 1 ? argv[1] : "/tmp", engine);
    wal_sync_policies(argc > 1 ? argv[1] : "/tmp", engine);

    fprintf(stderr, "test_pmkv %s: %s\n", engine, failures ? "FAILED" : "ok");
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures);
    return failures ? 1 : 0;
}
