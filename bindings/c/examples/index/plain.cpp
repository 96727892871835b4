/*
 * The index program without durability: build with any C++17 compiler.
 * Usage: plain POOL MODE N [bench]   (POOL and MODE are ignored)
 */
#include "index.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static Index *idx;

static void add(uint32_t w, uint32_t d) { idx->add(w, d); }
static bool remove(uint32_t w, uint32_t d) { return idx->remove(w, d); }
static size_t count(uint32_t w) { return idx->count(w); }
static uint64_t digest() { return idx->digest(); }

static void open_index(const char *, const char *) { idx = new Index(); }

#include "driver.h"
