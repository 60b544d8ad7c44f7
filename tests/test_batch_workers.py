"""`--dask slurm[:N]` and the like without a batch system (issue 52): the forms accepted, the jobs'
settings from the environment, the TOML file beside the warehouse and the defaults, the job script
dask-jobqueue writes from them, the count held to the folds to learn, and Ctrl-C's hard exit
cancelling the jobs."""

from __future__ import annotations

import pytest

from metapilot.flows.batch_workers import (
    JOB_NAME,
    at_most,
    batch_settings,
    job_kwargs,
    jobqueue,
    parse_batch,
)


@pytest.fixture(autouse=True)
def no_site_settings(monkeypatch, tmp_path):
    for key in ("ACCOUNT", "PARTITION", "WALLTIME", "CORES", "MEMORY", "JOB_NAME", "INTERFACE", "PYTHON", "CONFIG"):
        monkeypatch.delenv(f"METAPILOT_DASK_{key}", raising=False)
    monkeypatch.setenv("METAPILOT_DB", str(tmp_path / "w.duckdb"))


def test_the_forms():
    assert parse_batch("slurm") == ("slurm", None) and parse_batch("slurm:4") == ("slurm", 4)
    assert parse_batch("PBS:2") == ("pbs", 2) and parse_batch("sge") == ("sge", None) and parse_batch("lsf:1")
    for other in (None, "", "local:2", "tcp://127.0.0.1:8786", "slurmhost:8786/x"):
        assert parse_batch(other) is None
    with pytest.raises(ValueError, match="whole number of worker jobs"):
        parse_batch("slurm:0")
    with pytest.raises(ValueError, match="whole number of worker jobs"):
        parse_batch("slurm:many")


def test_settings_environment_over_the_file_over_the_defaults(tmp_path, monkeypatch):
    assert batch_settings("slurm") == {"cores": 1, "memory": "4GiB", "walltime": "04:00:00", "job_name": JOB_NAME,
                                       "death_timeout": 60}
    (tmp_path / "dask-workers.toml").write_text('walltime = "02:00:00"\naccount = "all"\n'
                                                '[slurm]\naccount = "hpc-ops"\npartition = "batch"\ncores = 2\n'
                                                '[sge]\nmemory = "8GiB"\n')
    s = batch_settings("slurm")
    assert (s["account"], s["queue"], s["cores"], s["walltime"], s["memory"]) == ("hpc-ops", "batch", 2, "02:00:00", "4GiB")
    monkeypatch.setenv("METAPILOT_DASK_PARTITION", "short")
    monkeypatch.setenv("METAPILOT_DASK_CORES", "4")
    s = batch_settings("slurm")
    assert s["queue"] == "short" and s["cores"] == 4
    sge = batch_settings("sge")
    assert sge["project"] == "all" and "account" not in sge and sge["memory"] == "8GiB"  # SGE calls it a project
    (tmp_path / "dask-workers.toml").write_text("account = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        batch_settings("slurm")


def test_the_job_script_carries_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("METAPILOT_DASK_ACCOUNT", "hpc-ops")
    monkeypatch.setenv("METAPILOT_DASK_PARTITION", "batch")
    monkeypatch.setenv("METAPILOT_DASK_WALLTIME", "01:30:00")
    monkeypatch.setenv("METAPILOT_DASK_CORES", "2")
    kw = job_kwargs("slurm", 3, batch_settings("slurm"), tmp_path / "logs")
    assert kw["n_workers"] == 3 and kw["processes"] == 1
    kw["n_workers"] = 0  # submit nothing: only the script is read
    with jobqueue().SLURMCluster(**kw) as cluster:
        script = cluster.job_script()
    for line in ("#SBATCH -J metapilot-dask", "#SBATCH -A hpc-ops", "#SBATCH -p batch", "#SBATCH -t 01:30:00",
                 "#SBATCH --cpus-per-task=2", "export METAPILOT_WORKERS=2", f"#SBATCH -e {tmp_path / 'logs'}/"):
        assert line in script, script


def test_no_more_jobs_than_folds_to_learn():
    assert at_most("slurm:8", 3) == "slurm:3" and at_most("slurm:2", 5) == "slurm:2"
    assert at_most("pbs", 2) == "pbs:2" and at_most("pbs", 9) == "pbs:4"  # the default, 4


def test_a_hard_exit_after_ctrl_c_cancels_the_jobs(monkeypatch):
    """What runs when the command ends itself (a second Ctrl-C, or the grace after the first)."""
    from metapilot.flows import batch_workers
    from metapilot.ground import interrupt

    ran: list = []

    class Job:
        job_id = "4242"

    class Cluster:
        workers = {"w": Job()}

        class job_cls:
            cancel_command = "scancel"

    monkeypatch.setattr(batch_workers.subprocess, "run", lambda args, **kw: ran.append(args))
    forget = batch_workers._cancel_on_hard_exit(Cluster())
    monkeypatch.setattr(interrupt, "end_children", lambda **kw: None)
    monkeypatch.setattr(interrupt, "_remove_process_folder", lambda: None)  # this process's pools go on
    monkeypatch.setattr(interrupt.os, "_exit", lambda code: ran.append(code))
    interrupt._exit_now("test", set())
    assert ran == [["scancel", "4242"], 130]
    forget()
    assert not interrupt._LAST_WORDS


def test_the_walk_forward_asks_for_no_more_jobs_than_folds_to_learn(monkeypatch):
    from datetime import datetime, timezone

    from metapilot.flows import backtest

    t = [datetime(2024, m, 1, tzinfo=timezone.utc) for m in (1, 2, 3)]
    monkeypatch.delenv("METAPILOT_DASK_ADDRESS", raising=False)
    monkeypatch.setattr(backtest, "new_folds", lambda *a: [])
    assert backtest.fold_runner("slurm:4", None, "C", t, 50, False) is None  # every fold reused: no job at all
    monkeypatch.setattr(backtest, "new_folds", lambda *a: t[-1:])
    assert backtest.fold_runner("slurm:4", None, "C", t, 50, False) == "slurm:1"  # the monthly run: one
    monkeypatch.setenv("METAPILOT_DASK_ADDRESS", "sge")
    assert backtest.fold_runner(None, None, "C", t, 50, False) == "sge:1"
    assert backtest.fold_runner("tcp://10.0.0.1:8786", None, "C", t, 50, False) == "tcp://10.0.0.1:8786"


def test_collect_leaves_out_jobs_by_name_prefix(tmp_path, monkeypatch):
    import gzip

    from metapilot.transforms.sacct import XDMOD_FIELDS
    from metapilot.warehouse.collect import drop_job_names, exclude_job_names

    def line(job: str, name: str) -> bytes:
        return ("|".join([job] + ["x"] * (len(XDMOD_FIELDS) - 2) + [name]) + "\n").encode()

    path = tmp_path / "sacct.gz"
    with gzip.open(path, "wb") as f:
        f.write(line("1", "metapilot-dask") + line("2", "train|metapilot-dask") + line("3", "metapilot-dask-7")
                + line("4", "vasp"))
    monkeypatch.setenv("METAPILOT_COLLECT_EXCLUDE_JOB_NAMES", " metapilot-dask , ")
    assert exclude_job_names() == ["metapilot-dask"] and exclude_job_names(["a"]) == ["a"]
    assert drop_job_names(path, exclude_job_names()) == 2
    kept = [ln.split(b"|")[0] for ln in gzip.open(path).read().splitlines()]
    assert kept == [b"2", b"4"]  # a name holding "|" is read whole
    assert drop_job_names(path, []) == 0
