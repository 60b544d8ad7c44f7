"""The wheel is a working install (issue 33): built with `pip wheel --no-deps`, installed into a
fresh venv (reusing this venv's dependencies, no network), and run from another folder, the
installed `metapilot` ingests a log, simulates, trains and reports. The SQL files, the expectation
suite and the bundled samples are package data found through importlib.resources, not the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = (".gitignore", "pyproject.toml", "README.md", "metapilot", "transforms", "warehouse", "models", "flows", "sql", "samples")
RUNTIME = ("policies", "reports", "landing", "data_docs", ".prefect-results", "collect", "metapilot.duckdb",
           "metapilot.duckdb.wal", "metapilot.duckdb.writer.lock", "secret.key", "clusters.toml", "roi.toml")
KTH = REPO / "samples" / "logs" / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv holding only the wheel; its dependencies come from this venv through a .pth file."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy: the build writes build/ and egg-info beside the sources
    src.mkdir()
    def ignore(folder: str, names: list[str]) -> set[str]:  # caches, and what runs left in warehouse/
        runtime = set(RUNTIME) if Path(folder).resolve() == REPO / "warehouse" else set()
        return {n for n in names if n in runtime or n == "__pycache__" or n.endswith((".pyc", ".egg-info"))}

    for name in SOURCES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(REPO / name, src / name, **(
            {"ignore": ignore} if (REPO / name).is_dir() else {}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "sources"]):
        subprocess.run([*git, *args], cwd=src, check=True, capture_output=True, timeout=60)
    pip = [sys.executable, "-m", "pip"]
    # the README's operator install, run in the checkout: `pip wheel --no-deps -w dist .`
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", "dist", "."],
                   cwd=src, check=True, capture_output=True, timeout=300)
    wheel, = (src / "dist").glob("metapilot-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "metapilot_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([*pip, "--python", str(py), "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    return venv


def test_building_the_wheel_leaves_the_checkout_clean(installed):
    """build/, dist/ and the egg-info are ignored: a later `git add -A` does not commit them (issue 54, item 3)."""
    src = installed.parent / "src"
    assert (src / "build").is_dir() and (src / "dist").is_dir()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=src, check=True,
                            capture_output=True, text=True, timeout=60).stdout
    assert status == "", status


def test_the_wheel_holds_what_the_commands_read(installed):
    wheel, = (installed.parent / "src" / "dist").glob("metapilot-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sql = {f"metapilot/sql/{p.relative_to(REPO / 'sql').as_posix()}" for p in (REPO / "sql").rglob("*.sql")}
    assert sql and sql <= names, sorted(sql - names)[:5]
    assert "metapilot/warehouse/expectations/jobs.json" in names
    samples = {f"metapilot/samples/{p.relative_to(REPO / 'samples').as_posix()}"
               for p in (REPO / "samples" / "logs").rglob("*") if p.is_file()}
    assert samples and samples <= names


def test_installed_command_ingests_simulates_trains_and_reports_from_another_folder(installed, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("METAPILOT_", "PYTHON")) and k != "PREFECT_API_URL"}
    exe = str(installed / "bin" / "metapilot")

    def run(*args: str) -> str:
        p = subprocess.run([exe, *args, "--db", "w.duckdb"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, f"metapilot {' '.join(args)}:\n{p.stdout}\n{p.stderr}"
        return p.stdout + p.stderr

    where = subprocess.run([str(installed / "bin" / "python"), "-c",
                            "from metapilot.ground.paths import SQL_DIR, expectations_file\n"
                            "from metapilot.cli.commands.pipeline import _bundled_samples\n"
                            "print(SQL_DIR); print(expectations_file()); print(_bundled_samples())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(w).exists() and Path(w).is_relative_to(installed) for w in where), where

    out = run("ingest", str(KTH))
    assert "loaded" in out
    out = run("simulate", "--cluster", "KTH-SP2", "--policy", "FCFS", "--backfill", "easy",
              "--from", "1996-10-01", "--to", "1996-10-15")
    out = run("train", "--cluster", "KTH-SP2", "--train-from", "1996-10-15T00:00:00", "--train-to", "1996-10-18T00:00:00",
              "--steps", "50", "--fqe-steps", "10", "--baselines", "", "--no-progress", "--sources", "as-run")
    out = run("report", "--cluster", "KTH-SP2", "--week", "1996-W44")
    assert (tmp_path / "reports" / "KTH-SP2" / "1996-W44" / "report.html").exists(), out
