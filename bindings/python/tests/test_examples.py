"""The examples a user copies (bindings/python/examples) run as they are, twice, in a
fresh directory; the README's Python quick start is examples/quickstart.py, byte for byte
(the README shows the code; this test keeps the copy equal)."""
import pathlib
import subprocess
import sys

import pmkv

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "bindings" / "python" / "examples"


def _readme_block(marker: str, lang: str) -> str:
    text = (ROOT / "README.md").read_text()
    rest = text[text.index("\n" + marker) :]
    start = rest.index(f"\n```{lang}\n") + len(lang) + 5
    return rest[start : rest.index("\n```\n", start) + 1]


def test_readme_python_quick_start_is_the_example_file():
    assert _readme_block("**Python**", "python") == (EXAMPLES / "quickstart.py").read_text()


def _run(name, cwd):
    r = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_quickstart_runs(tmp_path):
    for _ in range(2):
        assert _run("quickstart.py", tmp_path) == "b'a' b'1'\n"
    with pmkv.open(str(tmp_path / "words.pool")) as db:
        assert dict(db.items()) == {b"a": b"1"} and db.engine == "hart"


def test_transfer_runs(tmp_path):
    first = _run("transfer.py", tmp_path)
    assert first.endswith("{'alice': 70, 'bob': 30}\n") and "refused: bob has 30, not 1000" in first
    assert _run("transfer.py", tmp_path).endswith("{'alice': 40, 'bob': 60}\n")
    with pmkv.open(str(tmp_path / "bank.pool")) as db:
        assert db.engine == "nbtree"
