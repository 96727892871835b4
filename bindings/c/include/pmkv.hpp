/*
 * pmkv.hpp: C++ helpers for Mangosteen (pmkv.h), header-only.
 *
 * pmkv::durable<T> makes an ordinary C++ object durable: its code stays as it is, and the
 * program's access layer wraps each operation in write() or read().
 *
 *     pmkv::durable<Index> idx("index.pool");            // Index as in the plain program
 *     idx.write([&](Index &i) { i.add(word, doc); });     // durable when write returns
 *     size_t n = idx.read([&](const Index &i) { return i.count(word); });
 *
 * Build with bindings/c/bin/pmkv-c++ and link -lpmkv_malloc -lpmkv (pkg-config
 * pmkv-malloc), C++17: the object lives in the region's heap, at an address fixed for the pool's
 * life, and every store its code makes inside write() is captured by the compiler's
 * instrumentation (docs/design/mangosteen.md, "The small API").
 */
#ifndef PMKV_HPP
#define PMKV_HPP

#include "pmkv.h"

#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

/* The wrapper's own plumbing is left out of the capture instrumentation: its stores go to
 * the caller's stack, never to the region, and a call per store would be most of a small
 * read's cost. The application's code it calls stays instrumented (clang does not inline
 * code with another sanitizer setting into it). */
#define PMKV_PLUMBING __attribute__((no_sanitize("thread")))

namespace pmkv {

/*
 * Run `body`, the work of a read-write request inside process_request. An exception it
 * lets out (std::bad_alloc when the region's heap is full, or any other) is caught here
 * and aborts the request (pmkv_mg_abort): every write it made is rolled back, and
 * pmkv_mg_client_cmd returns PMKV_E_INVALID_ARGUMENT. An exception must never leave
 * process_request itself: libpmkv cannot catch a C++ exception, and the process would
 * abort.
 */
template <class F> void guard_request(F &&body) noexcept {
    try {
        static_cast<F &&>(body)();
    } catch (...) {
        (void)pmkv_mg_abort();
    }
}

/*
 * Run `body` with its allocations taken from the C library even inside a write: for what
 * must outlive the write without being part of the durable state (a result string handed
 * back to the caller, a buffer reused by later reads). Frees of the region's blocks still
 * go to its heap.
 */
template <class F> auto transient(F &&body) -> decltype(static_cast<F &&>(body)()) {
    struct end {
        ~end() { (void)pmkv_mg_transient_end(); }
    };
    pmkv_mg_transient_begin();
    end e;
    return static_cast<F &&>(body)();
}

/* A libpmkv error: its code (PMKV_E_*) and message (pmkv_last_error). */
class error : public std::runtime_error {
  public:
    error(int code, const std::string &what) : std::runtime_error(what), code_(code) {}
    int code() const noexcept { return code_; }

