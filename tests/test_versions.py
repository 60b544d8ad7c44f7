"""`metapilot --version` (issue 40): the project's version and those of the libraries that decide
results; the controller's model card and every `sim_runs` row keep the same versions."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import polars as pl
from metapilot.cli import app
from metapilot.ground.version import DEPENDENCIES, code_version, dependency_versions
from typer.testing import CliRunner

NAMES = ("duckdb", "polars", "prefect", "great-expectations", "d3rlpy", "torch")


def test_dependency_versions_name_what_the_issue_asks_at_their_installed_versions():
    assert DEPENDENCIES == NAMES
    assert dependency_versions() == {n: metadata.version(n) for n in NAMES}


def test_version_prints_the_project_then_python_and_each_library():
    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert lines[0] == f"metapilot {code_version()}"
    assert lines[0].startswith("metapilot 0.1.0")
    assert lines[1] == f"python {sys.version.split()[0]}"
    assert lines[2:] == [f"{n} {metadata.version(n)}" for n in NAMES]


def test_version_from_the_installed_command():
    out = subprocess.run([sys.executable, "-m", "metapilot.cli", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"torch {metadata.version('torch')}" in out.stdout.splitlines()
    assert f"great-expectations {metadata.version('great-expectations')}" in out.stdout.splitlines()


def test_the_model_card_records_the_versions():
    from metapilot.models.controller.artifact import _runtime

    runtime = _runtime()
    assert runtime["python"] == sys.version.split()[0]
    assert {n: runtime[n] for n in NAMES} == dependency_versions()


def test_a_sim_run_records_the_versions():
    from metapilot.warehouse.db import connect_memory
    from metapilot.warehouse.sim_store import store_run

    con = connect_memory()
    try:
        run_id = store_run(con, cluster="c", partition=None, window_from=None, window_to=None, policy="FCFS",
                           backfill="easy", objective_schedule=None, seed=0, wall_s=0.1, counters={},
                           overall=pl.DataFrame({"jobs": [3], "mean_wait": [1.0]}),
                           weekly=pl.DataFrame(schema={"week": pl.Utf8, "week_start": pl.Datetime}))
        code, versions = con.execute("SELECT code_version, versions FROM sim_runs WHERE run_id = ?",
                                     [run_id]).fetchone()
    finally:
        con.close()
    assert code == code_version()
    assert json.loads(versions) == {"python": sys.version.split()[0], **dependency_versions()}


def test_two_different_uncommitted_trees_have_different_code_versions(tmp_path, monkeypatch):
    """The stage caches and the walk forward's folds are keyed on the code version: a checkout with
    local changes must not share a key with other changes on the same commit, nor with the commit."""
    from metapilot.ground import version

    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    monkeypatch.setattr(version, "REPO_ROOT", tmp_path)

    def now() -> str:
        version.code_version.cache_clear()
        return version.code_version()

    clean = now()
    (tmp_path / "a.py").write_text("x = 2\n")
    first = now()
    (tmp_path / "a.py").write_text("x = 3\n")
    second = now()
    (tmp_path / "b.sql").write_text("SELECT 1\n")  # a new file git does not track yet
    third = now()
    assert "-dirty" not in clean and first.startswith(clean + "-dirty.")
    assert len({clean, first, second, third}) == 4
    (tmp_path / "b.sql").unlink()
    assert now() == second  # the same changes, the same key
    version.code_version.cache_clear()
