"""The walk forward as a flow: at each origin, the learning stages of `pipeline` on the past only,
then every fold's decision followed over the span and judged (`models.evaluation.backtest`).

Each fold learns in its own warehouse, holding only the jobs submitted before its origin
(`warehouse.fold_store`): it cannot see the future by construction, folds run in parallel without
waiting on one another's locks, and their policies and held-out replays never mix with the
operator's (the weekly report reads those). The fold warehouses stay under
`backtests/folds/<cluster>/` beside the warehouse, named by what they learned from (the origin, the
past's fingerprint, the training steps, the code version): the next walk forward (the monthly
deployment) reuses every fold whose past has not changed and learns only the new ones. Folds no
longer used are removed; `relearn` learns every fold again.

A fold whose learning fails is recorded with its reason and followed by the guarded leader; the
other folds are still learned and reported. Nothing is stored in the operator's warehouse until the
whole comparison is ready, and then in one transaction."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from metapilot.flows.pipeline import choose_cluster, learn_flow
from metapilot.flows.common import warehouse_writer
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NONE

if TYPE_CHECKING:
    from metapilot.models.evaluation.walk_forward_result import WalkForwardResult
    from metapilot.models.simulator.slurm.conf import SlurmConf


def plan_origins(db: str | None, cluster: str | None, every_weeks: int, warmup_weeks: int | None,
                 start: datetime | None, end: datetime | None) -> tuple[str, datetime, list[datetime], list[datetime], datetime]:
    """The cluster, its first submit, the weeks with jobs, the origins and the span's end."""
    from metapilot.transforms.windows import walk_forward_origins

    cluster, first, last, busy = choose_cluster(db, cluster)
    span_end = last + timedelta(seconds=1)
    if end is not None:
        span_end = min(span_end, end)
    origins = walk_forward_origins(busy, span_end, every_weeks, warmup_weeks, start, end)
    return cluster, first, busy, origins, span_end


def site_conf(current_conf: str | None, current_qos: dict[str, int] | None = None,
              complete_s: float = 0.0, current_shares: str | None = None, con=None, cluster: str = "",
              db: str | None = None) -> SlurmConf | None:
    """The site's Slurm as the walk forward replays it (a `SlurmConf`; None without `--current-conf`): its
    slurm.conf, the QOS priorities and the association tree's shares slurmdbd keeps (the tree named as the
    warehouse `con` names the cluster's jobs), the completing time the site measured."""
    from metapilot.models.simulator.slurm import read_shares, read_slurm_conf, site_shares
    from metapilot.warehouse.secret import readable_key

    if not current_conf:
        return None
    conf = read_slurm_conf(current_conf, current_qos).with_sched(complete_s=complete_s)
    if con is None:  # names as the tree gives them
        return conf.with_shares(read_shares(current_shares)) if current_shares else conf
    return conf.with_shares(site_shares(current_shares, con, cluster, readable_key(db)))


def past_windows_of(db: str | None, cluster: str, origins: list[datetime], current: str,
                    current_conf: str | None = None, current_qos: dict[str, int] | None = None,
                    current_complete_s: float = 0.0, current_shares: str | None = None) -> list:
    """The jobs before each origin (`backtest.past_windows`), read before any fold opens the warehouse."""
    from metapilot.models.evaluation.backtest import past_windows
    from metapilot.warehouse.db import connect

    con = connect(db, read_only=True)
    try:
        conf = site_conf(current_conf, current_qos, current_complete_s, current_shares, con, cluster, db)
        return past_windows(con, cluster, origins, current, conf)
    finally:
        con.close()


@task(name="walk-forward-judge", cache_policy=NONE)
def judge_task(db: str | None, cluster: str, folds: list, span_end: datetime, current: str, planner: bool,
               backtest_id: str, choices: list | None = None, current_conf: str | None = None,
               current_qos: dict[str, int] | None = None, current_complete_s: float = 0.0,
               current_shares: str | None = None) -> WalkForwardResult:
    from metapilot.models.evaluation.backtest import run_backtest
    from metapilot.warehouse.db import connect

    log = get_run_logger()
    with warehouse_writer(db, log=log.info):
        con = connect(db)
        try:
            conf = site_conf(current_conf, current_qos, current_complete_s, current_shares, con, cluster, db)
            return run_backtest(con, cluster, folds, span_end, current=current, planner=planner, log=log.info,
                                backtest_id=backtest_id, choices=choices, current_conf=conf)
        finally:
            con.close()


