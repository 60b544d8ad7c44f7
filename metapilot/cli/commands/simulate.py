"""`metapilot simulate`: replay a window of a cluster's real jobs under a policy (or all 21)."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from metapilot.cli.options import (
    COMPLETE_S_HELP,
    QOS_PRIORITY_HELP,
    SHARES_HELP,
    OptionError,
    complete_s_option,
    out_file_option,
    qos_priority_option,
    shares_option,
    window_options,
)


def simulate_cmd(
    cluster: Annotated[str, typer.Option(help="Cluster whose jobs to replay.")],
    policy: Annotated[str, typer.Option(help="Priority rule: FCFS, SJF, SAF, LAF, WFP3, UNICEF, F1; or multifactor "
                                              "(Slurm's priority/multifactor as the slurm.conf sets it, with --backfill "
                                              "slurm), or MULTIFACTOR(age=1000,fairshare=10000,jobsize=0,partition=0,"
                                              "qos=0,maxage=7-0,favorsmall=no) with those weights.")] = "FCFS",
    backfill: Annotated[str, typer.Option(help="none, easy, conservative, or slurm (Slurm's own main and backfill "
                                                "schedulers on nodes and partitions).")] = "easy",
    slurm_conf: Annotated[Optional[str], typer.Option("--slurm-conf", help="The site's slurm.conf for --backfill slurm: "
                                                      "nodes, partitions, SchedulerParameters and Priority* weights "
                                                      "(default: Slurm's defaults on the warehouse's capacity).")] = None,
    qos_priority: Annotated[Optional[str], typer.Option("--qos-priority", help=QOS_PRIORITY_HELP + " With --backfill slurm.")] = None,
    shares: Annotated[Optional[str], typer.Option("--shares", help=SHARES_HELP + " With --backfill slurm.")] = None,
    complete_s: Annotated[Optional[float], typer.Option("--complete-s", help=COMPLETE_S_HELP + " With --backfill slurm.")] = None,
    start: Annotated[Optional[str], typer.Option("--from", help="Window start (ISO date/time, UTC), by submit time.")] = None,
    end: Annotated[Optional[str], typer.Option("--to", help="Window end (exclusive).")] = None,
    partition: Annotated[Optional[str], typer.Option(help="Replay one partition only.")] = None,
    jobs_out: Annotated[Optional[str], typer.Option(help="Write per-job results to this file (.parquet or .csv: the suffix chooses).")] = None,
    all_baselines: Annotated[bool, typer.Option("--all-baselines", help="Run the 21 baselines and compare them.")] = False,
    fidelity: Annotated[bool, typer.Option("--fidelity", help="Compare the replay's waits with the logged ones.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file.")] = None,
) -> None:
    """Replay the real workload under a scheduling policy; print and store the metrics."""
    import polars as pl

    from metapilot.cli.console import console, print_frame, progress_bar
    from metapilot.models.simulator import RULE_PAIRS, Capacity, simulate
    from metapilot.transforms.workload import normalise
    from metapilot.warehouse.db import connect, require_warehouse
    from metapilot.warehouse.sim_store import load_capacity, load_window, store_run

    w_from, w_to = window_options(start, end)  # checked before any work
    jobs_out = out_file_option(jobs_out, "--jobs-out")
    conf = _slurm_conf_option(policy, backfill, slurm_conf, all_baselines)
    qos = qos_priority_option(qos_priority)
    if qos is not None and backfill.lower() != "slurm":
        raise OptionError("QOS priorities weigh in Slurm's multifactor: add --backfill slurm", param_hint="--qos-priority")
    shares = shares_option(shares)
    if shares is not None and backfill.lower() != "slurm":
        raise OptionError("fair-share shares weigh in Slurm's multifactor: add --backfill slurm", param_hint="--shares")
    if complete_s_option(complete_s) is not None and backfill.lower() != "slurm":
        raise OptionError("the completing time is the slurm mode's: add --backfill slurm", param_hint="--complete-s")
    require_warehouse(db)  # a mistyped --db must not create an empty warehouse
    con = connect(db)
    if partition is not None:
        from metapilot.warehouse.jobs_store import clusters_with_jobs, partitions

        known, holds = partitions(con, cluster), clusters_with_jobs(con)
        if (known and partition not in known) or not known and cluster not in holds:
            con.close()
        if known and partition not in known:
            raise OptionError(f"cluster {cluster!r} has no partition {partition!r}: its jobs ran in "
                                     f"{', '.join(p for p in known if p is not None) or '(none named)'}", param_hint="--partition")
        if not known and cluster not in holds:
            raise OptionError(f"no jobs for cluster {cluster!r}: the warehouse holds {', '.join(holds) or 'none'}",
                              param_hint="--cluster")
    jobs = load_window(con, cluster, w_from, w_to, partition)
    if jobs.height == 0:
        console.print(f"[red]error:[/red] no jobs for cluster {cluster!r} in that window: check `metapilot sql "
                      "\"SELECT cluster, min(submit_time), max(submit_time), count(*) FROM jobs GROUP BY 1\"`")
        raise typer.Exit(2)
    try:
        cap_rows = load_capacity(con, cluster, w_from or jobs["submit_time"].min())
    except LookupError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2)
    capacity = Capacity.from_rows(cap_rows)
    workload = normalise(jobs, w_from)
    from metapilot.models.simulator.runnable import nothing_runs

    where = f"{cluster}" + (f"/{partition}" if partition else "") + (
        f" submitted {start or 'from the first'} to {end or 'the last'}" if start or end else "")
    why = nothing_runs(workload, capacity, where)
    if why is not None:  # a replay would finish nothing: every figure empty (issue 54)
        con.close()
        console.print(f"[red]error:[/red] {why}", markup=True, highlight=False)
        raise typer.Exit(2)
    if backfill.lower() == "slurm" and conf is None:
        from metapilot.models.simulator.slurm import conf_from_capacity

        conf = conf_from_capacity(cap_rows)
    if conf is not None and qos:
        conf = conf.with_qos(qos)
    if conf is not None and complete_s is not None:
        conf = conf.with_sched(complete_s=complete_s)
    if conf is not None:  # the association tree (every association one share without --shares), named as the jobs
        from metapilot.models.simulator.slurm import site_shares
        from metapilot.warehouse.secret import readable_key

        conf = conf.with_shares(site_shares(shares, con, cluster, readable_key(db)))
    runs = list(RULE_PAIRS) if all_baselines else [(policy.upper(), backfill.lower())]
    summaries = []
    for pol, bf in runs:
        t_call = time.perf_counter()
        try:
            if bf == "slurm":
                pol = policy if policy.strip().lower().startswith("multifactor") else pol
                from metapilot.models.simulator.slurm import simulate_slurm

                with progress_bar(f"replaying {cluster} on Slurm ({pol}): jobs started") as shown:
                    result = simulate_slurm(workload, conf, pol, progress=shown)
                for note in result.notes:
                    console.print(f"[yellow]note:[/yellow] {note}", markup=True, highlight=False)
            else:
                result = simulate(workload, capacity, pol, bf)
        except ValueError as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2)
        overall = result.metrics()
        weekly = result.weekly()
        run_id = store_run(con, cluster=cluster, partition=partition, window_from=w_from, window_to=w_to, policy=pol,
                           backfill=bf, objective_schedule={"fixed": f"{pol}+{bf}"}, seed=None,
                           wall_s=time.perf_counter() - t_call, counters=result.counters, overall=overall,
                           weekly=weekly, engine_s=result.engine_s)
        summaries.append(overall.with_columns(pl.lit(run_id).alias("run_id")))
        if jobs_out and not all_baselines:
            _write_jobs(result, jobs_out)
        if fidelity and not all_baselines:
            from metapilot.models.simulator.fidelity import fidelity as fid

            print_frame(fid(result, jobs), title=f"Fidelity: {cluster}, logged waits vs replay")
    table = pl.concat(summaries)
    cols = ["policy", "backfill", "jobs", "mean_wait", "median_wait", "p95_wait", "p99_wait", "max_wait", "mean_bsld",
            "mean_bsld_1min", "util_cores", "util_gpus", "util_mem", "makespan", "wall_s"]
    units = {c: "s" for c in ("mean_wait", "median_wait", "p95_wait", "p99_wait", "max_wait", "makespan", "wall_s")}
    units |= {c: "%" for c in ("util_cores", "util_gpus", "util_mem")}
    print_frame(table.select(cols), limit=25, title=f"Replay of {cluster}" + (f"/{partition}" if partition else ""),
                units=units)
    c = summaries[0].row(0, named=True)
    rep = workload.report
    console.print(f"jobs in window {rep.jobs_in:,}; replayed {rep.replayed - c['cannot_fit']:,}; left out {rep.left_out:,} "
                  f"(never ran {rep.never_ran:,}, zero run {rep.zero_run:,}, no size {rep.no_size:,}); run times clamped "
                  f"{rep.clamped:,}; estimates filled {rep.estimates_filled:,}; cannot fit {c['cannot_fit']:,}")
    cap_src = ", ".join(f"{r['partition']}={r['cores']} cores ({r['source']})" for r in cap_rows.iter_rows(named=True))
    console.print(f"capacity: {cap_src}")
    if (cap_rows["source"] == "inferred-peak").any():
        console.print("[yellow]warning:[/yellow] capacity was inferred from the peak allocation in the logs; "
                      "utilisation and waits depend on it: load the real figures with `metapilot capacity --config`")
    console.print(f"stored as sim_runs {', '.join(s['run_id'][0] for s in summaries[:3])}{' ...' if len(summaries) > 3 else ''}")
    if jobs_out and not all_baselines:
        console.print(f"per-job results: {jobs_out}")


def _slurm_conf_option(policy: str, backfill: str, path: str | None, all_baselines: bool):
    """The slurm.conf read (None: none given); refuses a combination Slurm's replay does not have."""
    bf, pol = backfill.lower(), policy.lower()
    if bf not in ("none", "easy", "conservative", "slurm"):
        raise OptionError(f"unknown backfilling mode {backfill!r}: none, easy, conservative or slurm",
                          param_hint="--backfill")
    if pol.startswith("multifactor") and bf != "slurm":
        raise OptionError("multifactor is Slurm's priority: replay it with --backfill slurm (and the site's "
                          "--slurm-conf)", param_hint="--policy")
    if path is not None and bf != "slurm":
        raise OptionError("--slurm-conf is read by the slurm mode: add --backfill slurm", param_hint="--slurm-conf")
    if all_baselines and bf == "slurm":
        raise OptionError("--all-baselines replays the 21 textbook rules; replay Slurm with --backfill slurm alone",
                          param_hint="--all-baselines")
    if path is None:
        return None
    from pathlib import Path

    from metapilot.models.simulator.slurm import read_slurm_conf

    if not Path(path).is_file():
        raise OptionError(f"no slurm.conf at {path}", param_hint="--slurm-conf")
    try:
        return read_slurm_conf(path)
    except (ValueError, OSError) as e:
        raise OptionError(f"{path}: {e}", param_hint="--slurm-conf") from None


def _write_jobs(result, path: str) -> None:
    import polars as pl

    w = result.workload
    origin_us = int(w.window_start.timestamp() * 1_000_000)
    ts = lambda c: (pl.lit(origin_us) + (pl.col(c) * 1e6).round().cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    df = result.schedule().with_columns(
        ts("submit").alias("submit_time"), ts("start").alias("sim_start_time"), ts("end").alias("sim_end_time"),
    ).select("job_id", "submit_time", "sim_start_time", "sim_end_time", "wait", "run", "req_time", "cores", "gpus", "mem", "pool")
    if path.lower().endswith(".csv"):  # the suffix chooses the format (options.out_file_option)
        df.write_csv(path)
    else:
        df.write_parquet(path)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
