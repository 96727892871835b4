/*
 * pmkv.hpp: C++ helpers for Mangosteen's callback API (pmkv.h), header-only.
 */
#ifndef PMKV_HPP
#define PMKV_HPP

#include "pmkv.h"

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

} // namespace pmkv

#endif /* PMKV_HPP */