def fold_root(db: str | None, cluster: str) -> Path:
    """Where a cluster's fold warehouses live, beside the operator's warehouse."""
    from metapilot.ground.files import safe_name
    from metapilot.ground.paths import db_path

    return db_path(db).parent / "backtests" / "folds" / safe_name(cluster)


def fold_home(db: str | None, cluster: str, origin: datetime, steps: int) -> Path:
    """The folder of one fold, named by everything its learning depends on."""
    from metapilot.ground.version import code_version
    from metapilot.warehouse.fold_store import fold_fingerprint

    key = f"{cluster}|{origin.isoformat()}|{fold_fingerprint(db, cluster, origin)}|{steps}|{code_version()}"
    return fold_root(db, cluster) / f"{origin:%Y-%m-%d}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def learn_fold(db: str | None, cluster: str, first: datetime, busy: list[datetime], origin: datetime,
               steps: int, relearn: bool = False) -> "Fold":
    """The learning stages of `pipeline`, in a warehouse of their own that holds only the jobs
    submitted before `origin`, or what an earlier walk forward learned from the same past; a
    failure is the fold's verdict, with its reason, never the walk forward's end."""
    from metapilot.models.evaluation.backtest import Fold
    from metapilot.transforms.windows import split_history
    from metapilot.warehouse.fold_store import make_fold_warehouse

    log = get_run_logger()
    home = fold_home(db, cluster, origin, steps)
    record, fold_db = home / "fold.json", str(home / "warehouse.duckdb")
    if record.exists() and not relearn:
        fold, damage = reusable_fold(home)
        if damage is None:
            log.info("fold at %s: its past has not changed since it was learned: reused (%s)", origin.date(), home)
            return fold
        log.warning("fold at %s: the fold learned earlier is damaged (%s): learned again (%s)", origin.date(), damage,
                    home)
    shutil.rmtree(home, ignore_errors=True)
    try:
        windows = split_history(first, origin, busy_weeks=[w for w in busy if w < origin])
        make_fold_warehouse(db, cluster, origin, fold_db)
        learned = learn_flow(cluster, windows, db=fold_db, steps=steps, dask=None, publish=False)
        decision = learned["published"]
        fold = Fold(origin, learned["policy_id"], decision["kind"], decision["message"], fold_db)
    except Exception as e:  # noqa: BLE001 - one fold's failure is reported, the others still run
        log.warning("fold at %s: learning failed: %s: %s", origin.date(), type(e).__name__, e)
        return Fold(origin, None, "failed", f"learning failed: {type(e).__name__}: {e}", fold_db)
    record.write_text(json.dumps(fold.to_dict()) + "\n")  # last: a fold without it is learned again
    return fold


def reusable_fold(home: Path) -> tuple["Fold | None", str | None]:
    """(the fold learned earlier in `home`, None) when it can be used as it is, else (None, what is
    damaged): checked before any learning, since a fold's warehouse is only opened after all of it
    (a damaged one, with its record intact, failed the whole walk forward at the end)."""
    from metapilot.models.evaluation.backtest import Fold
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.policy_store import policy_row

    record, fold_db = home / "fold.json", home / "warehouse.duckdb"
    try:
        fold = Fold.from_dict(json.loads(record.read_text()), str(fold_db))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return None, f"its fold.json cannot be read ({type(e).__name__})"
    if not fold_db.is_file():
        return None, "its warehouse.duckdb is missing"
    try:
        con = connect(str(fold_db), read_only=True)
    except Exception as e:  # noqa: BLE001 - whatever DuckDB says of a damaged file, the fold is learned again
        return None, f"its warehouse cannot be opened ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    try:
        row = policy_row(con, fold.policy_id) if fold.policy_id else None
    except Exception as e:  # noqa: BLE001 - a missing table or row: the same
        return None, f"its policy {fold.policy_id} cannot be read from its warehouse ({type(e).__name__})"
    finally:
        con.close()
    if row is not None:
        from metapilot.models.evaluation.heldout import load_controller

        _, _, why = load_controller(row, str(fold_db))
        if why:
            return None, why
    return fold, None


