/* Compiler capture from C++: an ordinary std::map of strings (libc++, from headers), built
 * with pmkv-c++ and made durable by Mangosteen with split_heap (its nodes and strings
 * malloc'd from the region inside read-write requests) and capture =
 * PMKV_MG_CAPTURE_COMPILER, verify_capture on. Checks: thousands of random sets and
 * deletes, rebalancing included, miss no byte (verify mode would fail the request); every
 * node and every long string lies in the region; a reopen finds the map, at the same
 * address, holding every acknowledged write; a write made by code built without the
 * instrumentation (no_sanitize) is caught by verify mode; and a child process that writes
 * and is then killed with SIGKILL leaves every write it had acknowledged to the next open.
 * A std::vector of an alignas(64) struct (aligned operator new) lies in the region,
 * aligned, and survives the reopens. A buffer the client keeps from a write request and
 * writes again in a read is a block of the region written outside any batch: verify mode
 * fails the next write; made in a transient section (pmkv_mg_transient_begin/end) it is
 * the C library's, and nothing is missed. A request that fills the region's heap gets
 * std::bad_alloc, which pmkv::guard_request turns into an aborted request: none of its
 * inserts is left, and the map goes on as before.
 *
 * The strings use an allocator type of their own: libc++ instantiates
 * std::basic_string<char>'s out-of-line members (growth, assignment) in its shared library,
 * which is not instrumented (verify mode reports their writes as missed); a string type
 * with another allocator is compiled, and so instrumented, here.
 * Usage: test_mangosteen_cxx DIR. */
#include "pmkv.hpp"
#include "check.h"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

template <class T> struct Malloc {
    using value_type = T;
    Malloc() = default;
    template <class U> Malloc(const Malloc<U> &) {}
    T *allocate(std::size_t n) {
        void *p = std::malloc(n * sizeof(T));
        if (!p) throw std::bad_alloc();
        return static_cast<T *>(p);
    }
    void deallocate(T *p, std::size_t) { std::free(p); }
    template <class U> bool operator==(const Malloc<U> &) const { return true; }
    template <class U> bool operator!=(const Malloc<U> &) const { return false; }
};

using Str = std::basic_string<char, std::char_traits<char>, Malloc<char>>;
using Map = std::map<Str, Str, std::less<Str>, Malloc<std::pair<const Str, Str>>>;

/* A cache line: std::vector<Line> allocates with the aligned operator new. */
struct alignas(64) Line {
    uint64_t w[8];
};

/* The root object in the region. */
struct Root {
    Map map;
    uint64_t scratch;
    std::vector<Line> lines; /* line i holds i + 1 in every word */
};

static bool in_region(const void *p, const uint8_t *region, size_t len) {
    return static_cast<const uint8_t *>(p) >= region && static_cast<const uint8_t *>(p) < region + len;
}

/* Built without the instrumentation: its store is invisible to the hooks. */
__attribute__((no_sanitize("thread"), noinline)) static void uncaptured(Root *r) { r->scratch = 0x5ca1ab1e; }

struct Client {
    char op;
    std::string key, value; /* the request, in the client (ordinary heap outside requests) */
    std::string response;
    char *kept = nullptr; /* a buffer kept across requests ('K', 'T'), written by reads */
};

static void *init_client(void *) { return new Client(); }
static void destroy_client(void *cp) {
    Client *c = static_cast<Client *>(cp);
    std::free(c->kept); /* the C library's, or (after 'K') a region block: left alone */
    delete c;
}

/* Wire: op(1) key_len(1) key value. S = set, D = delete, G = get, P = check placement
 * (read-only; responds with the number of entries), X = uncaptured write, V = append a
 * line, K / T = make the kept buffer (T: in a transient section), F = insert until the
 * region is full. */
static int deserialize_request(void *cp, const uint8_t *req, size_t len) {
    Client *c = static_cast<Client *>(cp);
    if (len < 2 || 2u + req[1] > len) return 1;
    c->op = static_cast<char>(req[0]);
    c->key.assign(reinterpret_cast<const char *>(req + 2), req[1]);
    c->value.assign(reinterpret_cast<const char *>(req + 2 + req[1]), len - 2 - req[1]);
    return std::strchr("SDGPXVKTF", c->op) && c->op ? 0 : 2;
}

static bool is_read_only(void *cp) { return std::strchr("GP", static_cast<Client *>(cp)->op) != nullptr; }

