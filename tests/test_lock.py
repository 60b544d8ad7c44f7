"""requirements.lock (issue 40): the environment the tests run in (.venv, made by scripts/setup.sh
for the README's two commands and .ci/run) holds exactly the locked versions; the lock pins torch
at the CPU build on this disk, by that wheel's hash; pyproject.toml gives ranges capped at the next
major release, and the lock lies inside them."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"


def _lockfile():
    spec = importlib.util.spec_from_file_location("lockfile", ROOT / "scripts" / "lockfile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


lockfile = _lockfile()
PINS = lockfile.parse_lock(LOCK.read_text())


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        reqs += extra
    return [Requirement(r) for r in reqs]


def test_the_environment_holds_exactly_the_locked_versions():
    """What `pip freeze` lists in this interpreter's environment against the lock: nothing missing,
    nothing at another version, nothing the lock does not list (besides the project and pip)."""
    diff = lockfile.compare(PINS, lockfile.installed())
    assert diff == {"missing": [], "different": [], "extra": []}


def test_every_locked_line_is_pinned_with_a_hash():
    text = LOCK.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text[text.index("\n", text.index("pip-compile")):])
    pinned = [b for b in blocks if re.match(r"[A-Za-z0-9][^\n]*==", b.strip())]
    assert len(pinned) == len(PINS) > 100
    assert all("--hash=sha256:" in b for b in pinned)


def test_pyproject_ranges_are_capped_at_the_next_major_and_hold_the_lock():
    for req in _requirements():
        name = lockfile.canonical(req.name)
        uppers = [s for s in req.specifier if s.operator == "<"]
        lowers = [s for s in req.specifier if s.operator == ">="]
        assert uppers and lowers, f"{req}: a range with a lower bound and a cap at the next major"
        major = int(uppers[0].version.split(".")[0])
        assert int(PINS[name].split(".")[0]) == major - 1, f"{req}: capped at the major after the locked one"
        assert req.specifier.contains(PINS[name], prereleases=True), f"lock {name}=={PINS[name]} outside {req}"


def test_torch_is_locked_at_the_pin_as_the_cpu_build_on_disk():
    pin = next(line for line in (ROOT / "scripts" / "torch-cpu.txt").read_text().splitlines()
               if line.startswith("torch=="))
    assert PINS["torch"] == pin.split("==")[1] + "+cpu"
    hashes = set(re.findall(r"sha256:([0-9a-f]{64})", lockfile.block(LOCK.read_text(), "torch")))
    dirs = [d for d in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split() if Path(d).is_dir()]
    wheels = [w for d in dirs for w in Path(d).glob(f"torch-{PINS['torch']}-*.whl")]
    if not wheels:
        pytest.skip("no torch wheel on this disk")
    for wheel in wheels:
        digest = hashlib.sha256()
        with wheel.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        assert digest.hexdigest() in hashes, wheel


def test_setup_installs_the_lock_with_hashes_torch_first():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    torch_at = setup.index("block torch requirements.lock")
    lock_at = setup.index("--require-hashes --no-deps -r requirements.lock")
    assert torch_at < lock_at < setup.index("--no-deps --no-build-isolation -e .")
    assert "cat pyproject.toml requirements.lock" in setup  # the stamp: reinstall when either changes


def test_lockfile_compares_names_across_spellings():
    text = "# via x\nRuamel.Yaml==0.19.1 \\\n    --hash=sha256:aa\n    # via y\nfoo_bar==1.0 \\\n    --hash=sha256:bb\n"
    pins = lockfile.parse_lock(text)
    assert pins == {"ruamel-yaml": "0.19.1", "foo-bar": "1.0"}
    assert lockfile.block(text, "foo_bar") == "foo_bar==1.0 \\\n    --hash=sha256:bb\n"
    have = {"ruamel-yaml": "0.19.2", "baz": "2", "metapilot": "0.1.0", "pip": "26.3"}
    assert lockfile.compare(pins, have) == {"missing": ["foo-bar"], "different": [("ruamel-yaml", "0.19.1", "0.19.2")],
                                           "extra": ["baz"]}


def test_the_upgrade_check_reads_the_failures_from_pytest_summary():
    spec = importlib.util.spec_from_file_location("upgrade_check", ROOT / "scripts" / "upgrade_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = ["....F\n", "FAILED tests/test_a.py::test_x[1 2] - AssertionError: no\n",
             "ERROR tests/test_b.py::TestC::test_d\n", "FAILED tests/test_a.py::test_x[1 2] - again\n", "1 failed\n"]
    assert mod.failed_ids(lines) == ["tests/test_a.py::test_x[1 2]", "tests/test_b.py::TestC::test_d"]


def test_the_upgrade_check_reads_the_failures_of_a_parallel_run(tmp_path):
    """upgrade-check runs the suite as scripts/test.sh does, in xdist workers: the short summary it
    reads names the same tests."""
    spec = importlib.util.spec_from_file_location("upgrade_check", ROOT / "scripts" / "upgrade_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (tmp_path / "test_a.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "@pytest.mark.parametrize('x', ['1 2'])\n"
        "def test_x(x): assert 0, 'no'\n"
        "@pytest.fixture\n"
        "def broken(): raise RuntimeError('set-up')\n"
        "class TestC:\n"
        "    def test_d(self, broken): pass\n")
    (tmp_path / "test_b.py").write_text("def test_y(): assert False\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *mod.PARALLEL, "-rfE",
                          "test_a.py", "test_b.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "2 workers" in out.stdout, out.stdout
    assert sorted(mod.failed_ids(out.stdout.splitlines(keepends=True))) == [
        "test_a.py::TestC::test_d", "test_a.py::test_x[1 2]", "test_b.py::test_y"], out.stdout
