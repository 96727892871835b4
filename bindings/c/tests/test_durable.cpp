/*
 * pmkv::durable<T> (pmkv.hpp), built with pmkv-c++ and libpmkv_malloc: a T of ordinary
 * containers made durable through write() and read(), and every misuse refused without
 * losing an acknowledged write:
 * - reopened as another type: refused at open, the pool untouched;
 * - a write whose body throws: rolled back (nothing of it committed), the exception
 *   rethrown (pmkv::aborted, with its message);
 * - the region full: std::bad_alloc out of write(), the write rolled back, later writes
 *   and reopens fine;
 * - a write function in a library built without capture (plain_writer.c) given to
 *   pmkv_mg_write: refused before it runs, the region unchanged;
 * - SIGKILL during writes, three times: every acknowledged write is found;
 * - built with a plain compiler (argument "plain"): refused at open with compiler
 *   capture, naming pmkv-c++; page capture then works.
 * Usage: test_durable DIR [plain]
 */
#include "check.h"
#include "pmkv.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern "C" void plain_writer(void *arg, uint8_t *region, uintptr_t len);

struct Log {
    std::vector<uint64_t> seq;
    std::map<uint64_t, std::vector<char>> blobs;
    std::deque<uint64_t> last;
};

struct Other {
    std::vector<uint32_t> v;
    uint64_t extra[3];
};

static bool in_order(const Log &l) {
    for (size_t i = 0; i < l.seq.size(); ++i)
        if (l.seq[i] != i)
            return false;
    return true;
}

static void append(Log &l) {
    uint64_t i = l.seq.size();
    l.seq.push_back(i);
    l.last.push_back(i);
    if (l.last.size() > 16)
        l.last.pop_front();
}