static void process_request(void *cp, uint8_t *region, size_t region_len) {
    Client *c = static_cast<Client *>(cp);
    c->response.clear();
    Root *r = static_cast<Root *>(pmkv_mg_root(region, region_len));
    if (c->op == 'G') {
        if (c->kept) std::memcpy(c->kept, "read", 4); /* reuses the kept buffer */
        if (!r) return;
        auto it = r->map.find(Str(c->key.data(), c->key.size()));
        if (it != r->map.end()) c->response = "=" + std::string(it->second.data(), it->second.size());
        return;
    }
    if (c->op == 'P') {
        size_t n = 0;
        if (r) {
            CHECK(in_region(r, region, region_len));
            for (auto &kv : r->map) {
                /* The node, and each string's bytes (inline ones lie in the node). */
                CHECK(in_region(&kv, region, region_len));
                CHECK(in_region(kv.first.data(), region, region_len));
                CHECK(in_region(kv.second.data(), region, region_len));
                n++;
            }
            if (!r->lines.empty()) {
                CHECK(in_region(r->lines.data(), region, region_len));
                CHECK(reinterpret_cast<uintptr_t>(r->lines.data()) % 64 == 0);
            }
            for (size_t i = 0; i < r->lines.size(); i++)
                for (uint64_t w : r->lines[i].w) CHECK(w == i + 1);
            n += r->lines.size() << 32;
        }
        c->response = std::to_string(n);
        return;
    }
    if (!r) {
        r = new (std::malloc(sizeof(Root))) Root();
        CHECK(in_region(r, region, region_len));
        CHECK(pmkv_mg_set_root(region, region_len, r) == 0);
    }
    if (c->op == 'K' || c->op == 'T') {
        if (c->op == 'T') pmkv_mg_transient_begin();
        char *b = static_cast<char *>(std::malloc(64));
        if (c->op == 'T') CHECK(pmkv_mg_transient_end() == 0);
        CHECK(b && in_region(b, region, region_len) == (c->op == 'K'));
        std::memset(b, 'k', 64);
        if (c->kept && in_region(c->kept, region, region_len)) std::free(c->kept); /* inside a request: fine */
        c->kept = b;
        return;
    }
    if (c->op == 'V') {
        Line l;
        for (auto &w : l.w) w = r->lines.size() + 1;
        r->lines.push_back(l);
        return;
    }
    if (c->op == 'F') {
        pmkv::guard_request([&] {
            for (uint64_t i = 0;; i++) r->map[Str(("fill-" + std::to_string(i)).c_str())] = Str(4000, 'f');
        });
        return;
    }
    Str key(c->key.data(), c->key.size());
    if (c->op == 'S')
        r->map[key] = Str(c->value.data(), c->value.size());
    else if (c->op == 'D')
        r->map.erase(key);
    else
        uncaptured(r);
}

static const uint8_t *get_response(void *cp, size_t *len) {
    Client *c = static_cast<Client *>(cp);
    *len = c->response.size();
    return reinterpret_cast<const uint8_t *>(c->response.data());
}

static const pmkv_mg_callbacks CALLBACKS = {init_client, destroy_client, deserialize_request,
                                            is_read_only, process_request, get_response};

static int cmd(pmkv_mg *m, pmkv_mg_client *c, char op, const std::string &k, const std::string &v,
               std::string *out) {
    std::string req;
    req += op;
    req += static_cast<char>(k.size());
    req += k;
    req += v;
    uint8_t *resp = nullptr;
    size_t n = 0;
    int r = pmkv_mg_client_cmd(m, c, reinterpret_cast<const uint8_t *>(req.data()), req.size(), &resp, &n);
    if (r == 0) {
        if (out) out->assign(reinterpret_cast<char *>(resp), n);
        pmkv_free(resp, n);
    }
    return r;
}

static uint64_t x = 0x9e3779b97f4a7c15ull;
static std::map<std::string, std::string> model;
static uint64_t lines = 0; /* Root::lines' length */

/* `n` random sets and deletes over 500 keys, applied to the model, and (if `m`) sent,
 * each acknowledged. */
static void random_ops(pmkv_mg *m, pmkv_mg_client *c, int n) {
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::string k = "key-" + std::to_string(x % 500);
        if (x % 5 == 0) {
            CHECK(!m || cmd(m, c, 'D', k, "", nullptr) == 0);
            model.erase(k);
        } else {
            /* Short (inline) and long (allocated) strings, and growth between them. */
            std::string v((x >> 8) % 60, static_cast<char>('a' + x % 26));
            CHECK(!m || cmd(m, c, 'S', k, v, nullptr) == 0);
            model[k] = v;
        }
    }
}

