#!/usr/bin/env bash
# mgkv's LevelDB write benchmarks under Mangosteen (compiler capture, batched redo log)
# against the per-write baseline (--mode=perwrite: every captured write logged and fenced
# as it is made), in alternating rounds, at each PM latency setting given; prints the
# median µs per write of each side and the median of the per-round ratios (min-max).
# Usage: bindings/c/demos/mgkv/ab.sh [ROUNDS] [LATENCY...]
#   (default: 6 rounds; latencies none 300/100 300/100/fence: see docs/design/substrate.md,
#   "Latency emulation")
# MGKV_NUM=N entries per fill (default 50000); MGKV_OUT, MGKV_DB as for run.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds="${1:-6}"
shift || true
lats=("$@")
[ ${#lats[@]} -gt 0 ] || lats=(none 300/100 300/100/fence)
out="${MGKV_OUT:-$(mktemp -d)}"
# Build only (run.sh's own runs are skipped with a benchmark list that matches nothing).
MGKV_OUT="$out" "$here/run.sh" --num=1 --benchmarks= >/dev/null
db="$(mktemp -d -p "${MGKV_DB:-/dev/shm}")"
trap 'rm -rf "$db"' EXIT
benches=fillseq,fillrandom,overwrite,fill100K
tsv="$out/ab.tsv"
printf 'latency\tround\tmode\tbench\tmicros\n' > "$tsv"
for lat in "${lats[@]}"; do
    for r in $(seq 1 "$rounds"); do
        order=(compiler perwrite)
        [ $((r % 2)) -eq 0 ] && order=(perwrite compiler)
        for m in "${order[@]}"; do
            PMKV_LATENCY="$lat" "$out/db_bench" --mode="$m" --db="$db" --num="${MGKV_NUM:-50000}" \
                --benchmarks="$benches" |
                awk -v l="$lat" -v r="$r" -v m="$m" '$2 == ":" && $4 == "micros/op;" { printf "%s\t%s\t%s\t%s\t%s\n", l, r, m, $1, $3 }' >> "$tsv"
        done
        echo "$lat round $r done" >&2
    done
done
python3 - "$tsv" "$rounds" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
print(f"{sys.argv[2]} alternating rounds; µs per write, median (min-max); ratio: perwrite / compiler, median of the rounds' ratios (min-max)\n")
print("| latency | benchmark | compiler (Mangosteen) | perwrite (baseline) | perwrite / compiler |")
print("|---|---|---|---|---|")
lats = list(dict.fromkeys(r[0] for r in rows))
for lat in lats:
    for b in ("fillseq", "fillrandom", "overwrite", "fill100K"):
        c = {r[1]: float(r[4]) for r in rows if r[0] == lat and r[2] == "compiler" and r[3] == b}
        p = {r[1]: float(r[4]) for r in rows if r[0] == lat and r[2] == "perwrite" and r[3] == b}
        ks = sorted(set(c) & set(p))
        if not ks:
            continue
        ratios = [p[k] / c[k] for k in ks]
        f = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
        print(f"| {lat} | {b} | {f(list(c.values()))} | {f(list(p.values()))} | **{statistics.median(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f}) |")
PY
echo "raw figures: $tsv" >&2