int main(int argc, char **argv) {
    CHECK(argc >= 2);
    std::string dir = argv[1];
    pmkv::durable_options o;
    o.mode = "eadr";
    o.region_size = 1 << 20;
    o.verify = true;

    if (argc > 2 && std::strcmp(argv[2], "plain") == 0) {
        std::string path = dir + "/durable_plain.pool";
        unlink(path.c_str());
        try {
            pmkv::durable<Log> d(path.c_str(), o);
            CHECK(!"a plain build was accepted with compiler capture");
        } catch (const pmkv::error &e) {
            CHECK(e.code() == PMKV_E_UNSUPPORTED);
            CHECK(std::strstr(e.what(), "pmkv-c++") != nullptr);
            CHECK(access(path.c_str(), F_OK) != 0); /* nothing created */
        }
        o.capture = PMKV_MG_CAPTURE_PAGES;
        o.verify = false;
        {
            pmkv::durable<Log> d(path.c_str(), o);
            for (int i = 0; i < 50; ++i)
                d.write([](Log &l) { append(l); });
        }
        pmkv::durable<Log> d(path.c_str(), o);
        CHECK(d.read([](const Log &l) { return l.seq.size(); }) == 50);
        CHECK(d.read([](const Log &l) { return in_order(l); }));
        std::printf("pmkv::durable, plain build: refused with compiler capture, page capture works\n");
        return 0;
    }

    std::string path = dir + "/durable.pool";
    unlink(path.c_str());
    {
        pmkv::durable<Log> d(path.c_str(), o);
        for (int i = 0; i < 300; ++i)
            d.write([](Log &l) { append(l); });
        size_t n = d.write([](Log &l) { return l.seq.size(); });
        CHECK(n == 300);
    }

    /* Another type: refused, and the pool still opens as its own. */
    try {
        pmkv::durable<Other> d(path.c_str(), o);
        CHECK(!"a pool of Log opened as Other");
    } catch (const pmkv::error &e) {
        CHECK(e.code() == PMKV_E_INVALID_ARGUMENT);
        CHECK(std::strstr(e.what(), "another type") != nullptr);
    }

    {
        pmkv::durable<Log> d(path.c_str(), o);
        CHECK(d.read([](const Log &l) { return l.seq.size(); }) == 300);
        CHECK(d.read([](const Log &l) { return in_order(l) && l.last.back() == 299; }));

        /* A body that throws after writing: rolled back, message kept. */
        try {
            d.write([](Log &l) {
                append(l);
                l.blobs[7].assign(1000, 'x');
                throw std::runtime_error("half done");
            });
            CHECK(!"the exception was swallowed");
        } catch (const pmkv::aborted &e) {
            CHECK(std::strcmp(e.what(), "half done") == 0);
        }
        CHECK(d.read([](const Log &l) { return l.seq.size() == 300 && l.blobs.empty() && l.last.back() == 299; }));

        /* The region full: blobs until bad_alloc; the failing write leaves nothing. */
        size_t blobs = 0;
        try {
            for (;; ++blobs)
                d.write([&](Log &l) {
                    append(l);
                    l.blobs[blobs].assign(64 << 10, char('a' + blobs % 26));
                });
        } catch (const std::bad_alloc &) {
        }
        CHECK(blobs > 0 && blobs < 16);
        CHECK(d.read([&](const Log &l) { return l.blobs.size() == blobs && l.seq.size() == 300 + blobs; }));
        CHECK(d.read([](const Log &l) { return in_order(l); }));
        /* Room freed, writes go on. */
        d.write([](Log &l) { l.blobs.erase(0); });
        d.write([](Log &l) { append(l); });
        CHECK(d.read([&](const Log &l) { return l.seq.size() == 301 + blobs && l.blobs.size() == blobs - 1; }));

        /* Writing code from a module not built with capture: refused at the write, before
         * it runs (the region is byte for byte as it was). */
        auto copy = [](void *arg, const uint8_t *region, uintptr_t n) {
            static_cast<std::vector<uint8_t> *>(arg)->assign(region, region + n);
        };
        std::vector<uint8_t> before, after;
        CHECK(pmkv_mg_read(d.runtime(), copy, &before) == 0);
        CHECK(pmkv_mg_write(d.runtime(), &plain_writer, nullptr) == PMKV_E_UNSUPPORTED);
        CHECK(std::strstr(pmkv_last_error(), "pmkv-c++") != nullptr);
        CHECK(std::strstr(pmkv_last_error(), "libplain_writer") != nullptr);
        CHECK(pmkv_mg_read(d.runtime(), copy, &after) == 0);
        CHECK(before.size() == pmkv_mg_region_size(d.runtime()) && before == after);
    }

    /* SIGKILL during writes: a child appends and reports each acknowledged write. */
    for (int round = 0; round < 3; ++round) {
        size_t before = 0;
        {
            pmkv::durable<Log> d(path.c_str(), o);
            before = d.read([](const Log &l) { return l.seq.size(); });
        }
        int fds[2];
        CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            pmkv::durable_options co = o;
            co.verify = false;
            pmkv::durable<Log> d(path.c_str(), co);
            for (;;) {
                uint64_t n = d.write([](Log &l) {
                    append(l);
                    return uint64_t(l.seq.size());
                });
                if (write(fds[1], &n, sizeof n) != sizeof n)
                    _exit(1);
            }
        }
        close(fds[1]);
        uint64_t acked = 0, n = 0;
        for (int i = 0; i < 200 + 150 * round && read(fds[0], &n, sizeof n) == sizeof n; ++i)
            acked = n;
        kill(pid, SIGKILL);
        while (read(fds[0], &n, sizeof n) == sizeof n)
            acked = n;
        close(fds[0]);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
        pmkv::durable<Log> d(path.c_str(), o);
        size_t have = d.read([](const Log &l) { return l.seq.size(); });
        CHECK(acked > before);
        CHECK(have >= acked && have <= acked + 1);
        CHECK(d.read([](const Log &l) { return in_order(l); }));
    }
    std::printf("pmkv::durable: writes, reads, another type, throw, full region, 3 SIGKILLs: all checks passed\n");
    return 0;
}
