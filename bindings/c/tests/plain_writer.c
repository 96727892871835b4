/*
 * A writer compiled with a plain C compiler into a shared library of its own, for
 * test_durable.cpp: its stores into a region would not be captured, so pmkv_mg_write
 * must refuse it under compiler capture before it runs.
 */
#include <stdint.h>
#include <string.h>

void plain_writer(void *arg, uint8_t *region, uintptr_t len) {
    (void)arg;
    memset(region + len / 2, 0x5a, 64);
}
