/*
 * The index program made durable: build with bindings/c/bin/pmkv-c++ -std=c++17 and link
 * -lpmkv_malloc -lpmkv. Usage: durable POOL MODE N [bench]
 */
#include "index.h"
#include "pmkv.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static pmkv::durable<Index> *idx;

static void add(uint32_t w, uint32_t d) { idx->write([&](Index &i) { i.add(w, d); }); }
static bool remove(uint32_t w, uint32_t d) { return idx->write([&](Index &i) { return i.remove(w, d); }); }
static size_t count(uint32_t w) { return idx->read([&](const Index &i) { return i.count(w); }); }
static uint64_t digest() { return idx->read([&](const Index &i) { return i.digest(); }); }

static void open_index(const char *pool, const char *mode) {
    pmkv::durable_options o;
    o.mode = mode;
    o.region_size = 64 << 20;
    o.verify = getenv("INDEX_VERIFY") != nullptr;
    idx = new pmkv::durable<Index>(pool, o);
}

#include "driver.h"
