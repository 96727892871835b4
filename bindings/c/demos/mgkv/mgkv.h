/* mgkv: a small key-value store with a LevelDB-like interface (Put, Get, Delete, a
 * WriteBatch, an Iterator with Seek/Next/Prev) over an ordinary libc++ std::map of strings,
 * the demonstration that an unchanged in-memory data structure becomes durable with
 * Mangosteen. Header-only, C++17.
 *
 * The data-structure code is `apply` below: std::map operations and nothing else. The same
 * code runs in three ways, chosen at DB::Open:
 *   - kNone: no durability; the map lives in the ordinary heap and `apply` is called
 *     directly (build with -DMGKV_PLAIN and any C++ compiler: libpmkv is not needed);
 *   - kCompiler: Mangosteen with compiler capture (build with pmkv-c++ and link libpmkv);
 *   - kPages: Mangosteen with page-protection capture (same build).
 * Under Mangosteen each call is a request (split_heap: the map's nodes and strings are
 * malloc'd from the region inside read-write requests), acknowledged once durable.
 *
 * The strings use an allocator type of their own so that basic_string's out-of-line
 * members are compiled here (instrumented) rather than taken from libc++.so; see
 * docs/design/mangosteen.md. One DB serves one thread; an Iterator is a client of its own
 * whose position is a map iterator, valid while no write removes its entry. */
#ifndef MGKV_H
#define MGKV_H

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unistd.h>

#ifndef MGKV_PLAIN
#include "pmkv.h"
#endif

namespace mgkv {

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

/* The state: the root object (in the region under Mangosteen). */
struct Root {
    Map map;
};

class Status {
  public:
    Status() = default;
    static Status OK() { return Status(); }
    static Status NotFound() { return Status(1, "NotFound"); }
    static Status Error(const std::string &m) { return Status(2, m); }
    bool ok() const { return code_ == 0; }
    bool IsNotFound() const { return code_ == 1; }
    std::string ToString() const { return ok() ? "OK" : msg_; }

