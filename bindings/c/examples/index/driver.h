/*
 * The index program's main, shared by plain.cpp and durable.cpp (which define the access
 * layer: open_index, add, remove, count, digest). Runs N adds of random (word, document)
 * pairs, N counts and N/2 removes followed by re-adds, and prints the index's digest
 * before and after. Without "bench" it also checks every count against a model kept
 * apart. With "bench" it prints the mean nanoseconds per operation of each phase.
 */
#ifndef INDEX_DRIVER_H
#define INDEX_DRIVER_H

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return uint32_t(rng >> 11);
}

static double since(std::chrono::steady_clock::time_point t, size_t n) {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count() / double(n);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s POOL MODE N [bench]\n", argv[0]);
        return 2;
    }
    size_t n = strtoull(argv[3], nullptr, 10);
    bool bench = argc > 4 && strcmp(argv[4], "bench") == 0;
    open_index(argv[1], argv[2]);
    printf("start digest %llu\n", (unsigned long long)digest());
    uint32_t words = uint32_t(n / 8 + 1), base = next();
    std::vector<std::pair<uint32_t, uint32_t>> pairs(n);
    std::unordered_map<uint32_t, size_t> model;
    for (size_t i = 0; i < n; ++i)
        pairs[i] = {next() % words, base + uint32_t(i)};
    auto t = std::chrono::steady_clock::now();
    for (auto &p : pairs)
        add(p.first, p.second);
    double add_ns = since(t, n);
    if (!bench)
        for (auto &p : pairs)
            ++model[p.first];
    std::vector<uint32_t> probes(n);
    for (auto &w : probes)
        w = next() % words;
    size_t found = 0;
    t = std::chrono::steady_clock::now();
    for (uint32_t w : probes)
        found += count(w);
    double count_ns = since(t, n);
    t = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n / 2; ++i) {
        auto &p = pairs[(size_t(next()) * 7919) % n];
        if (remove(p.first, p.second))
            add(p.first, p.second);
    }
    double update_ns = since(t, n / 2 + 1);
    if (!bench) {
        for (uint32_t w = 0; w < words; ++w) {
            size_t want = model.count(w) ? model[w] : 0;
            if (count(w) < want) {
                fprintf(stderr, "word %u: %zu documents, %zu added\n", w, count(w), want);
                return 1;
            }
        }
    }
    printf("end digest %llu found %zu\n", (unsigned long long)digest(), found);
    if (bench)
        printf("add_ns %.1f count_ns %.1f update_ns %.1f\n", add_ns, count_ns, update_ns);
    return 0;
}

#endif