def prune_folds(db: str | None, cluster: str, keep: list[str | None]) -> None:
    """Remove the cluster's fold folders this walk forward did not use (older pasts, older code)."""
    root = fold_root(db, cluster)
    used = {Path(k).parent.resolve() for k in keep if k}
    for home in root.glob("*") if root.is_dir() else []:
        if home.is_dir() and home.resolve() not in used:
            shutil.rmtree(home, ignore_errors=True)


def local_fold_runner(db: str | None, cluster: str, origins: list[datetime], steps: int, relearn: bool) -> str | None:
    """With no Dask cluster named: the folds still to learn side by side on a local Dask cluster of
    as many processes as there are usable cores (`ground.cores.workers()`, `METAPILOT_WORKERS=1`:
    one after another here). A fold's own steps keep about one core busy (its training runs on one
    thread; its tuning, alone, would use the cores), so two folds at once take about half the
    time of two in turn. None when at most one fold is to be learned: starting workers costs more."""
    from metapilot.ground.cores import workers

    n = min(workers(), len(new_folds(db, cluster, origins, steps, relearn)))
    return f"local:{n}" if n > 1 else None


def new_folds(db: str | None, cluster: str, origins: list[datetime], steps: int, relearn: bool) -> list[datetime]:
    """The origins whose fold is to be learned (not reusable from an earlier walk forward)."""
    return [t for t in origins if relearn or reusable_fold(fold_home(db, cluster, t, steps))[1] is not None]


def fold_runner(dask: str | None, db: str | None, cluster: str, origins: list[datetime], steps: int,
                relearn: bool) -> str | None:
    """Where the folds learn: `dask` (or `METAPILOT_DASK_ADDRESS`), a batch cluster asking for no
    more jobs than there are folds to learn (none when every fold is reused), else `local_fold_runner`."""
    from metapilot.flows.batch_workers import at_most, parse_batch

    chosen = dask or os.environ.get("METAPILOT_DASK_ADDRESS")
    if chosen and parse_batch(chosen):
        new = len(new_folds(db, cluster, origins, steps, relearn))
        return at_most(chosen, new, db) if new else None
    return chosen or local_fold_runner(db, cluster, origins, steps, relearn)


@task(name="walk-forward-fold", cache_policy=NONE)
def fold_task(db: str | None, cluster: str, first: datetime, busy: list[datetime], origin: datetime, steps: int,
              relearn: bool):
    return learn_fold(db, cluster, first, busy, origin, steps, relearn)


@flow(name="walk-forward-folds")
def folds_flow(db: str | None, cluster: str, first: datetime, busy: list[datetime], origins: list[datetime],
               steps: int, relearn: bool = False) -> list:
    """Every origin's fold at once, on the flow's task runner (Dask workers with `--dask`). The
    latest origins first: their pasts are the longest, so the workers finish closer together."""
    futures = {t: fold_task.submit(db, cluster, first, busy, t, steps, relearn) for t in sorted(origins, reverse=True)}
    return [futures[t].result() for t in origins]


