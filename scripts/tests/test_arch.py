"""Tests of the architecture checks, scripts/layers and scripts/module-graph: each passes a
small clean workspace and fails once a bad import is planted in it (an upward or a
skipping crate import, an import cycle between modules), and both pass on this repository.

    python3 -m unittest discover -s scripts/tests
"""
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent
REPO = SCRIPTS.parent

RULES = """
[layers.low]
packages = ["low"]
uses = []
dev_uses = ["support"]

[layers.engines]
packages = ["eng-a", "eng-b"]
uses = ["low"]
dev_uses = ["support"]
same_layer = false

[layers.api]
packages = ["api"]
uses = ["engines", "low"]
dev_uses = ["support"]

[layers.front]
packages = ["front"]
uses = ["api"]
dev_uses = ["support", "low"]

[layers.support]
packages = ["support"]
uses = ["low"]
"""

CRATES = {
    "low": ([], {"lib.rs": "pub mod pool;\n", "pool.rs": "pub struct Pool;\n"}),
    "eng-a": (["low"], {"lib.rs": "pub use low::pool::Pool;\n"}),
    "eng-b": (["low"], {"lib.rs": "pub fn f() -> low::pool::Pool { low::pool::Pool }\n"}),
    "api": (
        ["eng-a", "eng-b", "low"],
        {
            "lib.rs": "pub mod store;\npub mod cursor;\npub mod guard;\n",
            "guard.rs": "pub struct Guard;\n",
            "store.rs": "use crate::guard::Guard;\npub struct Store(pub Guard);\n",
            "cursor.rs": "use crate::guard::Guard;\npub struct Cursor<'a>(pub &'a Guard);\n",
        },
    ),
    "support": (["low"], {"lib.rs": "pub fn pool() -> low::pool::Pool { low::pool::Pool }\n"}),
    "front": (
        ["api"],
        {
            "main.rs": "mod commands;\nfn main() {}\n",
            "commands/mod.rs": "pub mod kv;\npub mod serve;\npub mod size;\n",
            "commands/size.rs": "pub fn parse() {}\n",
            "commands/kv.rs": "pub struct Args;\npub fn f() { super::size::parse() }\n",
            "commands/serve.rs": "use super::kv::Args;\npub fn g(_: Args) { api::store::Store(api::guard::Guard); }\n",
        },
    ),
}


def write_workspace(root: Path):
    members = ", ".join(f'"crates/{n}"' for n in CRATES)
    (root / "Cargo.toml").write_text(f'[workspace]\nresolver = "2"\nmembers = [{members}]\n')
    for name, (deps, files) in CRATES.items():
        d = root / "crates" / name
        (d / "src").mkdir(parents=True)
        dep_lines = "".join(f'{x} = {{ path = "../{x}" }}\n' for x in deps)
        (d / "Cargo.toml").write_text(
            f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n'
            f"[dependencies]\n{dep_lines}\n[dev-dependencies]\n"
            + ('support = { path = "../support" }\n' if name == "front" else "")
        )
        for f, text in files.items():
            p = d / "src" / f
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    (root / "layers.toml").write_text(RULES)


def run(*args, cwd=None):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=cwd)


