#!/usr/bin/env bash
# The index example's speed: the durable program against the plain one, ROUNDS alternating
# rounds (default 6) of N operations each (default 200000), a fresh pool per round, in
# persistence MODE (default eadr); prints each round and the medians of ns/op and their
# ratios. Builds both with -O2 against the release libpmkv (cargo build --release -p pmkv-c
# -p pmkv-malloc). Usage: bench.sh [N] [ROUNDS] [MODE]
set -euo pipefail
cd "$(dirname "$0")/../../../.."
n="${1:-200000}" rounds="${2:-6}" mode="${3:-eadr}"
lib="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
ex=bindings/c/examples/index
"${PMKV_CXX:-clang++-19}" -stdlib=libc++ -std=c++17 -O2 "$ex/plain.cpp" -o "$out/plain"
bindings/c/bin/pmkv-c++ -std=c++17 -O2 -Ibindings/c/include "$ex/durable.cpp" \
    -L"$lib" -Wl,--no-as-needed -lpmkv_malloc -Wl,--as-needed -lpmkv -Wl,-rpath,"$lib" -o "$out/durable"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); n=$n rounds=$rounds mode=$mode"
for r in $(seq "$rounds"); do
    "$out/plain" - none "$n" bench | awk -v r="$r" '/add_ns/ { print "plain", r, $2, $4, $6 }'
    rm -f "$out/index.pool"
    "$out/durable" "$out/index.pool" "$mode" "$n" bench | awk -v r="$r" '/add_ns/ { print "durable", r, $2, $4, $6 }'
done | tee "$out/rounds"
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for col in 3 4 5; do
    name=$(echo "add count update" | cut -d' ' -f$((col - 2)))
    p=$(awk -v c="$col" '$1 == "plain" { print $c }' "$out/rounds" | median)
    d=$(awk -v c="$col" '$1 == "durable" { print $c }' "$out/rounds" | median)
    awk -v n="$name" -v p="$p" -v d="$d" 'BEGIN { printf "%-6s plain %8.1f ns  durable %8.1f ns  %.2fx\n", n, p, d, d / p }'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
