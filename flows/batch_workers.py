"""Dask workers as the site's own batch jobs (issue 52): `--dask slurm[:N]` (or `pbs`, `sge`, `lsf`)
starts a Dask scheduler in this process and N workers as jobs through dask-jobqueue, so a walk
forward's folds, a sweep's replays or a training's seeds leave the one machine for the cluster
the site already runs, under its own accounting.

The jobs' settings, first found wins: `METAPILOT_DASK_<KEY>` in the environment (ACCOUNT,
PARTITION, WALLTIME, CORES, MEMORY, JOB_NAME, INTERFACE, PYTHON), then the `[slurm]` (`[pbs]`, ...)
table of a TOML file (`METAPILOT_DASK_CONFIG`, else `dask-workers.toml` beside the warehouse),
then MetaPilot's defaults below, then dask-jobqueue's own configuration (`~/.config/dask/jobqueue.yaml`)
for everything else. Every job is named `metapilot-dask` (so a site can leave MetaPilot's own work
out of what it learns: `ingest --exclude-job-name`), writes its log beside the warehouse
(`dask-workers/`), and is cancelled when the flow ends, fails or is interrupted: the cluster's
close cancels them, a hard exit after Ctrl-C cancels them (`ground.interrupt.at_hard_exit`), and a
worker whose scheduler is gone for `death_timeout` seconds ends its job itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

KINDS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster"}
ACCOUNT_KEY = {"slurm": "account", "pbs": "account", "sge": "project", "lsf": "project"}
JOB_NAME = "metapilot-dask"
DEFAULT_JOBS = 4
CONFIG_FILE = "dask-workers.toml"
# A fold keeps about one core busy (its training runs on one thread), so one core a job by default.
DEFAULTS: dict[str, Any] = {"cores": 1, "memory": "4GiB", "walltime": "04:00:00", "job_name": JOB_NAME,
                            "death_timeout": 60}
ENV_KEYS = ("account", "partition", "walltime", "cores", "memory", "job_name", "interface", "python")


def parse_batch(address: str | None) -> tuple[str, int | None] | None:
    """(kind, jobs) for `slurm`, `slurm:4`, ...; None for any other address. A malformed count is
    a ValueError that names the form."""
    if not address:
        return None
    kind, _, n = address.partition(":")
    if kind.lower() not in KINDS or "//" in address:
        return None
    if not n:
        return kind.lower(), None
    if not n.isdigit() or int(n) < 1:
        raise ValueError(f"--dask {address!r}: give {kind}:N with N a whole number of worker jobs, 1 or more")
    return kind.lower(), int(n)


def config_path(db: str | None = None) -> Path:
    """`METAPILOT_DASK_CONFIG`, else `dask-workers.toml` beside the warehouse."""
    from metapilot.ground.paths import db_path

    env = os.environ.get("METAPILOT_DASK_CONFIG")
    return Path(env).expanduser() if env else db_path(db).resolve().parent / CONFIG_FILE


def batch_settings(kind: str, db: str | None = None) -> dict[str, Any]:
    """The jobs' settings (see the module docstring), as dask-jobqueue's keyword arguments."""
    path = config_path(db)
    table: dict[str, Any] = {}
    if path.is_file():
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: not valid TOML ({e})") from None
        table = {k: v for k, v in doc.items() if not isinstance(v, dict)} | dict(doc.get(kind, {}))
    out = {**DEFAULTS, **{k.replace("-", "_"): v for k, v in table.items()}}
    for key in ENV_KEYS:
        raw = os.environ.get(f"METAPILOT_DASK_{key.upper()}")
        if raw:
            out[key] = raw
    out["cores"] = int(out["cores"])
    if "partition" in out:
        out["queue"] = out.pop("partition")
    if "account" in out and ACCOUNT_KEY[kind] != "account":
        out[ACCOUNT_KEY[kind]] = out.pop("account")
    return out


def job_kwargs(kind: str, jobs: int, settings: dict[str, Any], log_dir: Path) -> dict[str, Any]:
    """The cluster class's keyword arguments: one worker process a job, its pools given the job's cores."""
    kw = {k: v for k, v in settings.items() if k not in ("jobs",)}
    prologue = list(kw.pop("job_script_prologue", []))
    prologue.append(f"export METAPILOT_WORKERS={kw['cores']}")
    kw.update(processes=1, n_workers=jobs, job_script_prologue=prologue, log_directory=str(log_dir),
              python=kw.get("python") or sys.executable)
    kw.setdefault("worker_extra_args", ["--no-dashboard"])
    kw.setdefault("scheduler_options", {"dashboard": False, "dashboard_address": ":0"})  # no fixed port on the login node
    return kw


def jobqueue():
    """dask_jobqueue, imported without its import-time `signal.signal(SIGINT, sys.exit)` (0.9's
    runner.py): that would replace the command's Ctrl-C handler (`ground.interrupt`), and it fails
    outright outside the main thread."""
    if "dask_jobqueue" in sys.modules:
        return sys.modules["dask_jobqueue"]
    import signal

    real = signal.signal
    signal.signal = lambda signum, handler: signal.getsignal(signum)  # noqa: E731 - for the import only
    try:
        import dask_jobqueue
    finally:
        signal.signal = real
    return dask_jobqueue


def start_batch_cluster(kind: str, **kwargs: Any):
    """The dask-jobqueue cluster, its jobs cancelled by a hard exit too (`ground.interrupt`)."""
    cluster = getattr(jobqueue(), KINDS[kind])(**kwargs)
    forget = _cancel_on_hard_exit(cluster)
    close = cluster.close

    def close_and_forget(*args, **kw):
        try:
            return close(*args, **kw)
        finally:
            forget()

    cluster.close = close_and_forget
    return cluster


def _cancel_on_hard_exit(cluster) -> Callable[[], None]:
    from metapilot.ground.interrupt import at_hard_exit

    def cancel() -> None:
        ids = job_ids(cluster)
        if ids:
            subprocess.run([*cluster.job_cls.cancel_command.split(), *ids], capture_output=True, timeout=30,
                           check=False)

    return at_hard_exit(cancel)


def job_ids(cluster) -> list[str]:
    """The batch job ids the cluster has submitted and not yet closed."""
    return [str(w.job_id) for w in list(getattr(cluster, "workers", {}).values()) if getattr(w, "job_id", None)]


def batch_runner(address: str, db: str | None = None):
    """A DaskTaskRunner whose workers are batch jobs (`slurm[:N]`, ...); the jobs start with the flow
    and are cancelled when it ends."""
    from prefect_dask import DaskTaskRunner

    from metapilot.ground.paths import beside_db

    kind, _ = parse_batch(address)
    settings = batch_settings(kind, db)
    jobs = wanted_jobs(address, db)
    settings.pop("jobs", None)
    log_dir = beside_db(db, "dask-workers")
    log_dir.mkdir(parents=True, exist_ok=True)
    kwargs = job_kwargs(kind, jobs, settings, log_dir)
    return DaskTaskRunner(cluster_class=_FACTORIES[kind], cluster_kwargs=kwargs)


def _slurm(**kw):
    return start_batch_cluster("slurm", **kw)


def _pbs(**kw):
    return start_batch_cluster("pbs", **kw)


def _sge(**kw):
    return start_batch_cluster("sge", **kw)


def _lsf(**kw):
    return start_batch_cluster("lsf", **kw)


_FACTORIES = {"slurm": _slurm, "pbs": _pbs, "sge": _sge, "lsf": _lsf}


def wanted_jobs(address: str, db: str | None = None) -> int:
    """N of `slurm:N`, else `jobs` from the settings, else DEFAULT_JOBS."""
    kind, n = parse_batch(address)
    return n or int(batch_settings(kind, db).get("jobs", DEFAULT_JOBS))


def at_most(address: str, jobs: int, db: str | None = None) -> str:
    """`slurm:N` with N at most `jobs`: no idle job queued for a fold an earlier run learned."""
    kind, _ = parse_batch(address)
    return f"{kind}:{min(wanted_jobs(address, db), jobs)}"
