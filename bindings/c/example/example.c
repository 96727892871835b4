/* A minimal pmkv program: create a pool, store and read a key, list the records. */
#include "pmkv.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "example.pool";
    pmkv_options o = {0};
    o.create = 1; /* engine "hart", mode "adr" by default */
    pmkv_store *s;
    if (pmkv_open(path, &o, &s) != PMKV_OK) {
        fprintf(stderr, "open %s: %s\n", path, pmkv_last_error());
        return 1;
    }
    const char *k = "hello", *v = "world";
    if (pmkv_put(s, (const uint8_t *)k, strlen(k), (const uint8_t *)v, strlen(v)) != PMKV_OK) {
        fprintf(stderr, "put: %s\n", pmkv_last_error());
    }
    uint8_t buf[256];
    size_t len;
    if (pmkv_get(s, (const uint8_t *)k, strlen(k), buf, sizeof buf, &len) == PMKV_OK) {
        printf("%s = %.*s\n", k, (int)len, (const char *)buf);
    }
    pmkv_cursor *c;
    const uint8_t *ck, *cv;
    size_t ckl, cvl;
    if (pmkv_cursor_open(s, NULL, 0, NULL, 0, 0, &c) == PMKV_OK) {
        while (pmkv_cursor_next(c, &ck, &ckl, &cv, &cvl) == PMKV_OK) {
            printf("%.*s\t%.*s\n", (int)ckl, (const char *)ck, (int)cvl, (const char *)cv);
        }
        pmkv_cursor_close(c);
    }
    return pmkv_close(s) == PMKV_OK ? 0 : 1;
}
