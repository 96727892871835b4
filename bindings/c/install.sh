#!/usr/bin/env bash
# Build pmkv's C API and install it under PREFIX (default /usr/local):
#   PREFIX/include/pmkv.h (with pmkv.hpp, C++ helpers, and pmkv_capture.h, which pmkv-cc
#   includes), PREFIX/lib/libpmkv.so and libpmkv.a,
#   PREFIX/lib/libpmkv_malloc.so (opt-in: the malloc interposer for Mangosteen's split_heap),
#   PREFIX/lib/pkgconfig/pmkv.pc and pmkv-malloc.pc (their prefix set to PREFIX),
#   PREFIX/bin/pmkv-cc and pmkv-c++ (compilers for Mangosteen's compiler capture).
# Then: cc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs pmkv)
# links the shared library with an rpath to PREFIX/lib (no LD_LIBRARY_PATH needed), and
# cc -static app.c $(pkg-config --static --cflags --libs pmkv) links a static program, as
# is (see the README's C section); `pkg-config --libs pmkv-malloc` adds
# libpmkv_malloc, for programs that open Mangosteen with split_heap (a shared library
# only: libpmkv finds it with dlsym).
set -euo pipefail
prefix="${1:-/usr/local}"
cd "$(dirname "$0")/../.."
cargo build --release -p pmkv-c -p pmkv-malloc --locked
lib="${CARGO_TARGET_DIR:-target}/release"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
prefix="$(cd "$prefix" && pwd)"
install -m 644 bindings/c/include/pmkv.h "$prefix/include/pmkv.h"
install -m 644 bindings/c/include/pmkv_capture.h "$prefix/include/pmkv_capture.h"
install -m 644 bindings/c/include/pmkv.hpp "$prefix/include/pmkv.hpp"
# The libraries without their debug information (the release profile keeps line tables
# for the benchmarks' profiles): a static program is 4.7 MB instead of 18 MB, libpmkv.so
# 3.6 MB instead of 17 MB. The build tree's copies keep it for debugging.
for f in libpmkv.so libpmkv.a libpmkv_malloc.so; do
    strip --strip-debug -o "$prefix/lib/$f" "$lib/$f"
done
chmod 755 "$prefix/lib/libpmkv.so" "$prefix/lib/libpmkv_malloc.so"
chmod 644 "$prefix/lib/libpmkv.a"
mkdir -p "$prefix/bin"
install -m 755 bindings/c/bin/pmkv-cc "$prefix/bin/pmkv-cc"
ln -sf pmkv-cc "$prefix/bin/pmkv-c++"
for pc in pmkv pmkv-malloc; do
    sed "s|^prefix=.*|prefix=$prefix|" "bindings/c/$pc.pc" >"$prefix/lib/pkgconfig/$pc.pc"
done
echo "installed pmkv's C API under $prefix"
