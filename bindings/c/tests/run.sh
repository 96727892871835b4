#!/usr/bin/env bash
# Build the C library and run the C tests against it: plainly and under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build -p pmkv-c --locked
# The release library too: with LTO the compiler inlines libpmkv's own malloc into Rust's
# allocations, which is where mixing allocators showed (an NBTree open under ASan aborted).
cargo build --release -p pmkv-c --locked
lib="${CARGO_TARGET_DIR:-target}/debug"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Every engine with a pool (`pmkv engines`; volatile keeps nothing to reopen).
engines="hart nbtree mangosteen"
for profile in debug release; do
    plib="$(cd "${CARGO_TARGET_DIR:-target}/$profile" && pwd)"
    for san in "" "-fsanitize=address -fno-omit-frame-pointer"; do
        # shellcheck disable=SC2086
        gcc -std=c11 -Wall -Wextra -Werror -g $san -Ibindings/c/include bindings/c/tests/test_pmkv.c \
            -L"$plib" -lpmkv -Wl,-rpath,"$plib" -o "$out/test_pmkv"
        for engine in $engines; do
            # Rust's allocations are freed by Rust; leak checking would only see the test's own.
            ASAN_OPTIONS=detect_leaks=1 "$out/test_pmkv" "$out" "$engine"
        done
    done
done
# Installed as a user installs it (bindings/c/install.sh), found by pkg-config, linked
# shared and run without LD_LIBRARY_PATH, then linked statically.
bindings/c/install.sh "$out/prefix" >/dev/null
pc="$out/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror bindings/c/tests/test_pmkv.c $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs pmkv) \
    -o "$out/test_installed"
env -u LD_LIBRARY_PATH "$out/test_installed" "$out" hart
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror bindings/c/tests/test_pmkv.c \
    $(PKG_CONFIG_PATH="$pc" pkg-config --static --cflags --libs pmkv | sed 's/-lpmkv/-l:libpmkv.a/') -o "$out/test_static"
if ldd "$out/test_static" | grep -q libpmkv; then
    echo "the static build links libpmkv.so" >&2
    exit 1
fi
"$out/test_static" "$out" hart
# Mangosteen's callback API (Listing 1) from C. Not under AddressSanitizer: the runtime
# finds the application's writes by write-protecting its region and catching SIGSEGV,
# which ASan claims for itself.
gcc -std=c11 -Wall -Wextra -Werror -g -pthread -Ibindings/c/include bindings/c/tests/test_mangosteen.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen"
"$out/test_mangosteen" "$out"
# Split allocation (M7): a C application's malloc'd state made durable. Not under ASan
# either (ASan replaces malloc itself, before libpmkv's).
gcc -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_heap.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_heap"
"$out/test_mangosteen_heap" "$out"
# Compiler capture (bindings/c/bin/pmkv-cc: clang's instrumentation, libpmkv's hooks): the
# same kind of application with no fault handler, verified to miss no byte.
bindings/c/bin/pmkv-cc -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_cc.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_cc"
"$out/test_mangosteen_cc" "$out"
# A durable key-value server from an unchanged hash table (uthash) behind a RESP front end,
# built with pmkv-cc (bindings/c/demos/kvserver), driven by redis-py: commands, pipelines,
# malformed input, a full region, and SIGKILLs during traffic, in verify mode. redis-py
# comes from PyPI into the virtual environment the Python tests use.
make -s -C bindings/c/demos/kvserver LIBDIR="$(cd "$lib" && pwd)" O="$out" CFLAGS="-O1 -g"
venv="${CARGO_TARGET_DIR:-target}/pyenv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check "redis>=5"
"$venv/bin/python" bindings/c/tests/test_kvserver.py "$out/kvserver" "$out"
