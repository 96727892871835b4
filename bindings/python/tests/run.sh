#!/usr/bin/env bash
# Build the Python package into a virtual environment of its own (created on first use,
# with maturin, pytest and hypothesis from PyPI) and run its pytest tests.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv="${CARGO_TARGET_DIR:-target}/pyenv"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" pytest hypothesis
VIRTUAL_ENV="$(cd "$venv" && pwd)" PATH="$(cd "$venv" && pwd)/bin:$PATH" \
    maturin develop -q -m bindings/python/Cargo.toml
"$venv/bin/python" -m pytest -q -p no:cacheprovider bindings/python/tests
# The wheel the README builds (`maturin build --release`), installed into a fresh virtual
# environment without Rust, running the examples.
bindings/python/tests/wheel.sh
