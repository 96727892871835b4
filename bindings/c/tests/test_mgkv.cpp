/* The C++ store (bindings/c/demos/mgkv) survives SIGKILL, twice: a child process opens
 * it with compiler capture, writes (Put, Delete, WriteBatch), each write acknowledged, and
 * is killed; the next child does the same over what the first left; then the parent
 * reopens and finds exactly the acknowledged writes, walking the store forwards and
 * backwards with an Iterator and with Get. Then the per-write baseline (Mode::kPerWrite,
 * db_bench --mode=perwrite) in verify mode, with values up to 100,000 bytes (a write of
 * that size once crashed it), kept across a reopen; and a region too small for the next
 * Put, which must fail with an error and keep the rest. Usage: test_mgkv DIR. */
#include "mgkv.h"
#include <csignal>
#include <cstdio>
#include <map>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, \
                         #c, pmkv_last_error());                                                   \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

using namespace mgkv;

static uint64_t x = 88172645463325252ull;
static std::map<std::string, std::string> model;

/* One session's writes, applied to the model and (if `db`) to the store. */
static void writes(DB *db, int n) {
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::string k = "k" + std::to_string(x % 400);
        if (x % 7 == 0) {
            CHECK(!db || db->Delete(k).ok());
            model.erase(k);
        } else if (x % 7 == 1) {
            WriteBatch b;
            std::string k2 = "k" + std::to_string((x >> 9) % 400), v(x % 300, 'b');
            b.Put(k, v);
            b.Delete(k2);
            CHECK(!db || db->Write(b).ok());
            model[k] = v;
            model.erase(k2);
        } else {
            std::string v((x >> 4) % 200, static_cast<char>('a' + x % 26));
            CHECK(!db || db->Put(k, v).ok());
            model[k] = v;
        }
    }
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    std::string path = std::string(argv[1]) + "/mgkv.pool";
    unlink(path.c_str());
    for (int crash = 0; crash < 2; crash++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            DB *db = nullptr;
            CHECK(DB::Open(Mode::kCompiler, path, 8 << 20, &db).ok());
            writes(db, 1500);
            kill(getpid(), SIGKILL);
            _exit(1);
        }
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        writes(nullptr, 1500);
    }
    DB *db = nullptr;
    CHECK(DB::Open(Mode::kCompiler, path, 8 << 20, &db).ok());
    Iterator *it = db->NewIterator();
    auto m = model.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
        CHECK(m != model.end());
        CHECK(it->key() == m->first && it->value() == m->second);
    }
    CHECK(m == model.end());
    auto r = model.rbegin();
    for (it->SeekToLast(); it->Valid(); it->Prev(), ++r) {
        CHECK(r != model.rend());
        CHECK(it->key() == r->first && it->value() == r->second);
    }
    CHECK(r == model.rend());
    it->Seek("k2");
    CHECK(it->Valid() == (model.lower_bound("k2") != model.end()));
    if (it->Valid()) CHECK(it->key() == model.lower_bound("k2")->first);
    delete it;
    for (int i = 0; i < 400; i++) {
        std::string k = "k" + std::to_string(i), v;
        Status s = db->Get(k, &v);
        CHECK(model.count(k) ? s.ok() && v == model[k] : s.IsNotFound());
    }
    delete db;
    std::printf("mgkv: two SIGKILLs, every acknowledged write kept (%zu keys)\n", model.size());

    std::string pw = std::string(argv[1]) + "/mgkv-perwrite.pool";
    unlink(pw.c_str());
    setenv("MGKV_VERIFY", "1", 1);
    std::map<std::string, std::string> big;
    CHECK(DB::Open(Mode::kPerWrite, pw, 8 << 20, &db).ok());
    for (int i = 0; i < 12; i++) {
        std::string k = "big" + std::to_string(i % 5), v(i % 3 == 0 ? 100000 : 100 * i, static_cast<char>('A' + i));
        CHECK(db->Put(k, v).ok());
        big[k] = v;
    }
    CHECK(db->Delete("big1").ok());
    big.erase("big1");
    delete db;
    CHECK(DB::Open(Mode::kPerWrite, pw, 8 << 20, &db).ok());
    for (int i = 0; i < 5; i++) {
        std::string k = "big" + std::to_string(i), v;
        Status s = db->Get(k, &v);
        CHECK(big.count(k) ? s.ok() && v == big[k] : s.IsNotFound());
    }
    delete db;
    unlink(pw.c_str());
    std::printf("mgkv: per-write baseline, values up to 100,000 bytes, kept across a reopen\n");

    /* A full region: the Put that does not fit fails with an error (no abort), leaves the
     * store as it was, and everything acknowledged survives a reopen. */
    std::string fp = std::string(argv[1]) + "/mgkv-full.pool";
    unlink(fp.c_str());
    CHECK(DB::Open(Mode::kCompiler, fp, 1 << 20, &db).ok());
    std::map<std::string, std::string> kept;
    Status s;
    int i = 0;
    for (; i < 100; i++) {
        std::string k = "f" + std::to_string(i), v(50000, static_cast<char>('a' + i % 26));
        s = db->Put(k, v);
        if (!s.ok()) break;
        kept[k] = v;
    }
    CHECK(!s.ok() && i > 0 && i < 100);
    std::string v;
    CHECK(db->Get("f" + std::to_string(i), &v).IsNotFound());
    CHECK(db->Delete("f0").ok());
    kept.erase("f0");
    delete db;
    CHECK(DB::Open(Mode::kCompiler, fp, 1 << 20, &db).ok());
    for (int j = 0; j <= i; j++) {
        std::string k = "f" + std::to_string(j);
        Status g = db->Get(k, &v);
        CHECK(kept.count(k) ? g.ok() && v == kept[k] : g.IsNotFound());
    }
    delete db;
    unlink(fp.c_str());
    std::printf("mgkv: a full region refuses the Put that does not fit (%d fitted), keeps the rest\n", i);
    return 0;
}
