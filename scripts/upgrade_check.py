"""The driver of scripts/upgrade-check.sh (standard library only). See that script."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import lockfile  # noqa: E402

# The one test that pins the environment to the lock: of course it differs here.
DESELECT = "tests/test_lock.py::test_the_environment_holds_exactly_the_locked_versions"
# The suite's parallelism, as scripts/test.sh runs it (pytest-xdist, the dev extra; the scheduling is
# tests/conftest.py's). Its short summary (-rfE) has the same FAILED/ERROR lines as a single process.
PARALLEL = ["-n", "2", "--dist", "loadfile"]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, text=True, **kw)


def pip(py: str, *args: str) -> None:
    out = sh([py, "-m", "pip", "install", "--quiet", "--no-compile", *args], capture_output=True)
    if out.returncode:
        sys.stderr.write(out.stdout + out.stderr)
        raise SystemExit(f"pip install {' '.join(args)} failed")


def installed(py: str) -> dict[str, str]:
    code = "import json, sys; sys.path.insert(0, 'scripts'); import lockfile; print(json.dumps(lockfile.installed()))"
    import json

    return json.loads(sh([py, "-c", code], capture_output=True, check=True).stdout)


def direct_names() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"]) + [r for v in project.get("optional-dependencies", {}).values() for r in v]
    return {lockfile.canonical(re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0]) for r in reqs}


def failed_ids(lines) -> list[str]:
    """The node ids in pytest's short summary (-rfE): `FAILED tests/x.py::test_y - message`, `ERROR ...`."""
    out = []
    for line in lines:
        m = re.match(r"^(?:FAILED|ERROR) (\S+?(?:\[.*?\])?)(?: - .*)?$", line.rstrip("\n"))
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def run_tests(py: str, args: list[str]) -> list[str]:
    """Run pytest (its output shown as it comes); the node ids of the tests that failed or errored."""
    proc = subprocess.Popen([py, "-m", "pytest", "-p", "no:cacheprovider", *PARALLEL, "--durations=25", "-rfE",
                             "--deselect", DESELECT, *args],
                            cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    failed = failed_ids(lines)
    if proc.wait() not in (0, 1) and not failed:  # interrupted, usage error, no tests, crash
        failed.append(f"(pytest exited {proc.returncode})")
    return failed


def main(argv: list[str]) -> int:
    keep = "--keep" in argv
    pytest_args = [a for a in argv if a != "--keep"] or ["tests"]
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="metapilot-upgrade-"))
    venv = work / "venv"
    py = str(venv / "bin" / "python")
    lock = lockfile.parse_lock(Path(os.environ.get("METAPILOT_LOCK", ROOT / "requirements.lock")).read_text())
    pip_version = re.search(r"^PIP_VERSION=(\S+)", (ROOT / "scripts/setup.sh").read_text(), re.M).group(1)
    try:
        sh([sys.executable, "-m", "venv", str(venv)], check=True)
        pip(py, f"pip=={pip_version}")
        # torch first, held at the CPU build on this disk; then the newest releases the ranges allow
        pip(py, "-c", "scripts/torch-cpu.txt", "torch")
        pip(py, "-c", "scripts/torch-cpu.txt", "--upgrade", "--upgrade-strategy", "eager", "-e", ".[dev]")
        t_install = time.monotonic() - t0
        newest = installed(py)
        diff = lockfile.compare(lock, newest)
        changed = [(n, old, new) for n, old, new in diff["different"]]
        direct = direct_names()
        changed.sort(key=lambda c: (c[0] not in direct, c[0]))
        print(f"\n== newest releases allowed by pyproject.toml (installed in {t_install:.0f} s) vs requirements.lock ==")
        if not (changed or diff["extra"] or diff["missing"]):
            print(f"   all {len(lock)} packages at their locked versions")
        for n, old, new in changed:
            print(f"   {n:28s} {old:>14s} -> {new}{'   (direct)' if n in direct else ''}")
        for n in diff["extra"]:
            print(f"   {n:28s} {'(new)':>14s} -> {newest[n]}")
        for n in diff["missing"]:
            print(f"   {n:28s} {lock[n]:>14s} -> (no longer needed)")

        print("\n== tests on the newest releases ==", flush=True)
        t1 = time.monotonic()
        failed = run_tests(py, pytest_args)
        tests_s = time.monotonic() - t1
        if not failed:
            print(f"\nRESULT: the newest releases pass ({tests_s:.0f} s of tests, {time.monotonic() - t0:.0f} s in all); "
                  f"{len(changed) + len(diff['extra'])} package(s) would move. "
                  "Move the lock: bash scripts/lock.sh --upgrade")
            return 0

        print(f"\n== {len(failed)} test(s) failed; which package broke them ==", flush=True)
        (work / "newest-freeze.txt").write_text("".join(f"{n}=={v}\n" for n, v in newest.items() if n != "metapilot"))
        blame: dict[str, list[str]] = {}
        budget = float(os.environ.get("METAPILOT_UPGRADE_BUDGET_S", 840))
        tests = [t for t in failed if "::" in t]
        untried = []
        for n, old, new in changed:
            if time.monotonic() - t0 > budget or not tests:
                untried.append(f"{n} {old} -> {new}")
                continue
            pip(py, "-c", "scripts/torch-cpu.txt", f"{n}=={old}")
            still = run_tests(py, tests)
            fixed = [t for t in failed if t not in still]
            if fixed:
                blame[f"{n} {old} -> {new}"] = fixed
            pip(py, "-c", "scripts/torch-cpu.txt", "-r", str(work / "newest-freeze.txt"))
        print("\nRESULT: the newest releases fail")
        explained = set()
        for what, tests in blame.items():
            print(f"   {what} broke (passes again at the locked version):")
            for t in tests:
                print(f"      {t}")
            explained.update(tests)
        rest = [t for t in failed if t not in explained]
        if rest and not changed:
            print("   no package moved from the lock, so these fail at the locked versions too (the code, the machine, or flaky):")
            for t in rest:
                print(f"      {t}")
        elif rest:
            print("   not fixed by putting back any one package (several together, or flaky):")
            for t in rest:
                print(f"      {t}")
        if untried:
            print(f"   not tried (past METAPILOT_UPGRADE_BUDGET_S={budget:.0f} s): {', '.join(untried)}")
        print(f"   ({time.monotonic() - t0:.0f} s in all). Keep the lock, or move the packages that pass: "
              "bash scripts/lock.sh --upgrade-package NAME")
        return 1
    finally:
        if keep:
            print(f"venv kept: {venv}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
