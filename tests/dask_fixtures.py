"""A real Dask cluster of separate processes (`scripts/dask-cluster.sh`: a scheduler and two workers
on localhost, stopped by pid) and what the walk-forward tests over it share (issue 52)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "dask-cluster.sh"
HPC2N = SHARED_DATA / "swf" / "HPC2N-subset-3170jobs.swf"
CLUSTER = "HPC2N-subset-3170jobs"
STEPS = "50"
VARYING = ("backtest_id", "folds")  # what differs between two runs of the same walk forward: ids and paths


@dataclass(frozen=True)
class DaskCluster:
    address: str
    folder: Path

    def pids(self) -> dict[str, int]:
        """worker name -> pid, as the script wrote them."""
        return {p.stem: int(p.read_text()) for p in self.folder.glob("worker-*.pid")}

    def log(self, worker: str) -> str:
        return (self.folder / f"{worker}.log").read_text(errors="replace")


def start_dask_cluster(workers: int = 2) -> DaskCluster:
    res = subprocess.run(["bash", str(SCRIPT), "start", str(workers)], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    env = dict(line[len("export "):].split("=", 1) for line in res.stdout.splitlines())
    return DaskCluster(env["METAPILOT_DASK_ADDRESS"], Path(env["METAPILOT_DASK_DIR"]))


def stop_dask_cluster(cluster: DaskCluster) -> None:
    """Stop the cluster and, once it has stopped, remove its folder (the script keeps it, and its logs)."""
    res = subprocess.run(["bash", str(SCRIPT), "stop", str(cluster.folder)], capture_output=True, text=True, timeout=120)
    if res.returncode == 0:
        shutil.rmtree(cluster.folder, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def one_code_version():
    """Folds are keyed by the code version (`git describe --dirty`), held still while a module runs (imported
    by the modules that walk forward, it applies to each of them)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("metapilot.ground.version.code_version", lambda: "test-version")
        yield


@pytest.fixture(scope="module")
def dask_cluster():
    cluster = start_dask_cluster(2)
    try:
        yield cluster
    finally:
        stop_dask_cluster(cluster)


def ingest(folder: Path) -> str:
    from metapilot.cli import app

    db = str(folder / "w.duckdb")
    r = CliRunner().invoke(app, ["ingest", str(HPC2N), "--db", db])
    assert r.exit_code == 0, r.output
    return db


def walk_forward(folder: Path, *extra: str) -> dict:
    """`metapilot backtest` on HPC2N's subset (one origin), in a warehouse of its own; the JSON."""
    from metapilot.cli import app

    db = ingest(folder)
    out = folder / "bt.json"
    r = CliRunner().invoke(app, ["backtest", "--db", db, "--steps", STEPS, "--json", str(out), *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def figures(doc: dict) -> dict:
    """The walk forward's result without what names the run (ids, paths): every contender's figures,
    every period's decision and its reason, the bar and the next decision."""
    out = {k: v for k, v in doc.items() if k not in VARYING}
    if out.get("next"):
        out["next"] = {k: v for k, v in out["next"].items() if k not in VARYING}
    return out


@pytest.fixture(scope="session")
def local_result(tmp_path_factory) -> dict:
    """The same walk forward on this machine alone: what every other route must equal (once a
    session; the modules that use it hold the code version still, to the same value)."""
    old = os.environ.pop("METAPILOT_DASK_ADDRESS", None)
    try:
        return walk_forward(tmp_path_factory.mktemp("local"))
    finally:
        if old is not None:
            os.environ["METAPILOT_DASK_ADDRESS"] = old