class Fixture(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="pmkv-arch-"))
        write_workspace(self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def layers(self):
        return run(SCRIPTS / "layers", "--manifest-path", self.dir / "Cargo.toml", "--rules", self.dir / "layers.toml")

    def graph(self):
        return run(SCRIPTS / "module-graph", "--manifest-path", self.dir / "Cargo.toml")

    def edit(self, rel: str, text: str):
        p = self.dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def append(self, rel: str, text: str):
        p = self.dir / rel
        p.write_text(p.read_text() + text)


class Layers(Fixture):
    def test_clean_workspace_passes(self):
        r = self.layers()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("layers kept: 6 packages", r.stdout)

    def test_upward_source_import_fails(self):
        self.append("crates/low/src/pool.rs", "pub fn up() { let _ = api::store::Store; }\n")
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("low (low): src/pool.rs uses api (api), an upward or skipping import", r.stdout)

    def test_upward_dependency_fails(self):
        text = (self.dir / "crates/eng-a/Cargo.toml").read_text()
        text = text.replace("[dependencies]\n", '[dependencies]\nfront = { path = "../front" }\n')
        self.edit("crates/eng-a/Cargo.toml", text)
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("eng-a (engines): Cargo.toml: dependency on front (front)", r.stdout)

    def test_skipping_import_fails(self):
        # a front end reaching the bottom layer past the API
        self.append("crates/front/src/commands/kv.rs", "use low::pool::Pool;\n")
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("front (front): src/commands/kv.rs uses low (low)", r.stdout)

    def test_same_layer_import_fails_where_forbidden(self):
        self.append("crates/eng-b/src/lib.rs", "pub use eng_a::Pool as P;\n")
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("eng-b (engines): src/lib.rs uses eng_a (engines)", r.stdout)

    def test_dev_code_may_reach_lower_layers(self):
        self.edit("crates/front/tests/t.rs", "use low::pool::Pool;\n#[test]\nfn t() { let _ = Pool; }\n")
        self.append("crates/front/src/commands/kv.rs", "#[cfg(test)]\nmod tests {\n    use low::pool::Pool;\n}\n")
        r = self.layers()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_comments_are_not_imports(self):
        self.append("crates/low/src/pool.rs", "// api::store::Store\n/* front::x */\n")
        self.assertEqual(self.layers().returncode, 0)

    def test_named_exception_excuses_and_stale_one_fails(self):
        self.append("crates/front/src/commands/kv.rs", "use low::pool::Pool;\n")
        exc = '\n[[exception]]\npackage = "front"\nfiles = ["src/commands/kv.rs"]\nuses = "low"\nreason = "x"\n'
        self.append("layers.toml", exc)
        r = self.layers()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.edit("crates/front/src/commands/kv.rs", "pub struct Args;\npub fn f() { super::size::parse() }\n")
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("names src/commands/kv.rs, which does not use it", r.stdout)

    def test_package_in_no_layer_fails(self):
        self.edit("layers.toml", RULES.replace('packages = ["front"]', "packages = []"))
        r = self.layers()
        self.assertEqual(r.returncode, 1)
        self.assertIn("front: in no layer", r.stdout)


class ModuleGraph(Fixture):
    def test_clean_workspace_passes(self):
        r = self.graph()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("no import cycle"), 6)

    def test_cycle_through_crate_paths_fails(self):
        self.append("crates/api/src/guard.rs", "pub fn g(_: &crate::store::Store) {}\n")
        r = self.graph()
        self.assertEqual(r.returncode, 1)
        self.assertIn("CYCLE: guard <-> store", r.stdout)

    def test_cycle_through_super_in_a_folder_fails(self):
        # art/arena.rs <-> art/node.rs through `super::`, as HART's was
        self.edit("crates/eng-a/src/art/mod.rs", "mod arena;\nmod node;\n")
        self.edit("crates/eng-a/src/art/arena.rs", "use super::node::Kind;\npub struct Arena;\n")
        self.edit("crates/eng-a/src/art/node.rs", "use super::arena::Arena;\npub enum Kind {}\n")
        self.append("crates/eng-a/src/lib.rs", "mod art;\n")
        r = self.graph()
        self.assertEqual(r.returncode, 1)
        self.assertIn("CYCLE: art::arena <-> art::node", r.stdout)

    def test_cycle_in_a_binary_crate_fails(self):
        # commands/kv.rs <-> commands/serve.rs under main.rs, as the CLI's was
        self.append("crates/front/src/commands/kv.rs", "pub fn h() { super::serve::g(Args) }\n")
        r = self.graph()
        self.assertEqual(r.returncode, 1)
        self.assertIn("CYCLE: commands::kv <-> commands::serve", r.stdout)

    def test_tests_module_may_reach_anywhere(self):
        self.append("crates/api/src/guard.rs", "#[cfg(test)]\nmod tests {\n    use crate::store::Store;\n}\n")
        self.assertEqual(self.graph().returncode, 0)


class ThisRepository(unittest.TestCase):
    def test_layers_kept(self):
        r = run(SCRIPTS / "layers")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_no_module_cycle_in_any_crate(self):
        r = run(SCRIPTS / "module-graph")
        self.assertEqual(r.returncode, 0, "\n".join(line for line in r.stdout.splitlines() if "CYCLE" in line))
        members = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.count('"manifest_path"')
        self.assertEqual(r.stdout.count("== "), members, "every package is checked")


if __name__ == "__main__":
    unittest.main()