  private:
    int code_;
};

/* A write was rolled back because its body threw something other than std::bad_alloc
 * (which is rethrown as itself): what() is the original exception's what(). The original
 * object cannot be rethrown: it was allocated in the region, whose state the rollback
 * restored. */
class aborted : public std::runtime_error {
  public:
    explicit aborted(const std::string &what) : std::runtime_error(what) {}
};

/* How to open a durable<T>. */
struct durable_options {
    /* "adr", "eadr", "msync" or "none". */
    const char *mode = "adr";
    /* Bytes of a new pool's region (0: 1 MiB); a later open with a larger one is refused. */
    uint64_t region_size = 0;
    /* PMKV_MG_CAPTURE_COMPILER (code built with pmkv-c++) or PMKV_MG_CAPTURE_PAGES. */
    int capture = PMKV_MG_CAPTURE_COMPILER;
    /* Compare the region after every write and fail a write whose stores were missed. */
    bool verify = false;
    /* Run the backend on a thread of its own. */
    bool background = false;
};

namespace detail {
[[noreturn]] inline void fail(int rc, const char *what) {
    const char *why = pmkv_last_error();
    throw error(rc, std::string(what) + ": " + (why ? why : "unknown error"));
}
} // namespace detail

/*
 * A T kept durable in a Mangosteen pool. T is default-constructed inside the first write
 * to a new pool; every later open finds the same object. Reads run on the object itself,
 * in parallel, never beside a batch of writes; writes are flat-combined into batches,
 * their stores captured, and write() returns once its batch is durable.
 *
 * What T's code must keep (the limits of the machinery, not of this class):
 * - every container's memory comes from the region's heap, which it does by itself inside
 *   write(): `new`, `malloc` and their aligned forms are redirected there. Do not move
 *   memory made outside a write into the object (a std::vector built before the write and
 *   std::move'd in stays the C library's and is lost at reopen): copy it in;
 * - containers from headers (libc++, which pmkv-c++ selects); libc++'s std::string keeps
 *   its growth in libc++.so, uninstrumented: give strings an allocator of their own
 *   (docs/design/mangosteen.md, "Compiler capture");
 * - write() returns void or a trivially copyable value (anything owning memory would own
 *   region memory outside the write); read() returns anything.
 *
 * An exception out of a write's body rolls the write back (nothing of it is committed)
 * and is rethrown from write(): std::bad_alloc (the region's heap is full) as itself,
 * anything else as pmkv::aborted. A write that fails in libpmkv throws pmkv::error.
 */
template <class T> class durable {
  public:
    explicit durable(const char *path, const durable_options &o = durable_options()) {
        pmkv_mg_options mo{};
        mo.mode = o.mode;
        mo.create = 1;
        mo.region_size = o.region_size;
        mo.background = o.background ? 1 : 0;
        mo.split_heap = 1;
        mo.capture = o.capture;
        mo.verify_capture = o.verify ? 1 : 0;
        pmkv_mg_callbacks cb{&no_client, &no_destroy, &no_request, &no_read_only, &no_process, &no_response};
        int rc = pmkv_mg_open(path, &mo, &cb, nullptr, &m_);
        if (rc != 0)
            detail::fail(rc, "opening the durable object's pool");
        made r;
        rc = pmkv_mg_write(m_, &make_root, &r);
        if (rc != 0) {
            std::string why = pmkv_last_error() ? pmkv_last_error() : "";
            (void)pmkv_mg_close(m_);
            if (r.wrong_type)
                throw error(PMKV_E_INVALID_ARGUMENT,
                            std::string("the pool at ") + path + " holds an object of another type than " +
                                typeid(T).name() + " (or of another size): opened with the type it was made with");
            if (r.full)
                throw std::bad_alloc();
            throw error(rc, "making the durable object: " + why);
        }
        root_ = r.root; // at an address fixed for the pool's life
    }
    durable(const durable &) = delete;
    durable &operator=(const durable &) = delete;
    ~durable() { (void)pmkv_mg_close(m_); }

    /* Run `f(T&)` as a durable write; returns what f returns once it is durable. */
    template <class F> PMKV_PLUMBING auto write(F &&f) -> decltype(f(std::declval<T &>())) {
        using R = decltype(f(std::declval<T &>()));
        static_assert(std::is_void<R>::value || std::is_trivially_copyable<R>::value,
                      "pmkv::durable::write returns void or a trivially copyable value: a result that owns memory "
                      "would own region memory outside the write; return it from read(), or make it in "
                      "pmkv::transient");
        call<F, R, T &> c(&f, root_);
        int rc = pmkv_mg_write(m_, &call<F, R, T &>::run_write, &c);
        c.rethrow(); // the body threw: rolled back (rc is the abort's)
        if (rc != 0)
            detail::fail(rc, "durable write");
        return c.result();
    }

    /* Run `f(const T&)` on the object, in parallel with other reads; returns what f returns. */
    template <class F> PMKV_PLUMBING auto read(F &&f) const -> decltype(f(std::declval<const T &>())) {
        using R = decltype(f(std::declval<const T &>()));
        call<F, R, const T &> c(&f, root_);
        int rc = pmkv_mg_read(m_, &call<F, R, const T &>::run_read, &c);
        if (rc != 0)
            detail::fail(rc, "durable read");
        c.rethrow();
        return c.result();
    }

    /* The C runtime, for what the class does not cover (pmkv_mg_region_size, ...). */
    pmkv_mg *runtime() const noexcept { return m_; }

  private:
    /* The root block: a tag naming T, then the object. */
    struct holder {
        uint64_t tag;
        T value;
    };

    /* T's name (as the compiler spells it) and size: a pool made for another type is
     * refused rather than read as this one. */
    static uint64_t tag() {
        uint64_t h = 1469598103934665603ull;
        for (const char *p = typeid(T).name(); *p; ++p)
            h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
        return h ^ (static_cast<uint64_t>(sizeof(T)) << 40);
    }

    static holder *root(uint8_t *region, uintptr_t len) {
        return static_cast<holder *>(pmkv_mg_root(region, len));
    }

    /* A body, its result and what it threw: plain fields only (no std::string, optional
     * or exception_ptr members), so that a read costs no constructor or destructor call. */
    template <class F, class R, class Arg> struct call {
        using V = typename std::conditional<std::is_void<R>::value, char, R>::type;
        PMKV_PLUMBING call(F *body, holder *obj) : f(body), h(obj), has(false), threw(0), what(nullptr), ex(nullptr) {}
        F *f;
        holder *h;
        alignas(V) unsigned char buf[sizeof(V)];
        bool has;
        /* 0: no exception; 1: std::bad_alloc; 2: another std::exception (`what`); 3: other. */
        int threw;
        std::string *what;
        std::exception_ptr *ex;

        PMKV_PLUMBING void run_on(std::true_type) { (*f)(static_cast<Arg>(h->value)); }
        PMKV_PLUMBING void run_on(std::false_type) {
            ::new (static_cast<void *>(buf)) V((*f)(static_cast<Arg>(h->value)));
            has = true;
        }

        static PMKV_PLUMBING void run_write(void *arg, uint8_t *, uintptr_t) {
            auto *c = static_cast<call *>(arg);
            try {
                c->run_on(std::is_void<R>());
            } catch (const std::bad_alloc &) {
                c->threw = 1;
                (void)pmkv_mg_abort();
            } catch (const std::exception &e) {
                // The exception object lies in the region, which the rollback restores:
                // keep its message, made outside the region.
                transient([&] { c->what = new std::string(e.what()); });
                c->threw = 2;
                (void)pmkv_mg_abort();
            } catch (...) {
                c->threw = 3;
                (void)pmkv_mg_abort();
            }
        }
        static PMKV_PLUMBING void run_read(void *arg, const uint8_t *, uintptr_t) {
            auto *c = static_cast<call *>(arg);
            try {
                c->run_on(std::is_void<R>());
            } catch (...) {
                c->ex = new std::exception_ptr(std::current_exception());
            }
        }
        PMKV_PLUMBING void rethrow() {
            if (ex) {
                std::exception_ptr e = *ex;
                delete ex;
                std::rethrow_exception(e);
            }
            if (threw == 1)
                throw std::bad_alloc();
            if (threw) {
                std::string w = what ? *what : "the write threw and was rolled back";
                delete what;
                throw aborted(w);
            }
        }
        PMKV_PLUMBING R result() { return result_of(std::is_void<R>()); }
        PMKV_PLUMBING void result_of(std::true_type) {}
        PMKV_PLUMBING R result_of(std::false_type) {
            V *p = std::launder(reinterpret_cast<V *>(buf));
            V v(std::move(*p));
            p->~V();
            return v;
        }
    };

    /* What making the root found. */
    struct made {
        bool wrong_type = false;
        bool full = false;
        holder *root = nullptr;
    };

    static void make_root(void *arg, uint8_t *region, uintptr_t len) {
        auto *r = static_cast<made *>(arg);
        holder *h = root(region, len);
        if (h != nullptr) {
            if (h->tag != tag()) {
                r->wrong_type = true;
                (void)pmkv_mg_abort();
            }
            r->root = h;
            return;
        }
        try {
            h = new holder{tag(), T()};
        } catch (...) {
            r->full = true;
            (void)pmkv_mg_abort();
            return;
        }
        (void)pmkv_mg_set_root(region, len, h);
        r->root = h;
    }

    /* pmkv_mg_open needs Listing 1's callbacks and checks that process_request lies in
     * code built with pmkv-c++; these are never called for requests (reads and writes go
     * through pmkv_mg_read / pmkv_mg_write), and are compiled into the program's module. */
    static void *no_client(void *) { return nullptr; }
    static void no_destroy(void *) {}
    static int no_request(void *, const uint8_t *, uintptr_t) { return 1; }
    static bool no_read_only(void *) { return true; }
    static void no_process(void *, uint8_t *, uintptr_t) {}
    static const uint8_t *no_response(void *, uintptr_t *len) {
        *len = 0;
        return nullptr;
    }

    pmkv_mg *m_ = nullptr;
    holder *root_ = nullptr;
};

} // namespace pmkv

#endif /* PMKV_HPP */
