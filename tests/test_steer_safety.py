"""The steering loop against the cluster's own users (issue 49), on a stand-in Slurm
(tests/steer_standin.py) and on crafted answers: a job name that is not UTF-8, a mistyped --db,
bounded options, the clean exit of --once, who approves, the publish order, the cluster checked,
a batch that fails part-way, and the live tail guard counted from eligibility."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from steer_standin import job, make_bin
from typer.testing import CliRunner

from metapilot.cli.app import app
from metapilot.models.steering.decision import named_rule
from metapilot.models.steering.loop import SteerOptions, Steerer, warehouse_connector
from metapilot.models.steering.slurm_cli import SlurmCli

NOW = time.time()
META = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}


@pytest.fixture
def standin(tmp_path):
    state = tmp_path / "slurm-state.json"
    jobs = [job(i, limit_min=m, submit=int(NOW) - 600 + i) for i, m in ((1, 9), (2, 3), (3, 7), (4, 5))]
    state.write_text(json.dumps({"jobs": jobs, "mode": "ok"}))
    return state, make_bin(tmp_path / "bin", state), str(tmp_path / "w.duckdb")


def _set(state: Path) -> dict:
    return json.loads(state.read_text()).get("site_factors", {})


def _raw_squeue(bin_dir: Path, answer: bytes) -> None:
    """Replace the stand-in's squeue by one that answers these exact bytes."""
    (bin_dir / "squeue.bytes").write_bytes(answer)
    exe = bin_dir / "squeue"
    exe.write_text(f"#!/bin/sh\ncat '{bin_dir / 'squeue.bytes'}'\n")
    exe.chmod(0o755)


def _squeue_bytes(jobs: list[dict], name: bytes) -> bytes:
    """squeue --json as Slurm writes it for a job named with raw bytes: the name passed through
    unescaped (`sbatch -J $'bad\\xff\\xfe'`)."""
    jobs = [{**j, "name": "@NAME@", "comment": "@NAME@", "standard_output": "/home/u/@NAME@.out"} for j in jobs]
    return json.dumps({"meta": META, "errors": [], "jobs": jobs}).encode().replace(b"@NAME@", name)


# --- item 1: one job name stops steering -----------------------------------------------------


@pytest.mark.parametrize("name", [b"bad\xff\xfe", b"caf\xe9", b"tab\tand\x01ctl", b"\xc3"])
def test_a_job_name_that_is_not_utf8_does_not_stop_steering(standin, name):
    state, bin_dir, db = standin
    _raw_squeue(bin_dir, _squeue_bytes(json.loads(state.read_text())["jobs"], name))
    s = Steerer(SlurmCli(bin_dir=str(bin_dir)), warehouse_connector(db), named_rule("SJF+EASY"),
                SteerOptions("mini", step=10))
    s.start()
    out = s.cycle()
    assert out.row["status"] == "ok", out.line
    assert _set(state) == {"2": 30, "4": 20, "3": 10}


def test_every_mode_reads_a_non_utf8_answer(standin):
    state, bin_dir, db = standin
    _raw_squeue(bin_dir, _squeue_bytes(json.loads(state.read_text())["jobs"], b"\xff\xfe"))
    base = ["steer", "--cluster", "mini", "--slurm", "--policy", "SJF+EASY", "--slurm-bin", str(bin_dir), "--db", db,
            "--step", "10"]
    for extra in (["--dry-run", "--once"], ["--once"], ["--release"]):
        res = CliRunner().invoke(app, [*base, *extra])
        assert res.exit_code == 0, (extra, res.output)
        assert "UnicodeDecodeError" not in res.output


def test_slurm_messages_that_are_not_utf8_are_still_reported(tmp_path):
    from metapilot.models.steering.slurm_cli import SlurmUnreachable

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "squeue"
    exe.write_bytes(b"#!/bin/sh\nprintf 'squeue: error: job \\377 invalid\\n' >&2\nexit 1\n")
    exe.chmod(0o755)
    with pytest.raises(SlurmUnreachable, match="invalid"):
        SlurmCli(bin_dir=str(bin_dir)).squeue_json()
