/*
 * An inverted index: for each word (a number), the documents that contain it, and the
 * last operations made. Ordinary C++ with no knowledge of durability: plain.cpp keeps it
 * in memory, durable.cpp makes it durable with pmkv::durable (pmkv.hpp). The two differ
 * only in their access layer.
 */
#ifndef INDEX_H
#define INDEX_H

#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

struct Index {
    struct Op {
        uint32_t word, doc;
        bool add;
    };
    std::unordered_map<uint32_t, std::vector<uint32_t>> postings;
    std::deque<Op> recent;
    uint64_t ops = 0;

    void note(uint32_t word, uint32_t doc, bool add) {
        recent.push_back(Op{word, doc, add});
        if (recent.size() > 64)
            recent.pop_front();
        ++ops;
    }
    void add(uint32_t word, uint32_t doc) {
        postings[word].push_back(doc);
        note(word, doc, true);
    }
    bool remove(uint32_t word, uint32_t doc) {
        auto it = postings.find(word);
        if (it == postings.end())
            return false;
        auto &v = it->second;
        auto d = std::find(v.begin(), v.end(), doc);
        if (d == v.end())
            return false;
        *d = v.back();
        v.pop_back();
        if (v.empty())
            postings.erase(it);
        note(word, doc, false);
        return true;
    }
    size_t count(uint32_t word) const {
        auto it = postings.find(word);
        return it == postings.end() ? 0 : it->second.size();
    }
    /* An order-independent digest of the whole index, to compare two runs. */
    uint64_t digest() const {
        uint64_t h = ops;
        for (const auto &p : postings)
            for (uint32_t d : p.second)
                h += (uint64_t(p.first) * 0x9E3779B97F4A7C15ull) ^ (d * 0xC2B2AE3D27D4EB4Full);
        return h;
    }
};

#endif
