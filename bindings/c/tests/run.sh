#!/usr/bin/env bash
# Build the C library and run the C tests against it: plainly and under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build -p pmkv-c -p pmkv-malloc --locked
# The release library too: with LTO the compiler inlines libpmkv's own malloc into Rust's
# allocations, which is where mixing allocators showed (an NBTree open under ASan aborted).
cargo build --release -p pmkv-c -p pmkv-malloc --locked
lib="${CARGO_TARGET_DIR:-target}/debug"
# Linking libpmkv replaces nothing of the C library: it defines no allocator function
# (split allocation is the opt-in libpmkv_malloc's, which does).
for profile in debug release; do
    so="${CARGO_TARGET_DIR:-target}/$profile/libpmkv.so"
    if nm -D --defined-only "$so" | grep -wE 'malloc|calloc|realloc|free'; then
        echo "$so defines allocator functions: linking it would replace the program's malloc" >&2
        exit 1
    fi
    nm -D --defined-only "${CARGO_TARGET_DIR:-target}/$profile/libpmkv_malloc.so" | grep -qw malloc
done
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
# shared and run without LD_LIBRARY_PATH, then linked statically; split allocation
# through pkg-config's pmkv-malloc.
bindings/c/install.sh "$out/prefix" >/dev/null
pc="$out/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror bindings/c/tests/test_pmkv.c $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs pmkv) \
    -o "$out/test_installed"
env -u LD_LIBRARY_PATH "$out/test_installed" "$out" hart
# Static: `pkg-config --static` as it is, libpmkv static and the C library shared (the
# README's line; every engine works so), and fully static with -static (glibc warns at
# link time about dlopen and getaddrinfo: expected; the mangosteen engine, which loads
# code at run time, is then refused with the line above in the message, not a crash).
static_libs() {
    # shellcheck disable=SC2046
    echo -Wl,-Bstatic $(PKG_CONFIG_PATH="$pc" pkg-config --static --cflags --libs pmkv) -Wl,-Bdynamic
}
link() { # SOURCE OUTPUT FLAGS...: compile quietly, show the compiler's output on failure
    local src="$1" dst="$2"
    shift 2
    gcc -std=c11 -Wall -Wextra -Werror "$src" "$@" -o "$dst" 2>"$out/link.log" || {
        cat "$out/link.log" >&2
        exit 1
    }
}
# shellcheck disable=SC2046
link bindings/c/tests/test_pmkv.c "$out/test_static" $(static_libs)
# shellcheck disable=SC2046
link bindings/c/tests/test_pmkv.c "$out/test_full_static" -static $(PKG_CONFIG_PATH="$pc" pkg-config --static --cflags --libs pmkv)
for t in test_static test_full_static; do
    if ldd "$out/$t" 2>&1 | grep -q libpmkv; then
        echo "the static build $t links libpmkv.so" >&2
        exit 1
    fi
    "$out/$t" "$out" hart
done
# The examples a user copies (bindings/c/examples; the README's C quick start is
# quickstart.c, kept equal to it by crates/api/tests/readme.rs), built as the README says,
# shared and static through pkg-config, and run in a directory of their own.
mkdir -p "$out/examples"
for ex in quickstart cursor; do
    # shellcheck disable=SC2046
    link "bindings/c/examples/$ex.c" "$out/examples/$ex" $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs pmkv)
    # shellcheck disable=SC2046
    link "bindings/c/examples/$ex.c" "$out/examples/$ex-static" $(static_libs)
    # shellcheck disable=SC2046
    link "bindings/c/examples/$ex.c" "$out/examples/$ex-full-static" -static \
        $(PKG_CONFIG_PATH="$pc" pkg-config --static --cflags --libs pmkv)
done
(cd "$out/examples" && env -u LD_LIBRARY_PATH ./quickstart && ./quickstart-static && ./quickstart-full-static) \
    >"$out/examples/qs.out"
printf 'hello = world\nhello = world\nhello = world\n' | diff - "$out/examples/qs.out"
for engine in hart nbtree mangosteen; do
    env -u LD_LIBRARY_PATH "$out/examples/cursor" "$out/examples/$engine.pool" "$engine" b d >"$out/examples/$engine.out"
    printf 'banana\t1\ncherry\t2\n' | diff - "$out/examples/$engine.out"
    "$out/examples/cursor-static" "$out/examples/$engine.pool" "$engine" | cut -f1 | paste -sd " " >"$out/examples/$engine.all"
    echo "apple banana cherry date elderberry" | diff - "$out/examples/$engine.all"