/* The map equals the model, and lies in the region. */
static void check_all(pmkv_mg *m, pmkv_mg_client *c) {
    for (auto &kv : model) {
        std::string got;
        CHECK(cmd(m, c, 'G', kv.first, "", &got) == 0);
        CHECK(got == "=" + kv.second);
    }
    for (int i = 0; i < 500; i++) {
        std::string k = "key-" + std::to_string(i), got;
        CHECK(cmd(m, c, 'G', k, "", &got) == 0);
        CHECK(model.count(k) ? got == "=" + model[k] : got.empty());
    }
    std::string n;
    CHECK(cmd(m, c, 'P', "", "", &n) == 0);
    CHECK(n == std::to_string(model.size() + (lines << 32)));
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    std::string path = std::string(argv[1]) + "/mgcxx.pool";
    unlink(path.c_str());
    pmkv_mg_options o = {};
    o.create = 1;
    o.region_size = 4 << 20;
    o.split_heap = 1;
    o.capture = PMKV_MG_CAPTURE_COMPILER;
    o.verify_capture = 1;
    /* Two sessions of random requests, each over what the last one left. */
    for (int round = 0; round < 2; round++) {
        pmkv_mg *m = nullptr;
        pmkv_mg_client *c = nullptr;
        CHECK(pmkv_mg_open(path.c_str(), &o, &CALLBACKS, nullptr, &m) == 0);
        CHECK(pmkv_mg_client_open(m, &c) == 0);
        check_all(m, c);
        random_ops(m, c, 3000);
        check_all(m, c);
        /* Aligned allocations: the vector grows (moves) within the region. */
        for (int i = 0; i < 40; i++, lines++) CHECK(cmd(m, c, 'V', "", "", nullptr) == 0);
        check_all(m, c);
        if (round == 1) {
            /* An uncaptured write fails verification. */
            CHECK(cmd(m, c, 'X', "", "", nullptr) == PMKV_E_INTERNAL);
            CHECK(std::strstr(pmkv_last_error(), "not captured") != nullptr);
            /* A buffer kept from a write and reused by a read is the region's, written
             * outside a batch: the next write fails verification (and commits all the same). */
            CHECK(cmd(m, c, 'K', "", "", nullptr) == 0);
            CHECK(cmd(m, c, 'G', "key-1", "", nullptr) == 0);
            CHECK(cmd(m, c, 'S', "key-1", "after", nullptr) == PMKV_E_INTERNAL);
            CHECK(std::strstr(pmkv_last_error(), "not captured") != nullptr);
            model["key-1"] = "after";
            /* Made in a transient section, it is the C library's: nothing is missed. */
            CHECK(cmd(m, c, 'T', "", "", nullptr) == 0);
            CHECK(cmd(m, c, 'G', "key-1", "", nullptr) == 0);
            CHECK(cmd(m, c, 'S', "key-1", "again", nullptr) == 0);
            model["key-1"] = "again";
            check_all(m, c);
            /* Filling the region: bad_alloc, caught, the request aborted and rolled back. */
            CHECK(cmd(m, c, 'F', "", "", nullptr) == PMKV_E_INVALID_ARGUMENT);
            CHECK(std::strstr(pmkv_last_error(), "rolled back") != nullptr);
            check_all(m, c);
            random_ops(m, c, 300);
            check_all(m, c);
        }
        pmkv_mg_client_close(m, c);
        CHECK(pmkv_mg_close(m) == 0);
    }

    /* A crash: a child writes, each request acknowledged, and is killed. */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        pmkv_mg *m = nullptr;
        pmkv_mg_client *c = nullptr;
        CHECK(pmkv_mg_open(path.c_str(), &o, &CALLBACKS, nullptr, &m) == 0);
        CHECK(pmkv_mg_client_open(m, &c) == 0);
        random_ops(m, c, 1000);
        kill(getpid(), SIGKILL);
        _exit(1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* The child's requests, replayed on the model (same generator, same state). */
    {
        pmkv_mg *m = nullptr;
        pmkv_mg_client *c = nullptr;
        o.create = 0;
        CHECK(pmkv_mg_open(path.c_str(), &o, &CALLBACKS, nullptr, &m) == 0);
        CHECK(pmkv_mg_client_open(m, &c) == 0);
        random_ops(nullptr, nullptr, 1000);
        check_all(m, c);
        pmkv_mg_client_close(m, c);
        CHECK(pmkv_mg_close(m) == 0);
    }
    std::printf("mangosteen compiler capture from C++ (std::map): all checks passed\n");
    return 0;
}