  private:
    Status(int c, std::string m) : code_(c), msg_(std::move(m)) {}
    int code_ = 0;
    std::string msg_;
};

/* Requests: op(1) then records of klen(4) key [vlen(4) value]. */
enum Op : char {
    kPut = 'P',
    kDel = 'D',
    kBatch = 'B', /* records, each op(1) klen key [vlen value] */
    kGet = 'G',
    kSeek = 'S',
    kFirst = 'F',
    kLast = 'L',
    kNext = 'N',
    kPrev = 'V',
};

namespace detail {
inline void put32(std::string &s, uint32_t v) { s.append(reinterpret_cast<const char *>(&v), 4); }
inline uint32_t get32(const char *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
inline bool read_only(char op) { return op != kPut && op != kDel && op != kBatch; }

/* A client: its request, its response, and an iterator's position. */
struct Client {
    std::string req;
    std::string resp;
    Map::iterator it;
    bool valid = false;
    /* The last write ran out of region space (its allocation threw std::bad_alloc). */
    bool full = false;
};

inline void answer_position(Client *c, Map &m) {
    c->resp.clear();
    c->valid = c->it != m.end();
    if (!c->valid) return;
    put32(c->resp, static_cast<uint32_t>(c->it->first.size()));
    c->resp.append(c->it->first.data(), c->it->first.size());
    c->resp.append(c->it->second.data(), c->it->second.size());
}

/* The data-structure code: ordinary std::map operations on the root. */
inline void apply(Client *c, Root *r) {
    const char *p = c->req.data(), *end = p + c->req.size();
    char op = *p++;
    auto field = [&](std::string_view *out) {
        uint32_t n = get32(p);
        *out = std::string_view(p + 4, n);
        p += 4 + n;
    };
    Map &m = r->map;
    std::string_view k, v;
    switch (op) {
    case kPut:
        field(&k), field(&v);
        m[Str(k.data(), k.size())] = Str(v.data(), v.size());
        break;
    case kDel:
        field(&k);
        m.erase(Str(k.data(), k.size()));
        break;
    case kBatch:
        while (p < end) {
            char o = *p++;
            field(&k);
            if (o == kPut) {
                field(&v);
                m[Str(k.data(), k.size())] = Str(v.data(), v.size());
            } else {
                m.erase(Str(k.data(), k.size()));
            }
        }
        break;
    case kGet: {
        field(&k);
        auto it = m.find(Str(k.data(), k.size()));
        c->resp.clear();
        c->valid = it != m.end();
        if (c->valid) c->resp.assign(it->second.data(), it->second.size());
        break;
    }
    case kSeek:
        field(&k);
        c->it = m.lower_bound(Str(k.data(), k.size()));
        answer_position(c, m);
        break;
    case kFirst:
        c->it = m.begin();
        answer_position(c, m);
        break;
    case kLast:
        c->it = m.empty() ? m.end() : std::prev(m.end());
        answer_position(c, m);
        break;
    case kNext:
        if (c->valid) ++c->it;
        answer_position(c, m);
        break;
    case kPrev:
        if (c->valid) c->it = c->it == m.begin() ? m.end() : std::prev(c->it);
        answer_position(c, m);
        break;
    }
}

#ifndef MGKV_PLAIN
inline void *init_client(void *) { return new Client(); }
inline void destroy_client(void *c) { delete static_cast<Client *>(c); }
inline int deserialize(void *cp, const uint8_t *req, size_t len) {
    if (len < 1) return 1;
    static_cast<Client *>(cp)->req.assign(reinterpret_cast<const char *>(req), len);
    return 0;
}
inline bool is_read_only(void *cp) { return read_only(static_cast<Client *>(cp)->req[0]); }
inline void process(void *cp, uint8_t *region, size_t len) {
    Client *c = static_cast<Client *>(cp);
    Root *r = static_cast<Root *>(pmkv_mg_root(region, len));
    if (!r) {
        if (read_only(c->req[0])) {
            static Root empty; /* never written: a read before the first write */
            r = &empty;
        } else {
            r = new (std::malloc(sizeof(Root))) Root();
            pmkv_mg_set_root(region, len, r);
        }
    }
    /* A full region makes an allocation throw; the exception must not unwind into the
     * runtime that called us (it would abort the process). std::map and std::string
     * leave the map unchanged when a Put's allocation fails; a WriteBatch keeps the
     * operations before the failing one (a request's writes cannot be taken back). */
    c->full = false;
    try {
        apply(c, r);
    } catch (const std::bad_alloc &) {
        c->full = true;
    }
}
inline const uint8_t *response(void *cp, size_t *len) {
    Client *c = static_cast<Client *>(cp);
    /* The first byte says whether the iterator (or Get) found an entry, or 'F' that the
     * write found the region full. */
    c->req.assign(1, c->full ? 'F' : c->valid ? '1' : '0');
    c->req += c->resp;
    *len = c->req.size();
    return reinterpret_cast<const uint8_t *>(c->req.data());
}
inline const pmkv_mg_callbacks &callbacks() {
    static const pmkv_mg_callbacks cb = {init_client, destroy_client, deserialize, is_read_only, process, response};
    return cb;
}
#endif
} // namespace detail

class WriteBatch {
  public:
    WriteBatch() { rep_.assign(1, kBatch); }
    void Put(std::string_view k, std::string_view v) {
        rep_ += kPut;
        detail::put32(rep_, static_cast<uint32_t>(k.size()));
        rep_.append(k.data(), k.size());
        detail::put32(rep_, static_cast<uint32_t>(v.size()));
        rep_.append(v.data(), v.size());
    }
    void Delete(std::string_view k) {
        rep_ += kDel;
        detail::put32(rep_, static_cast<uint32_t>(k.size()));
        rep_.append(k.data(), k.size());
    }
    void Clear() { rep_.assign(1, kBatch); }

  private:
    friend class DB;
    std::string rep_;
};

enum class Mode { kNone, kCompiler, kPages, kPerWrite };

class DB;

class Iterator {
  public:
    ~Iterator();
    bool Valid() const { return valid_; }
    void SeekToFirst() { Step(kFirst, {}); }
    void SeekToLast() { Step(kLast, {}); }
    void Seek(std::string_view k) { Step(kSeek, k); }
    void Next() { Step(kNext, {}); }
    void Prev() { Step(kPrev, {}); }
    std::string_view key() const { return key_; }
    std::string_view value() const { return value_; }
    Status status() const { return status_; }

