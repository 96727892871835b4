/* The C tests' assertion: on failure, the condition, where, and pmkv's last error; then
 * exit 1. */
#ifndef PMKV_TEST_CHECK_H
#define PMKV_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, \
                    #cond, pmkv_last_error());                                              \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#endif
