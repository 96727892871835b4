/*
 * pmkv's driver for the HART authors' prototype (github.com/CASL-SDSU/HART), for the
 * like-for-like rounds of scripts/hart-prototype-ab. Not the prototype's code: it is
 * compiled beside the prototype's own art.c, hash.c, flush_delay.c and hadix.c (whose
 * main is renamed), and calls its public entry points.
 *
 * What differs from the prototype's own test (hadix.c, test_art_insert_search): the keys
 * are read into memory before any timing (the prototype times fgets and strncpy inside
 * its loops), time is wall-clock (clock_gettime, not clock()), and a search passes the
 * same key length as the insert (the prototype's search passes one byte less, and misses
 * ~20% of the words). Each phase runs over every word in file order, as `pmkv bench run
 * -w dictionary` does: insert, search, update (insert of an existing key), delete.
 *
 * Usage: driver WORDS_FILE   (one word per line)
 * Prints: "<phase> <ns per op>" per phase, then "missed <n>" (searches that found nothing)
 * and "skipped <n>" (words too short for the prototype's search).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "art.h"
#include "hash.h"

/* hadix.c's entry points (it has no header). */
void *hadix_insert(ht_header *ht, const unsigned char *key, int key_len, uint64_t *value);
uint64_t *hadix_search(ht_header *ht, unsigned char *key, int key_len);
int *hadix_delete(ht_header *ht, unsigned char *key, int key_len);
int alloc_trees(ht_header *new_ht, int num_bucket);

/* Called only by hadix.c's own test, which this driver never runs; the prototype's
 * sources do not define them. */
void fail_unless(int ok) { (void)ok; }
void stats_report(void) {}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORDS_FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    size_t cap = 1 << 19, n = 0;
    char **keys = malloc(cap * sizeof *keys);
    int *lens = malloc(cap * sizeof *lens);
    char buf[512];
    while (fgets(buf, sizeof buf, f)) {
        size_t len = strcspn(buf, "\r\n");
        buf[len] = '\0';
        if (n == cap) {
            cap *= 2;
            keys = realloc(keys, cap * sizeof *keys);
            lens = realloc(lens, cap * sizeof *lens);
        }
        keys[n] = strdup(buf);
        /* As the prototype's own insert: the length includes the terminating NUL. */
        lens[n] = (int)len + 1;
        n++;
    }
    fclose(f);

    art_tree t;
    ht_header ht;
    art_tree_init2(&t, NULL);
    ht_new(&ht, NUM_BUCKET);
    alloc_trees(&ht, NUM_BUCKET);

    uint64_t v;
    double t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        v = i + 1;
        hadix_insert(&ht, (unsigned char *)keys[i], lens[i], &v);
    }
    double t1 = now_ns();
    size_t missed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        /* As the prototype's own search: the length without the NUL, and words shorter
         * than its 2-byte hash key skipped (its search copies key_len - 2 bytes). */
        if (lens[i] - 1 < 2) {
            skipped++;
            continue;
        }
        if (!hadix_search(&ht, (unsigned char *)keys[i], lens[i] - 1))
            missed++;
    }
    double t2 = now_ns();
    for (size_t i = 0; i < n; i++) {
        v = i + 2;
        hadix_insert(&ht, (unsigned char *)keys[i], lens[i], &v);
    }
    double t3 = now_ns();
    for (size_t i = 0; i < n; i++)
        hadix_delete(&ht, (unsigned char *)keys[i], lens[i]);
    double t4 = now_ns();
    printf("insert %.1f\nsearch %.1f\nupdate %.1f\ndelete %.1f\nmissed %zu\nskipped %zu\n", (t1 - t0) / n,
           (t2 - t1) / (n - skipped), (t3 - t2) / n, (t4 - t3) / n, missed, skipped);
    return 0;
}