done
"$out/examples/cursor-full-static" "$out/examples/nbtree.pool" nbtree >/dev/null
if "$out/examples/cursor-full-static" "$out/examples/mg-static.pool" mangosteen 2>"$out/examples/mg.err"; then
    echo "a fully static program opened a mangosteen pool" >&2
    exit 1
fi
grep -q "fully static program.*-Wl,-Bstatic" "$out/examples/mg.err" || {
    cat "$out/examples/mg.err" >&2
    exit 1
}
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror bindings/c/tests/test_mangosteen_heap.c \
    $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs pmkv-malloc) -o "$out/test_installed_heap"
env -u LD_LIBRARY_PATH "$out/test_installed_heap" "$out"
# Mangosteen's callback API (Listing 1) from C. Not under AddressSanitizer: the runtime
# finds the application's writes by write-protecting its region and catching SIGSEGV,
# which ASan claims for itself.
gcc -std=c11 -Wall -Wextra -Werror -g -pthread -Ibindings/c/include bindings/c/tests/test_mangosteen.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen"
"$out/test_mangosteen" "$out"
# Split allocation (M7): a C application's malloc'd state made durable, with the opt-in
# libpmkv_malloc linked, then preloaded. Not under ASan either (ASan replaces malloc
# itself, before libpmkv_malloc's).
gcc -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_heap.c \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" \
    -o "$out/test_mangosteen_heap"
"$out/test_mangosteen_heap" "$out"
# With plain -lpmkv the program keeps the C library's malloc, and split_heap is refused
# with the fix in the message; preloading libpmkv_malloc then makes it work.
gcc -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_heap.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_heap_plain"
if ldd "$out/test_mangosteen_heap_plain" | grep -q libpmkv_malloc; then
    echo "a program linked with -lpmkv loads libpmkv_malloc" >&2
    exit 1
fi
"$out/test_mangosteen_heap_plain" "$out" refused
LD_PRELOAD="$(cd "$lib" && pwd)/libpmkv_malloc.so" "$out/test_mangosteen_heap_plain" "$out"
# Compiler capture (bindings/c/bin/pmkv-cc: clang's instrumentation, libpmkv's hooks): the
# same kind of application with no fault handler, verified to miss no byte.
bindings/c/bin/pmkv-cc -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_cc.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_cc"
"$out/test_mangosteen_cc" "$out"
# The same program built with a plain compiler and linked as documented: compiler capture
# is refused at open (its writes would be acknowledged and lost), page capture works.
"${PMKV_CC:-clang-19}" -std=c11 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_cc.c \
    -L"$lib" -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_cc_plain"
"$out/test_mangosteen_cc_plain" "$out" plain
# The same from C++ (pmkv-c++, libc++, with the opt-in libpmkv_malloc for split_heap): an
# ordinary std::map in the region's heap, verified
# to miss no byte, with an uncaptured write caught and a SIGKILLed writer's acknowledged
# writes found by the next open.
bindings/c/bin/pmkv-c++ -std=c++17 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_mangosteen_cxx.cpp \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mangosteen_cxx"
"$out/test_mangosteen_cxx" "$out"
# pmkv::durable<T> (pmkv.hpp): a durable object of ordinary containers, its misuse refused
# (another type, a throwing body, a full region, a writer in a library built without
# capture) and three SIGKILLs; the same test built with a plain compiler is refused at open.
"${PMKV_CC:-clang-19}" -std=c11 -O1 -Wall -Wextra -Werror -shared -fPIC bindings/c/tests/plain_writer.c \
    -o "$out/libplain_writer.so"
for build in pmkv plain; do
    if [ $build = pmkv ]; then cxx=(bindings/c/bin/pmkv-c++); else cxx=("${PMKV_CXX:-clang++-19}" -stdlib=libc++); fi
    "${cxx[@]}" -std=c++17 -Wall -Wextra -Werror -g -Ibindings/c/include bindings/c/tests/test_durable.cpp \
        -L"$out" -lplain_writer -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv \
        -Wl,-rpath,"$(cd "$lib" && pwd)" -Wl,-rpath,"$out" -o "$out/test_durable_$build"
