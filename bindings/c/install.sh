#!/usr/bin/env bash
# Build pmkv's C API and install it under PREFIX (default /usr/local):
#   PREFIX/include/pmkv.h, PREFIX/lib/libpmkv.so and libpmkv.a,
#   PREFIX/lib/pkgconfig/pmkv.pc (its prefix set to PREFIX), PREFIX/bin/pmkv-cc and pmkv-c++
#   (compilers for Mangosteen's compiler capture).
# Then: cc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs pmkv)
# links the shared library with an rpath to PREFIX/lib (no LD_LIBRARY_PATH needed), and
# `pkg-config --static --libs pmkv` with `-l:libpmkv.a` in place of `-lpmkv` links it
# statically (see the README's C section).
set -euo pipefail
prefix="${1:-/usr/local}"
cd "$(dirname "$0")/../.."
cargo build --release -p pmkv-c --locked
lib="${CARGO_TARGET_DIR:-target}/release"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
prefix="$(cd "$prefix" && pwd)"
install -m 644 bindings/c/include/pmkv.h "$prefix/include/pmkv.h"
install -m 755 "$lib/libpmkv.so" "$prefix/lib/libpmkv.so"
install -m 644 "$lib/libpmkv.a" "$prefix/lib/libpmkv.a"
mkdir -p "$prefix/bin"
install -m 755 bindings/c/bin/pmkv-cc "$prefix/bin/pmkv-cc"
ln -sf pmkv-cc "$prefix/bin/pmkv-c++"
sed "s|^prefix=.*|prefix=$prefix|" bindings/c/pmkv.pc >"$prefix/lib/pkgconfig/pmkv.pc"
echo "installed pmkv's C API under $prefix"
