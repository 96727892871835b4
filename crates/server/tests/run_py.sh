#!/usr/bin/env bash
# pmkv serve under redis-py (pytest), in the virtual environment the Python package's tests
# use (created on first use).
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build -p pmkv-cli --locked
venv="${CARGO_TARGET_DIR:-target}/pyenv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check pytest "redis>=5"
PMKV_BIN="$(cd "${CARGO_TARGET_DIR:-target}/debug" && pwd)/pmkv" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/server/tests/py