done
"$out/test_durable_pmkv" "$out"
"$out/test_durable_plain" "$out" plain
# A write whose result would own memory (a std::string: region memory outside the write)
# does not compile, and says why.
printf '#include "pmkv.hpp"\n#include <string>\nstd::string f(pmkv::durable<int> &d) { return d.write([](int &) { return std::string(); }); }\n' \
    >"$out/bad_result.cpp"
if bindings/c/bin/pmkv-c++ -std=c++17 -fsyntax-only -Ibindings/c/include "$out/bad_result.cpp" 2>"$out/bad_result.log"; then
    echo "a write returning std::string compiled" >&2
    exit 1
fi
grep -q "trivially copyable" "$out/bad_result.log"
# The example program (bindings/c/examples/index): the same inverted index plain and made
# durable with pmkv::durable, whose access layers differ by a few lines. Both runs must end
# with the same index; the durable one in verify mode, then reopened, starts from it.
ex=bindings/c/examples/index
changed=$(diff "$ex/plain.cpp" "$ex/durable.cpp" | grep -c '^>' || true)
echo "examples/index: durable.cpp changes $changed lines of plain.cpp"
[ "$changed" -le 16 ]
"${PMKV_CXX:-clang++-19}" -stdlib=libc++ -std=c++17 -O1 -Wall -Wextra -Werror "$ex/plain.cpp" -o "$out/index_plain"
bindings/c/bin/pmkv-c++ -std=c++17 -O1 -Wall -Wextra -Werror -Ibindings/c/include "$ex/durable.cpp" \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/index_durable"
"$out/index_plain" - none 3000 | grep end >"$out/index.plain"
INDEX_VERIFY=1 "$out/index_durable" "$out/index.pool" adr 3000 | grep end >"$out/index.durable"
diff "$out/index.plain" "$out/index.durable"
INDEX_VERIFY=1 "$out/index_durable" "$out/index.pool" adr 10 | grep start | sed 's/start/end/' \
    | diff <(cut -d' ' -f1-3 "$out/index.plain") -
# The C++ store demonstration (bindings/c/demos/mgkv: a LevelDB-like interface over an
# unchanged std::map) and its db_bench, small: the same code without durability (no
# libpmkv), with compiler capture in verify mode, and with page capture must find the
# same keys.
demo=bindings/c/demos/mgkv
"${PMKV_CXX:-clang++-19}" -stdlib=libc++ -std=c++17 -O1 -DMGKV_PLAIN -Wall -Wextra -Werror "$demo/db_bench.cc" \
    -o "$out/db_bench_plain"
bindings/c/bin/pmkv-c++ -std=c++17 -O1 -Wall -Wextra -Werror -Ibindings/c/include "$demo/db_bench.cc" \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/db_bench"
smoke="--num=300 --region_mb=8 --db=$out --benchmarks=fillbatch,readrandom,fillrandom,overwrite,readrandom,readseq,readreverse,fill100K"
# shellcheck disable=SC2086
"$out/db_bench_plain" --mode=none $smoke | grep found >"$out/found.none"
# shellcheck disable=SC2086
MGKV_VERIFY=1 "$out/db_bench" --mode=compiler $smoke | grep found >"$out/found.compiler"
# shellcheck disable=SC2086
"$out/db_bench" --mode=pages $smoke | grep found >"$out/found.pages"
sed 's/.*(//' "$out/found.none" | diff - <(sed 's/.*(//' "$out/found.compiler")
sed 's/.*(//' "$out/found.none" | diff - <(sed 's/.*(//' "$out/found.pages")
# The store survives SIGKILL twice (compiler capture, verify mode in the killed writers).
bindings/c/bin/pmkv-c++ -std=c++17 -Wall -Wextra -Werror -g -Ibindings/c/include -I"$demo" bindings/c/tests/test_mgkv.cpp \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$(cd "$lib" && pwd)" -o "$out/test_mgkv"
MGKV_VERIFY=1 "$out/test_mgkv" "$out"
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