  private:
    friend class DB;
    explicit Iterator(DB *db);
    void Step(Op op, std::string_view k);
    DB *db_;
    detail::Client plain_; /* kNone: the client, called directly */
#ifndef MGKV_PLAIN
    pmkv_mg_client *client_ = nullptr;
#endif
    bool valid_ = false;
    std::string_view key_, value_;
    std::string buf_;
    Status status_;
};

class DB {
  public:
    /* Open (creating if missing) the store at `path` (a pool file; ignored for kNone),
     * whose region holds `region_bytes`. */
    static Status Open(Mode mode, const std::string &path, uint64_t region_bytes, DB **out) {
        std::unique_ptr<DB> db(new DB(mode));
        if (mode == Mode::kNone) {
            db->root_ = new Root();
        } else {
#ifdef MGKV_PLAIN
            (void)path, (void)region_bytes;
            return Status::Error("built with MGKV_PLAIN: no durability available");
#else
            pmkv_mg_options o = {};
            o.create = 1;
            o.region_size = region_bytes;
            o.split_heap = 1;
            o.capture = mode == Mode::kPages ? PMKV_MG_CAPTURE_PAGES : PMKV_MG_CAPTURE_COMPILER;
            o.per_write_log = mode == Mode::kPerWrite;
            o.verify_capture = std::getenv("MGKV_VERIFY") != nullptr;
            if (pmkv_mg_open(path.c_str(), &o, &detail::callbacks(), nullptr, &db->mg_) != 0 ||
                pmkv_mg_client_open(db->mg_, &db->client_) != 0)
                return Status::Error(pmkv_last_error());
#endif
        }
        *out = db.release();
        return Status::OK();
    }
    ~DB() {
        if (root_) delete root_;
#ifndef MGKV_PLAIN
        if (client_) pmkv_mg_client_close(mg_, client_);
        if (mg_) pmkv_mg_close(mg_);
#endif
    }
    Status Put(std::string_view k, std::string_view v) {
        req_.assign(1, kPut);
        field(k), field(v);
        return Run(&plain_, nullptr);
    }
    Status Delete(std::string_view k) {
        req_.assign(1, kDel);
        field(k);
        return Run(&plain_, nullptr);
    }
    Status Write(const WriteBatch &b) {
        req_ = b.rep_;
        return Run(&plain_, nullptr);
    }
    Status Get(std::string_view k, std::string *v) {
        req_.assign(1, kGet);
        field(k);
        std::string_view got;
        bool found = false;
        Status s = Run(&plain_, nullptr, &got, &found);
        if (!s.ok()) return s;
        if (!found) return Status::NotFound();
        v->assign(got.data(), got.size());
        return s;
    }
    Iterator *NewIterator() { return new Iterator(this); }

  private:
    friend class Iterator;
    explicit DB(Mode m) : mode_(m) {}
    void field(std::string_view s) {
        detail::put32(req_, static_cast<uint32_t>(s.size()));
        req_.append(s.data(), s.size());
    }
    /* Run `req_` for a client (`plain` for kNone, `mc` or this DB's client otherwise);
     * `out`/`found` receive what the request answered. */
    Status Run(detail::Client *plain, void *mc, std::string_view *out = nullptr, bool *found = nullptr) {
        if (mode_ == Mode::kNone) {
            plain->req.swap(req_);
            detail::apply(plain, root_);
            plain->req.swap(req_);
            if (out) *out = plain->resp, *found = plain->valid;
            return Status::OK();
        }
#ifdef MGKV_PLAIN
        (void)mc;
        return Status::Error("no durability in this build");
#else
        uint8_t *resp = nullptr;
        size_t n = 0;
        pmkv_mg_client *c = mc ? static_cast<pmkv_mg_client *>(mc) : client_;
        if (pmkv_mg_client_cmd(mg_, c, reinterpret_cast<const uint8_t *>(req_.data()), req_.size(), &resp, &n) != 0)
            return Status::Error(pmkv_last_error());
        if (n > 0 && resp[0] == 'F') {
            pmkv_free(resp, n);
            return Status::Error("the store's region is full (open it with a larger region_bytes)");
        }
        if (out) {
            resp_.assign(reinterpret_cast<char *>(resp), n);
            *found = n > 0 && resp_[0] == '1';
            *out = std::string_view(resp_).substr(n > 0 ? 1 : 0);
        }
        pmkv_free(resp, n);
        return Status::OK();
#endif
    }
    Mode mode_;
    Root *root_ = nullptr;
    detail::Client plain_;
    std::string req_, resp_;
#ifndef MGKV_PLAIN
    pmkv_mg *mg_ = nullptr;
    pmkv_mg_client *client_ = nullptr;
#endif
};

inline Iterator::Iterator(DB *db) : db_(db) {
#ifndef MGKV_PLAIN
    if (db->mode_ != Mode::kNone && pmkv_mg_client_open(db->mg_, &client_) != 0)
        status_ = Status::Error(pmkv_last_error());
#endif
}

inline Iterator::~Iterator() {
#ifndef MGKV_PLAIN
    if (client_) pmkv_mg_client_close(db_->mg_, client_);
#endif
}

inline void Iterator::Step(Op op, std::string_view k) {
    db_->req_.assign(1, op);
    if (op == kSeek) db_->field(k);
    std::string_view got;
    bool found = false;
#ifndef MGKV_PLAIN
    void *mc = client_;
#else
    void *mc = nullptr;
#endif
    status_ = db_->Run(&plain_, mc, &got, &found);
    valid_ = status_.ok() && found;
    if (!valid_) return;
    buf_.assign(got.data(), got.size());
    uint32_t kl = detail::get32(buf_.data());
    key_ = std::string_view(buf_).substr(4, kl);
    value_ = std::string_view(buf_).substr(4 + kl);
}

} // namespace mgkv
#endif