@flow(name="backtest", log_prints=True)
def backtest_flow(db: str | None = None, cluster: str | None = None, every_weeks: int = 4,
                  warmup_weeks: int | None = None, start: datetime | None = None, end: datetime | None = None,
                  current: str = "FCFS+EASY", steps: int = 2000, dask: str | None = None, planner: bool = True,
                  relearn: bool = False, current_conf: str | None = None,
                  current_qos: dict[str, int] | None = None, current_complete_s: float = 0.0,
                  current_shares: str | None = None) -> WalkForwardResult:
    """Walk forward over the cluster's history (see the module docstring); returns the result.
    The folds learn in parallel on the Dask cluster `dask` names (or `METAPILOT_DASK_ADDRESS`), else
    on a local one when more than one is to be learned (`local_fold_runner`), else here."""
    from metapilot.flows.stages import with_runner
    from metapilot.ground.paths import db_path
    from metapilot.models.evaluation.backtest import new_backtest_id, past_choices
    from metapilot.models.simulator.rules import parse_rule

    parse_rule(current)  # a mistyped rule stops here, before any learning
    log = get_run_logger()
    cluster, first, busy, origins, span_end = plan_origins(db, cluster, every_weeks, warmup_weeks, start, end)
    log.info("walk forward on %s: %d origins from %s, every %d weeks, to %s", cluster, len(origins),
             origins[0].date(), every_weeks, span_end.date())
    runner = fold_runner(dask, db, cluster, origins, steps, relearn)
    # what the past says at each origin depends on no fold: replayed here while the folds learn
    # (their workers leave a core part idle: Prefect's calls, the warehouses' I/O, uneven folds)
    pasts = past_windows_of(db, cluster, [*origins, span_end], current, current_conf, current_qos,  # and at the end:
                            current_complete_s, current_shares)  # the next decision
    with ThreadPoolExecutor(1, thread_name_prefix="past-replays") as ex:
        past = ex.submit(past_choices, pasts, log.info)
        del pasts
        if runner:
            log.info("folds learn on %s", runner)
            # a worker elsewhere (another cwd, another node) finds the warehouse by its whole path
            shipped = str(db_path(db).resolve())
            folds = with_runner(folds_flow, runner, db)(shipped, cluster, first, busy, origins, steps, relearn)
        else:
            folds = [learn_fold(db, cluster, first, busy, t, steps, relearn) for t in origins]
        choices = past.result()
    out = judge_task(db, cluster, folds, span_end, current, planner, new_backtest_id(), choices, current_conf,
                     current_qos, current_complete_s, current_shares)
    if start is None and end is None:  # a narrowed span leaves the whole walk's folds for the next run
        prune_folds(db, cluster, [f.db for f in folds])
    return out.with_folds(str(fold_root(db, cluster)))


@task(name="publish-walk-forward", cache_policy=NONE)
def publish_next_task(db: str | None, out: WalkForwardResult) -> dict | None:
    """Publish the walk forward's decision for the next period (`out.next`), the evidence as its
    reason: what `steer --policy published` and `export` then follow once a person approves it.
    Returns what was published (`NextDecision.to_json`, the stored fields) and its pointer file."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.publish_store import publish_walk_forward

    ahead = out.next
    if ahead is None:
        get_run_logger().warning("the walk forward on %s decided nothing for the next period: nothing published",
                                 out.cluster)
        return None
    published = ahead.to_json()
    with warehouse_writer(db, log=get_run_logger().info):
        con = connect(db)
        try:
            pointer = publish_walk_forward(con, out.cluster, published, db)
        finally:
            con.close()
    get_run_logger().info("published for %s: %s (%s)", out.cluster, ahead.decision.describe(), ahead.record.words)
    return {**published, "pointer": str(pointer)}


@flow(name="pipeline-backtest", log_prints=True)
def pipeline_backtest_flow(paths: list[str], db: str | None = None, cluster: str | None = None, steps: int = 2000,
                           dask: str | None = None, ingest_cluster: str | None = None,
                           current: str = "FCFS+EASY") -> dict:
    """`pipeline --backtest`: ingest, then the walk forward instead of the one-window learning, its
    decision for the next period published, then the weekly report, whose first line and section "If
    you had followed MetaPilot" show it."""
    from metapilot.flows.ingest import ingest_flow
    from metapilot.flows.stages import weekly_report_flow
    from metapilot.warehouse.ingest import IngestOptions

    ingest = ingest_flow(list(paths), db=db, opts=IngestOptions(cluster=ingest_cluster)) if paths else []
    out = backtest_flow(db=db, cluster=cluster, steps=steps, dask=dask, current=current)
    published = publish_next_task(db, out)
    report = weekly_report_flow(out.cluster, None, db=db)
    return {"ingest": ingest, "backtest": out, "published": published, "report": report}
