"""Parse PBS / Torque / PBS Pro accounting logs into canonical job rows.

A record is `MM/DD/YYYY HH:MM:SS;T;id;key=value key=value ...`, the stamp in the server's local
time (converted to UTC with the `tz` the operator gives), the epoch attributes (ctime, qtime, etime,
start, end) already absolute. Attributes are pulled out with one vectorised regex per key.

One row per job of the chunk, from its most telling record (documented choices, SPEC §3/§4):
- priority E (ended) > D (deleted) > A (aborted by the server) > S/T (started, restarted) > Q
  (queued); among equals the latest line wins. The row is that line; attributes it lacks are
  taken from the job's other lines (a D-only job gets its start from its S line). Every other line
  of the job counts as `merged`, as do informational job records (R rerun, C checkpoint, M moved,
  a altered, P/p provisioning, ...) which never make rows of their own.
- states: E -> COMPLETED when Exit_status is 0; CANCELLED when the job also has a D record (qdel);
  TIMEOUT when it ran at least its walltime limit; FAILED for any other exit status (PBS's negative
  JOB_EXEC_* codes included); CANCELLED when it never started and has no exit status; else UNKNOWN.
  D -> CANCELLED (end = the D stamp), A -> FAILED, S/T -> RUNNING, Q -> PENDING. "No E later" is
  judged within the chunk: a job that ends in tomorrow's file is RUNNING today, and tomorrow's E row
  (same cluster, job id and ctime = submit time) replaces it in the warehouse.
- submit = ctime, else qtime, else the earliest Q stamp; a job with none of these (a D for a job
  queued in an earlier file) is quarantined with that reason: a submit time is never invented.
- arrays: `123[4]` (or Torque's `123-4`) -> job_id `123_4`, array_job_id `123`, task 4. The array's
  own records (`123[]`) are summaries: merged when any task of the array is in the chunk, and always
  for E/S/T/A; a queued (or deleted) array with no task here gives one row `123_[<indices>]`
  (`123_[]` when the log does not give the indices).
- reservations and licences (B F K k L U Y) are not jobs: skipped.
- run_s = resources_used.walltime, else end - start; wait_s = start - submit (both >= 0).
- requests: req_cpus is the largest of Resource_List.ncpus, the select total (sum over `+`
  chunks of N x ncpus), the nodes total (N x ppn) and procs, since Torque often logs ncpus=1 next
  to nodes=1:ppn=4. req_nodes from nodect, else the nodes spec. req_mem_mib from Resource_List.mem,
  else the select total, else pmem x req_cpus; sizes b/kb/mb/gb/tb/pb and words w/kw/mw/gw/tw
  (8 bytes), case-insensitive, no suffix = bytes (PBS's documented default). GPUs follow Open
  XDMoD: gpus/gpu in Resource_List.nodes, then Resource_List.gpus, ngpus, the select ngpus total,
  then gpu(s) in nodect; 0 when none is given (PBS logs every requested resource).
- allocations (jobs that started): exec_host gives alloc_nodes, node_list and alloc_cpus
  (`h/7+h/6`, `h/0-3`, `h/0,2`, `h/0*8`); with no usable exec_host, resources_used.ncpus. PBS
  allocates what was asked for, so alloc_gpus/alloc_mem_mib repeat the request.
- exit_code is Exit_status verbatim; job_id drops the `.server` suffix; queue -> partition;
  account, else project (unless PBS Pro's `_pbs_project_default`) -> account_name.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

import polars as pl
from metapilot.transforms.canonical import (
    ParseResult,
    conform,
    empty_jobs,
    empty_quarantine,
    quarantine_rows,
)

_STAMP = r"^\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}$"
NON_JOB_TYPES = ("B", "F", "K", "k", "L", "U", "Y")
TYPE_PRIORITY: dict[str, int] = {"E": 0, "D": 1, "A": 2, "S": 3, "T": 3, "Q": 4}
INFO_PRIORITY = 9  # R, C, M, a, P, p, ...: folded into the job, never a row
MAX_EPOCH = 10**11  # seconds; larger is garbage (and would overflow microsecond timestamps)
MAX_COUNT = 10**9

# alias -> attribute name in the log
ATTRS: dict[str, str] = {
    "user": "user", "group": "group", "account": "account", "project": "project",
    "jobname": "jobname", "queue": "queue", "exit_status": "Exit_status",
    "ctime": "ctime", "qtime": "qtime", "etime": "etime", "start": "start", "end": "end",
    "exec_host": "exec_host", "rl_ncpus": "Resource_List.ncpus", "rl_procs": "Resource_List.procs",
    "rl_nodes": "Resource_List.nodes", "rl_nodect": "Resource_List.nodect",
    "rl_select": "Resource_List.select", "rl_walltime": "Resource_List.walltime",
    "rl_mem": "Resource_List.mem", "rl_pmem": "Resource_List.pmem", "rl_gpus": "Resource_List.gpus",
    "rl_ngpus": "Resource_List.ngpus", "ru_walltime": "resources_used.walltime",
    "ru_ncpus": "resources_used.ncpus", "array_indices": "array_indices_submitted",
    "job_array_request": "job_array_request",
}
_MEM_FACTOR_BYTES: dict[str, int] = {
    "": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
    "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50,
    "w": 8, "kw": 8 << 10, "mw": 8 << 20, "gw": 8 << 30, "tw": 8 << 40, "pw": 8 << 50,
}


def _attr(key: str) -> pl.Expr:
    """Value of `key=value` in the attribute text (first non-empty occurrence), else null.

    One regex per key measured faster than tokenising and pivoting (and than Python dicts).
    """
    return pl.col("attrs").str.extract(r"(?:^|\s)" + re.escape(key) + r"=(\S+)", 1)


def _count(expr: pl.Expr) -> pl.Expr:
    """A non-negative integer attribute; anything else (or absurdly large) is null."""
    v = expr.cast(pl.Int64, strict=False)
    return pl.when((v >= 0) & (v <= MAX_COUNT)).then(v)


def _epoch(expr: pl.Expr) -> pl.Expr:
    """Epoch seconds to a UTC timestamp; 0 (PBS's "never") and garbage are null."""
    v = expr.cast(pl.Int64, strict=False)
    return pl.when((v > 0) & (v < MAX_EPOCH)).then(v * 1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def clock_seconds(expr: pl.Expr) -> pl.Expr:
    """A resource time as PBS and SGE write it: seconds, MM:SS or HH:MM:SS (hours may exceed 24),
    a fraction ignored; null when it is none of these."""
    parts = expr.str.extract_groups(r"^(?:(?:(\d{1,9}):)?(\d{1,9}):)?(\d{1,12})(?:\.\d*)?$")
    h = parts.struct.field("1").cast(pl.Int64, strict=False).fill_null(0)
    m = parts.struct.field("2").cast(pl.Int64, strict=False).fill_null(0)
    s = parts.struct.field("3").cast(pl.Int64, strict=False)
    return h * 3600 + m * 60 + s


def _mem_mib(expr: pl.Expr) -> pl.Expr:
    """PBS size (`1993mb`, `185547MB`, `4gb`, `100w`, bare bytes) to MiB, rounded; null if unknown."""
    parts = expr.str.to_lowercase().str.extract_groups(r"^(\d*\.?\d+)([a-z]*)$")
    qty = parts.struct.field("1").cast(pl.Float64, strict=False)
    factor = parts.struct.field("2").replace_strict(_MEM_FACTOR_BYTES, default=None, return_dtype=pl.Float64)
    mib = (qty * factor / (1 << 20)).round(0)
    return pl.when(mib.is_finite() & (mib < 2**53)).then(mib.cast(pl.Int64, strict=False))


def _first_int(expr: pl.Expr, pattern: str) -> pl.Expr:
    """The first capture of `pattern` as a count (see `_count`)."""
    return _count(expr.str.extract(pattern, 1))


def _times(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """a x b without Int64 overflow on garbage: computed in floats, capped at 2**53."""
    return (a.cast(pl.Float64) * b.cast(pl.Float64)).clip(upper_bound=2.0**53).cast(pl.Int64)


def _per_chunk_totals(lines: pl.DataFrame, col: str, exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """Sum per-chunk quantities of a `+`-joined spec (`2:ncpus=8+1:ncpus=4`) back onto each line.

    `exprs` are evaluated on column `c` (one chunk); a total is null when no chunk had a value.
    """
    parts = (
        lines.lazy().select("line_no", pl.col(col).str.split("+").alias("c"))
        .filter(pl.col("c").is_not_null())
        .explode("c")
        .with_columns(**exprs)
    )
    aggs = [pl.when(pl.col(k).is_not_null().any()).then(pl.col(k).sum()).alias(k) for k in exprs]
    return parts.group_by("line_no").agg(aggs).collect()


def _chunk_count(c: pl.Expr) -> pl.Expr:
    """Leading `N:` of a nodes/select chunk; a chunk naming a host (or bare resources) counts 1."""
    return _first_int(c, r"^(\d+)(?::|$)").fill_null(1)


def _select_totals(lines: pl.DataFrame) -> pl.DataFrame:
    c, n = pl.col("c"), _chunk_count(pl.col("c"))
    return _per_chunk_totals(lines, "rl_select", {
        "sel_cpus": _times(n, _first_int(c, r"(?:^|:)ncpus=(\d+)").fill_null(1)),
        "sel_gpus": _times(n, _first_int(c, r"(?:^|:)ngpus=(\d+)")),
        "sel_mem": _times(n, _mem_mib(c.str.extract(r"(?:^|:)mem=([^:]+)", 1))),
    })


def _nodes_totals(lines: pl.DataFrame) -> pl.DataFrame:
    c, n = pl.col("c"), _chunk_count(pl.col("c"))
    return _per_chunk_totals(lines, "rl_nodes", {
        "nodes_n": n,
        "nodes_cpus": _times(n, _first_int(c, r"(?:^|:)ppn=(\d+)").fill_null(1)),
        "nodes_gpus": _times(n, _first_int(c, r"(?:^|:)gpus?=(\d+)")),
    })


def _exec_host_totals(lines: pl.DataFrame) -> pl.DataFrame:
    """alloc nodes/cpus and node list from exec_host (`h/7+h/6`, `h/0-3`, `h/0,2`, `h/0*8`)."""
    hosts = (
        lines.lazy().select("line_no", pl.col("exec_host").str.split("+").alias("part"))
        .filter(pl.col("part").is_not_null())
        .explode("part")
        .select("line_no", pl.col("part").str.splitn("/", 2).alias("hc"))
        .select(
            "line_no",
            pl.col("hc").struct.field("field_0").alias("node"),
            pl.col("hc").struct.field("field_1").alias("cpus"),
        )
    )
    items = hosts.with_columns(pl.col("cpus").str.split(",").alias("item")).explode("item")
    item = pl.col("item")
    rng = item.str.splitn("-", 2)
    lo = _count(rng.struct.field("field_0"))
    hi = _count(rng.struct.field("field_1"))
    star = _count(item.str.splitn("*", 2).struct.field("field_1"))
    single = item.str.to_integer(strict=False).is_not_null()
    n = (
        pl.when(pl.col("cpus").is_null()).then(pl.lit(1, dtype=pl.Int64))
        .when(single).then(pl.lit(1, dtype=pl.Int64))
        .when(lo.is_not_null() & hi.is_not_null()).then((hi - lo).abs() + 1)
        .when(star.is_not_null() & item.str.contains("*", literal=True)).then(star)
    )
    node = pl.when(pl.col("node") != "").then(pl.col("node"))
    per_line = items.with_columns(n.clip(upper_bound=MAX_COUNT).alias("n"), node.alias("node")).group_by("line_no").agg(
        pl.col("node").drop_nulls().n_unique().alias("ex_nodes"),
        pl.col("n").sum().alias("ex_cpus"),
        pl.col("node").drop_nulls().unique(maintain_order=True).str.join(",").alias("ex_node_list"),
    )
    return per_line.with_columns(
        pl.when(pl.col("ex_nodes") > 0).then(pl.col("ex_nodes")).alias("ex_nodes"),
        pl.when(pl.col("ex_cpus") > 0).then(pl.col("ex_cpus")).alias("ex_cpus"),
        pl.when(pl.col("ex_node_list") != "").then(pl.col("ex_node_list")).alias("ex_node_list"),
    ).collect()


def _job_ids(records: pl.LazyFrame) -> pl.LazyFrame:
    """Split `seq.server` ids into job_id / array_job_id / array_task_id and mark array summaries."""
    records = records.with_columns(pl.col("id").str.splitn(".", 2).struct.field("field_0").alias("seq"))
    seq = pl.col("seq")
    bracket_task = seq.str.extract(r"^\d+\[(\d+)\]$", 1)
    dash_task = seq.str.extract(r"^\d+-(\d+)$", 1)
    task = pl.coalesce(bracket_task, dash_task).cast(pl.Int64, strict=False)
    base = seq.str.extract(r"^(\d+)(?:\[|-\d+$)", 1)
    is_parent = seq.str.contains(r"^\d+\[[^\]]*\]$") & bracket_task.is_null()
    bracket = seq.str.extract(r"\[([^\]]+)\]", 1)
    indices = pl.coalesce(pl.col("array_indices"), pl.col("job_array_request"), bracket)
    # An array's own records share the key `123_[]`; the row names its indices when known.
    job_id = (
        pl.when(task.is_not_null()).then(base + "_" + task.cast(pl.Utf8))
        .when(is_parent).then(base + "_[]")
        .otherwise(seq)
    )
    return records.with_columns(
        job_id.alias("job_id"),
        pl.when(is_parent).then(indices).alias("indices"),
        pl.when(task.is_not_null() | is_parent).then(base).alias("array_job_id"),
        task.alias("array_task_id"),
        is_parent.fill_null(False).alias("is_parent"),
    )


def _line_attributes(records: pl.DataFrame, tz: str) -> pl.DataFrame:
    """Every attribute a row may need, per line, parsed into its final type."""
    # Lazy so that polars shares repeated sub-expressions (eager evaluation repeats them).
    df = records.lazy().with_columns([_attr(key).alias(alias) for alias, key in ATTRS.items()])
    df = _job_ids(df)
    local = pl.col("stamp").str.strptime(pl.Datetime("us"), "%m/%d/%Y %H:%M:%S", strict=False)
    rec_time = local.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null").dt.convert_time_zone("UTC")
    df = df.with_columns(
        rec_time.alias("rec_time"),
        pl.col("rtype").replace_strict(TYPE_PRIORITY, default=INFO_PRIORITY, return_dtype=pl.Int64).alias("prio"),
        *[_epoch(pl.col(k)).alias(k) for k in ("ctime", "qtime", "etime", "start", "end")],
        clock_seconds(pl.col("rl_walltime")).alias("timelimit_s"),
        clock_seconds(pl.col("ru_walltime")).alias("used_walltime_s"),
        _mem_mib(pl.col("rl_mem")).alias("rl_mem_mib"),
        _mem_mib(pl.col("rl_pmem")).alias("rl_pmem_mib"),
        *[_count(pl.col(k)).alias(k) for k in ("rl_ncpus", "rl_procs", "rl_gpus", "rl_ngpus", "ru_ncpus")],
        _first_int(pl.col("rl_nodect"), r"^(\d+)").alias("nodect_n"),
        _first_int(pl.col("rl_nodect"), r"(?:^|:)gpus?=(\d+)").alias("nodect_gpus_per_node"),
        pl.col("exit_status").cast(pl.Int64, strict=False).alias("exit_int"),
    ).collect()
    for extra in (_select_totals(df), _nodes_totals(df), _exec_host_totals(df)):
        df = df.join(extra, on="line_no", how="left")
    return df.lazy().with_columns(
        pl.max_horizontal("rl_ncpus", "sel_cpus", "nodes_cpus", "rl_procs").alias("req_cpus"),
        pl.coalesce("nodect_n", "nodes_n").alias("req_nodes"),
        pl.coalesce(
            "rl_mem_mib", "sel_mem",
            _times(pl.col("rl_pmem_mib"), pl.max_horizontal("rl_ncpus", "sel_cpus", "nodes_cpus", "rl_procs")),
        ).alias("req_mem_mib"),
        _gpu_request().alias("req_gpus"),
        pl.when(pl.col("rtype") == "E").then(pl.coalesce("end", "rec_time"))
        .when(pl.col("rtype").is_in(["D", "A"])).then(pl.col("rec_time")).alias("end_c"),
        pl.when(pl.col("rtype") == "Q").then(pl.col("rec_time")).alias("q_time"),
        pl.coalesce(
            pl.col("account"),
            pl.when(pl.col("project") != "_pbs_project_default").then(pl.col("project")),
        ).alias("account_name"),
    ).collect()


def _gpu_request() -> pl.Expr:
    """Requested GPUs, in Open XDMoD's order of sources, plus PBS Pro's select ngpus; 0 if none."""
    nodect_gpus = _times(pl.col("nodect_gpus_per_node"), pl.col("nodect_n").fill_null(1))
    sources = ["nodes_gpus", "rl_gpus", "rl_ngpus", "sel_gpus"]
    positive = [pl.when(pl.col(c) > 0).then(pl.col(c)) for c in sources] + [pl.when(nodect_gpus > 0).then(nodect_gpus)]
    return pl.coalesce(*positive, pl.lit(0, dtype=pl.Int64))


# Per-job columns taken from the first line (priority order) that has them.
_CARRY = (
    "job_id", "array_job_id", "array_task_id", "user", "group", "account_name", "jobname", "queue",
    "exit_status", "exit_int", "ctime", "qtime", "etime", "start", "end_c", "timelimit_s",
    "used_walltime_s", "req_cpus", "req_nodes", "req_mem_mib", "req_gpus", "ex_cpus", "ru_ncpus",
    "ex_nodes", "ex_node_list", "is_parent", "indices",
)


def _one_row_per_job(job_lines: pl.DataFrame) -> pl.DataFrame:
    """Collapse a job's lines: the best record's line, its gaps filled from the job's other lines."""
    ordered = job_lines.sort(["job_id", "prio", "line_no"], descending=[False, False, True])
    return ordered.group_by("job_id", maintain_order=True).agg(
        pl.col("line_no").first().alias("source_line"),
        pl.col("rtype").first().alias("primary"),
        pl.len().alias("n_lines"),
        (pl.col("rtype") == "D").any().alias("had_d"),
        pl.col("q_time").min().alias("first_q_time"),
        *[pl.col(c).drop_nulls().first().alias(c) for c in _CARRY if c != "job_id"],
    )


def _state() -> pl.Expr:
    ran_out = pl.col("timelimit_s").is_not_null() & (pl.col("run_s") >= pl.col("timelimit_s"))
    ended = (
        pl.when(pl.col("exit_int") == 0).then(pl.lit("COMPLETED"))
        .when(pl.col("had_d")).then(pl.lit("CANCELLED"))
        .when(pl.col("exit_int").is_not_null() & ran_out).then(pl.lit("TIMEOUT"))
        .when(pl.col("exit_int").is_not_null()).then(pl.lit("FAILED"))
        .when(pl.col("start").is_null()).then(pl.lit("CANCELLED"))
        .otherwise(pl.lit("UNKNOWN"))
    )
    return (
        pl.when(pl.col("primary") == "E").then(ended)
        .when(pl.col("primary") == "D").then(pl.lit("CANCELLED"))
        .when(pl.col("primary") == "A").then(pl.lit("FAILED"))
        .when(pl.col("primary").is_in(["S", "T"])).then(pl.lit("RUNNING"))
        .otherwise(pl.lit("PENDING"))
    )


def _canonical(rows: pl.DataFrame, cluster: str) -> pl.DataFrame:
    """Final canonical columns from one aggregated row per job."""
    secs = lambda a, b: (pl.col(a) - pl.col(b)).dt.total_seconds()  # noqa: E731
    started = pl.col("start").is_not_null()
    rows = rows.lazy().with_columns(
        pl.coalesce("ctime", "qtime", "first_q_time").alias("submit_time"),
        pl.when(pl.col("primary").is_in(["E", "D", "A"])).then(pl.col("end_c")).alias("end_time"),
    ).with_columns(
        pl.when(pl.col("primary") == "E").then(
            pl.coalesce("used_walltime_s", pl.when(started).then(secs("end_time", "start").clip(lower_bound=0)))
        ).when(pl.col("primary").is_in(["D", "A"]) & started).then(secs("end_time", "start").clip(lower_bound=0))
        .alias("run_s"),
        pl.when(started).then(secs("start", "submit_time").clip(lower_bound=0)).alias("wait_s"),
    )
    job_id = (
        pl.when(pl.col("is_parent") & pl.col("indices").is_not_null())
        .then(pl.col("array_job_id") + "_[" + pl.col("indices") + "]")
        .otherwise(pl.col("job_id"))
    )
    out = rows.select(
        pl.lit(cluster).alias("cluster"),
        job_id.alias("job_id"), "array_job_id", "array_task_id",
        pl.lit("pbs").alias("source_format"),
        "source_line",
        pl.col("user").alias("user_name"),
        "account_name",
        pl.col("group").alias("group_name"),
        pl.col("jobname").alias("job_name"),
        pl.col("queue").alias("partition"),
        _state().alias("state"),
        pl.col("exit_status").alias("exit_code"),
        "submit_time",
        pl.col("etime").alias("eligible_time"),
        pl.col("start").alias("start_time"),
        "end_time", "wait_s", "run_s", "timelimit_s", "req_cpus", "req_nodes", "req_mem_mib", "req_gpus",
        pl.when(started).then(pl.coalesce("ex_cpus", pl.when(pl.col("ru_ncpus") > 0).then(pl.col("ru_ncpus")))).alias("alloc_cpus"),
        pl.when(started).then(pl.col("ex_nodes")).alias("alloc_nodes"),
        pl.when(started).then(pl.col("req_mem_mib")).alias("alloc_mem_mib"),
        pl.when(started).then(pl.col("req_gpus")).alias("alloc_gpus"),
        pl.when(started).then(pl.col("ex_node_list")).alias("node_list"),
    ).collect()
    return conform(out)


def _split_records(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(records, quarantine, skipped): blank and non-job lines are skipped, malformed quarantined."""
    parts = pl.col("line").str.splitn(";", 4)
    df = lines.lazy().with_columns(parts.alias("p")).with_columns(
        pl.col("p").struct.field("field_0").alias("stamp"),
        pl.col("p").struct.field("field_1").alias("rtype"),
        pl.col("p").struct.field("field_2").str.strip_chars().alias("id"),
        pl.col("p").struct.field("field_3").fill_null("").alias("attrs"),
    ).drop("p")
    well_formed = (
        pl.col("stamp").str.contains(_STAMP) & pl.col("rtype").str.contains(r"^[A-Za-z]$") & pl.col("id").is_not_null()
    ).fill_null(False)
    df = df.with_columns(pl.when(well_formed).then(pl.col("stamp")).alias("stamp")).collect()
    blank = pl.col("line").str.strip_chars() == ""
    non_job = pl.col("rtype").is_in(list(NON_JOB_TYPES))
    skipped = df.filter(blank | (pl.col("stamp").is_not_null() & non_job)).height
    df = df.filter(~blank & ~(pl.col("stamp").is_not_null() & non_job).fill_null(False))
    valid_stamp = pl.col("stamp").str.strptime(pl.Datetime("us"), "%m/%d/%Y %H:%M:%S", strict=False).is_not_null()
    reason = (
        pl.when(pl.col("stamp").is_null()).then(pl.lit("not a PBS accounting record (MM/DD/YYYY HH:MM:SS;type;id;attributes)"))
        .when(~valid_stamp).then(pl.lit("PBS record stamp is not a valid date/time"))
        .when(pl.col("id").str.splitn(".", 2).struct.field("field_0").fill_null("") == "").then(pl.lit("PBS record has an empty job id"))
    )
    df = df.lazy().with_columns(reason.alias("_reason")).collect()
    bad = df.filter(pl.col("_reason").is_not_null())
    q = quarantine_rows(bad["line_no"], bad["line"], bad["_reason"]) if bad.height else empty_quarantine()
    return df.filter(pl.col("_reason").is_null()).drop("_reason"), q, skipped


def _check_tz(tz: str) -> None:
    """Fail early and clearly on a bad time zone: it is configuration, not data."""
    try:
        ZoneInfo(tz)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"unknown time zone for PBS stamps: {tz!r}") from exc


def parse_pbs_chunk(chunk: pl.DataFrame, cluster: str, tz: str) -> ParseResult:
    """Parse one chunk (`line_no`, `line`) of PBS accounting records into canonical job rows.

    `tz` is the PBS server's time zone (IANA name); it only matters for record stamps (Q, D, A and
    E records without `end=`), since the epoch attributes are absolute.
    """
    _check_tz(tz)
    lines = chunk.select(pl.col("line_no").cast(pl.Int64), pl.col("line").cast(pl.Utf8).fill_null(""))
    records, quarantine, skipped = _split_records(lines)
    if records.height == 0:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine, lines_read=lines.height, skipped=skipped)
    df = _line_attributes(records, tz)

    # Array summaries: folded when a task of the array is here, and always for E/S/T/A records.
    task_arrays = df.filter(pl.col("array_task_id").is_not_null())["array_job_id"].unique()
    fold_parent = pl.col("is_parent") & (
        pl.col("array_job_id").is_in(task_arrays.implode()) | pl.col("rtype").is_in(["E", "S", "T", "A"])
    )
    folded = fold_parent | (pl.col("prio") == INFO_PRIORITY)
    merged = df.filter(folded).height
    job_lines = df.filter(~folded)

    rows = _one_row_per_job(job_lines)
    merged += int(rows["n_lines"].sum() - rows.height) if rows.height else 0
    jobs = _canonical(rows, cluster)

    no_submit = jobs.filter(pl.col("submit_time").is_null())
    if no_submit.height:
        raw = lines.join(no_submit.select(pl.col("source_line").alias("line_no")), on="line_no", how="semi")
        quarantine = pl.concat([quarantine, quarantine_rows(
            raw["line_no"], raw["line"],
            "PBS job has no submit time here (no ctime/qtime, no Q record in this input)",
        )])
        jobs = jobs.filter(pl.col("submit_time").is_not_null())
    return ParseResult(jobs=jobs.sort("source_line"), quarantine=quarantine.sort("line_no"), lines_read=lines.height, merged=merged, skipped=skipped)


__all__ = ["parse_pbs_chunk"]
