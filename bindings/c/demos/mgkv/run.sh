#!/usr/bin/env bash
# Build mgkv's db_bench twice — db_bench_plain (clang++ and libc++, no libpmkv: no
# durability) and db_bench (pmkv-c++, linked with the release libpmkv) — and run the
# LevelDB suite against no durability, compiler capture, the per-write baseline and page
# capture. PMKV_LATENCY (e.g. 300/100/fence) sets the PM latency emulation.
# Usage: bindings/c/demos/mgkv/run.sh [--num=N] [other db_bench flags]
#   (default: LevelDB's 100-byte values, then the 1 KB read variants)
# MGKV_OUT=DIR keeps the binaries there; MGKV_DB=DIR holds the pools (/dev/shm);
# CARGO_TARGET_DIR as for cargo.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../../.."
cargo build --release -p pmkv-c -p pmkv-malloc --locked >&2
lib="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)"
out="${MGKV_OUT:-$(mktemp -d)}"
# Pools on /dev/shm (memory), as docs/results measures every engine here.
db="$(mktemp -d -p "${MGKV_DB:-/dev/shm}")"
trap 'rm -rf "$db"' EXIT
"${PMKV_CXX:-clang++-19}" -stdlib=libc++ -std=c++17 -O2 -DMGKV_PLAIN -Wall -Wextra -Werror \
    "$here/db_bench.cc" -o "$out/db_bench_plain"
bindings/c/bin/pmkv-c++ -std=c++17 -O2 -Wall -Wextra -Werror -Ibindings/c/include "$here/db_bench.cc" \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$lib" -o "$out/db_bench"
uname -srm
grep -m1 "model name" /proc/cpuinfo || true
for mode in none compiler perwrite pages; do
    bin="$out/db_bench"
    [ "$mode" = none ] && bin="$out/db_bench_plain"
    if [ $# -gt 0 ]; then
        "$bin" --mode=$mode --db="$db" "$@"
    else
        "$bin" --mode=$mode --db="$db"
        "$bin" --mode=$mode --db="$db" --value_size=1000 --benchmarks=fillseq,readrandom,readseq,readreverse
    fi
    echo
done
