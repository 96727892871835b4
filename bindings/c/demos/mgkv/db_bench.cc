/* db_bench for mgkv: LevelDB's db_bench benchmarks (fillseq, fillrandom, overwrite,
 * fill100K, readseq, readreverse, readrandom) over mgkv.h, printed as LevelDB prints them
 * (micros/op, MB/s). Keys are 16 bytes ("%016d"), values --value_size bytes (100), as in
 * LevelDB; the fill benchmarks start from an empty store, as LevelDB's do. Also LevelDB's
 * fillbatch (1000 puts per WriteBatch).
 *
 * Usage: db_bench --mode=none|compiler|pages|perwrite [--num=N] [--value_size=B]
 *        [--benchmarks=a,b,...] [--db=DIR] [--region_mb=M]
 * --mode=none needs no libpmkv (the db_bench_plain build); the others need the pmkv-c++
 * build. perwrite is compiler capture with every captured write logged and fenced as it
 * is made (the per-write baseline the Mangosteen paper compares against). PM latency
 * emulation comes from PMKV_LATENCY (e.g. 300/100 or 300/100/fence). See
 * bindings/c/demos/mgkv/run.sh. */
#include "mgkv.h"
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mgkv;

static int num = 100000;
static int value_size = 100;
static std::string bench_list = "fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,fill100K";
static std::string dir = "/tmp";
static uint64_t region_mb = 512;
static Mode mode = Mode::kNone;

static void die(const char *what, const Status &s) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
}

static std::string key_of(int i) {
    char b[32];
    std::snprintf(b, sizeof b, "%016d", i);
    return b;
}

struct Bench {
    DB *db = nullptr;
    std::string path;
    std::mt19937_64 rng{301};
    std::string value;

    void Open(bool fresh) {
        if (db && !fresh) return;
        delete db;
        db = nullptr;
        if (fresh) unlink(path.c_str());
        Status s = DB::Open(mode, path, region_mb << 20, &db);
        if (!s.ok()) die("open", s);
    }

    /* Returns the bytes moved, for MB/s. */
    int64_t Fill(int n, int vsize, bool seq) {
        /* Values are slices of a random buffer, as LevelDB's RandomGenerator gives them. */
        if (value.size() < static_cast<size_t>(vsize) + (1 << 20)) {
            value.resize(vsize + (1 << 20));
            for (auto &ch : value) ch = static_cast<char>(' ' + rng() % 95);
        }
        size_t pos = 0;
        int64_t bytes = 0;
        for (int i = 0; i < n; i++) {
            int k = seq ? i : static_cast<int>(rng() % num);
            if (pos + vsize > value.size()) pos = 0;
            std::string_view v(value.data() + pos, vsize);
            pos += vsize;
            Status s = db->Put(key_of(k), v);
            if (!s.ok()) die("put", s);
            bytes += 16 + vsize;
        }
        return bytes;
    }

    void Run(const std::string &name) {
        bool fresh = name == "fillseq" || name == "fillbatch" || name == "fillrandom" || name == "fill100K";
        Open(fresh);
        auto t0 = std::chrono::steady_clock::now();
        int64_t bytes = 0;
        int ops = num;
        std::string msg;
        if (name == "fillseq") {
            bytes = Fill(num, value_size, true);
        } else if (name == "fillrandom" || name == "overwrite") {
            bytes = Fill(num, value_size, false);
        } else if (name == "fillbatch") {
            /* LevelDB's fillbatch: sequential keys, 1000 per WriteBatch. */
            WriteBatch batch;
            std::string v(value_size, 'v');
            for (int i = 0; i < num; i += 1000) {
                batch.Clear();
                for (int j = i; j < i + 1000 && j < num; j++) batch.Put(key_of(j), v), bytes += 16 + value_size;
                Status s = db->Write(batch);
                if (!s.ok()) die("write", s);
            }
        } else if (name == "fill100K") {
            ops = num / 1000 > 0 ? num / 1000 : 1;
            bytes = Fill(ops, 100 * 1000, false);
        } else if (name == "readseq" || name == "readreverse") {
            Iterator *it = db->NewIterator();
            int i = 0;
            if (name == "readseq")
                for (it->SeekToFirst(); i < num && it->Valid(); it->Next()) bytes += it->key().size() + it->value().size(), i++;
            else
                for (it->SeekToLast(); i < num && it->Valid(); it->Prev()) bytes += it->key().size() + it->value().size(), i++;
            if (!it->status().ok()) die(name.c_str(), it->status());
            delete it;
            ops = i > 0 ? i : 1;
        } else if (name == "readrandom") {
            std::string v;
            int found = 0;
            for (int i = 0; i < num; i++) {
                Status s = db->Get(key_of(static_cast<int>(rng() % num)), &v);
                if (s.ok()) found++, bytes += 16 + v.size();
                else if (!s.IsNotFound()) die("get", s);
            }
            msg = "(" + std::to_string(found) + " of " + std::to_string(num) + " found)";
        } else {
            std::fprintf(stderr, "unknown benchmark %s\n", name.c_str());
            std::exit(1);
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        char rate[64] = "";
        if (bytes > 0) std::snprintf(rate, sizeof rate, "%6.1f MB/s", bytes / 1048576.0 / (us / 1e6));
        std::printf("%-12s : %11.3f micros/op;%s%s%s\n", name.c_str(), us / ops, rate, msg.empty() ? "" : " ",
                    msg.c_str());
        std::fflush(stdout);
    }
};

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        auto flag = [&](const char *f) -> const char * {
            size_t n = std::strlen(f);
            return std::strncmp(a, f, n) == 0 ? a + n : nullptr;
        };
        if (const char *v = flag("--num=")) num = std::atoi(v);
        else if (const char *v = flag("--value_size=")) value_size = std::atoi(v);
        else if (const char *v = flag("--benchmarks=")) bench_list = v;
        else if (const char *v = flag("--db=")) dir = v;
        else if (const char *v = flag("--region_mb=")) region_mb = std::strtoull(v, nullptr, 10);
        else if (const char *v = flag("--mode=")) {
            std::string m = v;
            if (m == "none") mode = Mode::kNone;
            else if (m == "compiler") mode = Mode::kCompiler;
            else if (m == "pages") mode = Mode::kPages;
            else if (m == "perwrite") mode = Mode::kPerWrite;
            else {
                std::fprintf(stderr, "--mode: none, compiler, pages or perwrite\n");
                return 2;
            }
        } else {
            std::fprintf(stderr, "unknown flag %s\n", a);
            return 2;
        }
    }
    if (num <= 0 || value_size < 0) {
        std::fprintf(stderr, "--num must be positive, --value_size not negative\n");
        return 2;
    }
    const char *names[] = {"none", "compiler", "pages", "perwrite"};
    std::printf("mgkv (std::map, libc++) durability: %s\n", names[static_cast<int>(mode)]);
    std::printf("Keys:       16 bytes each\nValues:     %d bytes each\nEntries:    %d\n", value_size, num);
    std::printf("------------------------------------------------\n");
    Bench b;
    b.path = dir + "/mgkv_bench.pool";
    size_t at = 0;
    while (at <= bench_list.size()) {
        size_t comma = bench_list.find(',', at);
        if (comma == std::string::npos) comma = bench_list.size();
        std::string name = bench_list.substr(at, comma - at);
        if (!name.empty()) b.Run(name);
        at = comma + 1;
    }
    delete b.db;
    if (mode != Mode::kNone) unlink(b.path.c_str());
    return 0;
}
