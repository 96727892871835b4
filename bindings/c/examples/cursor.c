/* Records of a pool in key order, from any engine: ./cursor POOL [ENGINE] [FROM [BEFORE]]
 * creates POOL with ENGINE ("hart", "nbtree", "mangosteen") if it is missing, writes a few
 * keys, then lists the keys in [FROM, BEFORE) (every key without them). */
#include <pmkv.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s POOL [ENGINE] [FROM [BEFORE]]\n", argv[0]);
        return 2;
    }
    pmkv_options o = {0};
    o.create = 1;
    o.engine = argc > 2 ? argv[2] : "nbtree";
    pmkv_store *s;
    if (pmkv_open(argv[1], &o, &s) != PMKV_OK) {
        fprintf(stderr, "%s: %s\n", argv[1], pmkv_last_error());
        return 1;
    }
    const char *words[] = {"apple", "banana", "cherry", "date", "elderberry"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        char value[16];
        int n = snprintf(value, sizeof value, "%zu", i);
        if (pmkv_put(s, (const uint8_t *)words[i], strlen(words[i]), (const uint8_t *)value, (size_t)n) != PMKV_OK) {
            fprintf(stderr, "put: %s\n", pmkv_last_error());
            pmkv_close(s);
            return 1;
        }
    }
    const char *from = argc > 3 ? argv[3] : NULL, *before = argc > 4 ? argv[4] : NULL;
    pmkv_cursor *c;
    if (pmkv_cursor_open(s, (const uint8_t *)from, from ? strlen(from) : 0, (const uint8_t *)before,
                         before ? strlen(before) : 0, 0, &c) != PMKV_OK) {
        fprintf(stderr, "cursor: %s\n", pmkv_last_error());
        pmkv_close(s);
        return 1;
    }
    const uint8_t *k, *v;
    size_t kl, vl;
    int rc;
    while ((rc = pmkv_cursor_next(c, &k, &kl, &v, &vl)) == PMKV_OK)
        printf("%.*s\t%.*s\n", (int)kl, (const char *)k, (int)vl, (const char *)v);
    pmkv_cursor_close(c);
    if (rc != PMKV_ABSENT)
        fprintf(stderr, "cursor: %s\n", pmkv_last_error());
    return pmkv_close(s) == PMKV_OK && rc == PMKV_ABSENT ? 0 : 1;
}
