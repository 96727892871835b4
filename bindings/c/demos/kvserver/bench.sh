#!/usr/bin/env bash
# kvserver against Redis and `pmkv serve` under redis-benchmark: SET and GET, 50 clients,
# 1M-key space, no pipelining and 16 per round trip; every server in each of RUNS rounds
# (alternating), each start on a fresh pool / AOF in /dev/shm; prints the median and the
# range of the rounds as a Markdown table. Not part of the tests (about 2 minutes here).
#
#   bash bindings/c/demos/kvserver/bench.sh            # RUNS=3 N=100000 (x2 at P16)
#
# Needs: redis-server and redis-benchmark (Debian redis-server, redis-tools), clang-19
# and uthash-dev (to build kvserver), and the release builds of libpmkv and pmkv
# (`cargo build --release -p pmkv-c -p pmkv-malloc -p pmkv-cli`; PMKV=path overrides the latter).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
RUNS="${RUNS:-3}"
N="${N:-100000}"
rel="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)"
PMKV="${PMKV:-$rel/pmkv}"
work="$(mktemp -d /dev/shm/kvbench.XXXXXX)"
pid=""
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
make -s -C bindings/c/demos/kvserver LIBDIR="$rel" O="$work" CFLAGS="-O2 -g"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # name port dir
    case "$1" in
    kvserver) "$work/kvserver" --pool "$3/kv.pool" --port "$2" --region-mib 256 --mode adr >/dev/null 2>&1 & ;;
    redis-always) redis-server --port "$2" --dir "$3" --save "" --appendonly yes --appendfsync always >/dev/null 2>&1 & ;;
    redis-none) redis-server --port "$2" --dir "$3" --save "" --appendonly no >/dev/null 2>&1 & ;;
    pmkv-serve) "$PMKV" serve "$3/serve.pool" --port "$2" --mode adr >/dev/null 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 200); do
        redis-cli -p "$2" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "$1 did not start" >&2
    exit 1
}

servers="kvserver redis-always redis-none pmkv-serve"
declare -A res
for run in $(seq "$RUNS"); do
    for s in $servers; do
        d="$work/$s.$run"
        mkdir -p "$d"
        port=$(free_port)
        start "$s" "$port" "$d"
        for p in 1 16; do
            n=$((p == 1 ? N : 2 * N))
            out=$(redis-benchmark -p "$port" -c 50 -r 1000000 -n "$n" -P "$p" -t set,get -q 2>/dev/null | tr '\r' '\n')
            for t in SET GET; do
                v=$(grep "^$t: " <<<"$out" | tail -1 | awk '{print $2}')
                res[$s.$t.$p]+="${v%.*} "
            done
        done
        kill -9 "$pid"
        wait "$pid" 2>/dev/null || true
        pid=""
        rm -rf "$d"
        echo "round $run: $s done" >&2
    done
done

med() { # "a b c" -> "median (min–max)"
    tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END {m=v[int((NR+1)/2)]; printf "%d (%d–%d)", m, v[1], v[NR]}'
}
echo "| server | SET P1 | GET P1 | SET P16 | GET P16 |"
echo "|---|---:|---:|---:|---:|"
for s in $servers; do
    echo "| $s | $(med "${res[$s.SET.1]}") | $(med "${res[$s.GET.1]}") | $(med "${res[$s.SET.16]}") | $(med "${res[$s.GET.16]}") |"
done
