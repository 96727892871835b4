#include <pmkv.h>
#include <stdio.h>
int main(void) {
    pmkv_options o = {.create = 1}; /* a new pool: engine "hart"; mode "wal" on a disk, "adr" on /dev/shm */
    pmkv_store *s;
    if (pmkv_open("words.pool", &o, &s) != PMKV_OK) {
        fprintf(stderr, "words.pool: %s\n", pmkv_last_error());
        return 1;
    }
    uint8_t buf[64]; size_t len;
    int ok = pmkv_put(s, (const uint8_t *)"hello", 5, (const uint8_t *)"world", 5) == PMKV_OK /* durable now */
             && pmkv_get(s, (const uint8_t *)"hello", 5, buf, sizeof buf, &len) == PMKV_OK;
    if (ok) printf("hello = %.*s\n", (int)len, (const char *)buf);
    else fprintf(stderr, "%s\n", pmkv_last_error());
    return pmkv_close(s) == PMKV_OK && ok ? 0 : 1; /* a clean close; errors are reported */
}
