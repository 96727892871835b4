#!/usr/bin/env bash
# The README's wheel: built by its one command (`maturin build --release`), installed with
# pip into a fresh virtual environment that has no Rust (PATH without cargo, no index:
# the wheel needs nothing else), then the examples run from it: import, put/get, batch.
# Usage: wheel.sh [OUT_DIR] (default: a temporary directory, removed after).
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv="${CARGO_TARGET_DIR:-target}/pyenv"
if [ ! -x "$venv/bin/maturin" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2"
fi
out="${1:-}"
if [ -z "$out" ]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out/wheels" "$out/run"
out="$(cd "$out" && pwd)"
"$venv/bin/maturin" build --release -q -m bindings/python/Cargo.toml --out "$out/wheels"
wheel="$(ls "$out"/wheels/pmkv-*.whl)"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
python3 -m venv "$out/venv"
norust=(env -i HOME="$out" PATH=/usr/local/bin:/usr/bin:/bin)
"${norust[@]}" "$out/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
if "${norust[@]}" sh -c 'command -v cargo || command -v rustc'; then
    echo "the wheel test's environment has Rust on its PATH" >&2
    exit 1
fi
cp bindings/python/examples/*.py "$out/run/"
cd "$out/run"
"${norust[@]}" "$out/venv/bin/python" -W ignore::UserWarning quickstart.py | diff - <(echo "b'a' b'1'")
"${norust[@]}" "$out/venv/bin/python" -W ignore::UserWarning transfer.py | tail -1 | diff - <(echo "{'alice': 70, 'bob': 30}")
"${norust[@]}" "$out/venv/bin/python" -c 'import pmkv, sys; sys.exit(pmkv.__file__.startswith(sys.prefix) is False)'
echo "wheel installed without Rust and ran the examples"
