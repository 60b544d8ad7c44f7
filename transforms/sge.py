"""Parse Sun/Son of/Oracle/Univa Grid Engine `accounting` files into canonical job rows.

One record per line, colon-separated, in the order of sge_accounting(5): qname, hostname, group,
owner, job_name, job_number, account, priority, submission_time, start_time, end_time, failed,
exit_status, ru_wallclock, 17 ru_* fields, project, department, granted_pe, slots, task_number,
cpu, mem, io, category, iow, pe_taskid, maxvmem, then (6.2 on) arid, ar_submission_time and (UGE
8.x) job_class, qdel_info, maxrss, ... . `#` lines (`# Version: 8.1.9`, the header SGE writes) and
lines of one character or less (qacct ignores those) are skipped. Everything is vectorised with
polars, as in the other parsers.

Mapping (SPEC §3/§4), following Open XDMoD's SGE and UGE shredders (classes/OpenXdmod/Shredder/
Sge.php, Uge.php) where they define one:
- at least 43 fields (SGE 6.1's set, XDMoD's minimum); the first 39 are split on `:`; the
  category (`-l h_rt=...,h_vmem=... -pe mpi 9`) may itself contain colons (`-l cpu=24:00:00`),
  so it runs up to the last place where iow (a number), pe_taskid (`NONE` or `N.host`) and
  maxvmem (a number) follow; a record where they cannot be found is quarantined.
- UGE (8.2 on) writes the three epochs in milliseconds: a record whose epochs exceed 1e11 is read
  in milliseconds, floored to seconds as XDMoD's Uge.php does (APEL rounds instead, so an end at
  .629 s differs from APEL's by one second; the tests say where).
- one row per job task: (job_number, task_number, submission_time). XDMoD groups a job's
  records and takes MIN(submission_time), MIN(start_time) (started records), MAX(end_time) and
  COUNT(DISTINCT hostname). Here the records of one key are one row: a job rescheduled by SGE
  (several records, `failed` 25) keeps its first start and last end, and its state, exit status
  and line come from the record that ended last; the others are `merged`. Parallel-task records
  (pe_taskid `N.host`, tight integration) are steps, always `merged` (as Slurm steps are, even
  when their job's record sits in another chunk); their hosts count towards alloc_nodes and
  node_list of the job they belong to (same job and task number in the chunk).
- job_id: `job_number`, or `job_number_task` for array tasks (task_number > 0, SGE writes 0 for a
  job that is not an array); array_job_id / array_task_id accordingly.
- user = owner, group = group, job_name = job_name, partition = qname; account = project (SGE's
  share-tree project, `-P`) unless it is NONE, else account (`-A`, `sge` by default).
- times: submit = submission_time; start = start_time unless 0 (never started: start, run and
  the allocation stay null); end = end_time unless 0. wait = start - submit, run = end - start
  (XDMoD's wall_time), both >= 0. A record without a submission time (0) is quarantined: a
  submit time is never invented.
- cpus: greatest(slots, num_proc), XDMoD's cpu_count, as both request and allocation.
  timelimit = h_rt (else s_rt) of the category's `-l` list (seconds or [[h:]m:]s); "ran out"
  below means it ran at least its h_rt or its s_rt (SGE sends SIGUSR1 at s_rt: exit 138). Memory:
  the per-slot request (UGE's m_mem_free, else mem_free, h_vmem, s_vmem; sizes with SGE's units,
  k/m/g/t = 1000s, K/M/G/T = 1024s, no suffix = bytes) times the slots; alloc_mem_mib = the
  larger of that and the peak maxvmem over the job's records. GPUs: `gpu`/`gpus`/`ngpus` of the
  `-l` list (as a count for the job, as XDMoD stores it), else 0.
- state: failed = 0: exit_status 0 COMPLETED, else FAILED (TIMEOUT when it ran out and died
  of a signal, exit > 128). failed = 100 (ended by a signal: qdel, or a limit): TIMEOUT when it
  ran out, else CANCELLED. failed = 37 (qmaster enforced h_rt/h_cpu/h_vmem): TIMEOUT when it ran
  out, else FAILED. failed = 25 (rescheduled, no later record here): REQUEUED.
  Any other failed code: FAILED. Never started: FAILED (failed != 0), else CANCELLED.
- exit_code = exit_status verbatim.

`IDENTITY_FIELDS` names the fields of a raw record that identify people or their work (what the
quarantine must hash, SPEC §8); `identity_spans` finds them in any line, well-formed or not.
"""

from __future__ import annotations

import polars as pl
from metapilot.transforms.canonical import (
    ParseResult,
    conform,
    empty_jobs,
    empty_quarantine,
    quarantine_rows,
)
from metapilot.transforms.pbs import clock_seconds

SGE_FIELDS: tuple[str, ...] = (
    "qname", "hostname", "group", "owner", "job_name", "job_number", "account", "priority",
    "submission_time", "start_time", "end_time", "failed", "exit_status", "ru_wallclock",
    "ru_utime", "ru_stime", "ru_maxrss", "ru_ixrss", "ru_ismrss", "ru_idrss", "ru_isrss",
    "ru_minflt", "ru_majflt", "ru_nswap", "ru_inblock", "ru_oublock", "ru_msgsnd", "ru_msgrcv",
    "ru_nsignals", "ru_nvcsw", "ru_nivcsw", "project", "department", "granted_pe", "slots",
    "task_number", "cpu", "mem", "io", "category", "iow", "pe_taskid", "maxvmem", "arid",
    "ar_submission_time",
)
MIN_FIELDS = 43  # SGE 6.1's set, up to maxvmem (Open XDMoD's minimum)
N_FIXED = 39  # qname .. io: no colon inside; the category (index 39) may hold colons
MS_THRESHOLD = 10**11  # an epoch above this is in milliseconds (UGE >= 8.2)
MAX_EPOCH_S = 10**11
MAX_COUNT = 10**9
# Identity fields of a raw record (index -> kind), for hashing in the quarantine (SPEC §8).
IDENTITY_FIELDS: dict[int, str] = {2: "group", 3: "user", 4: "job_name", 6: "account", 31: "account"}

# category, iow, pe_taskid, maxvmem, rest: the category ends where the three fixed fields follow.
_TAIL_RE = (r"^(?s)(.*?):(\d+(?:\.\d+)?):(NONE|\d+\.[^:]+):(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?::(.*))?$")
_INT_RE = r"^-?\d{1,19}$"
_MEM_FACTOR: dict[str, float] = {
    "": 1.0, "b": 1.0, "k": 1e3, "K": 1024.0, "m": 1e6, "M": 1024.0**2, "g": 1e9, "G": 1024.0**3,
    "t": 1e12, "T": 1024.0**4,
}
_ENDED_BY_SIGNAL = 100
_LIMIT_ENFORCED = 37
_RESCHEDULED = 25


def _int(expr: pl.Expr) -> pl.Expr:
    """An integer field; anything else is null."""
    return pl.when(expr.str.contains(_INT_RE)).then(expr.cast(pl.Int64, strict=False))


def _resource(cat: pl.Expr, names: str) -> pl.Expr:
    """Value of the first `name=value` of a `-l` list in the category (names: regex alternation)."""
    return cat.str.extract(r"(?:^|[\s,])(?:" + names + r")=([^,\s]+)", 1)


def _mem_mib(expr: pl.Expr) -> pl.Expr:
    """SGE memory size to MiB (k/m/g/t decimal, K/M/G/T binary, bare bytes); INFINITY is null."""
    parts = expr.str.extract_groups(r"^(\d*\.?\d+)([kKmMgGtTbB]?)$")
    qty = parts.struct.field("1").cast(pl.Float64, strict=False)
    factor = parts.struct.field("2").replace_strict(_MEM_FACTOR, default=None, return_dtype=pl.Float64)
    mib = (qty * factor / (1 << 20)).round(0)
    return pl.when(mib.is_finite() & (mib < 2**53)).then(mib.cast(pl.Int64, strict=False))


def _epoch_s(expr: pl.Expr, is_ms: pl.Expr) -> pl.Expr:
    """Epoch seconds (milliseconds floored when `is_ms`); 0 and out-of-range values are null."""
    s = pl.when(is_ms).then(expr // 1000).otherwise(expr)
    return pl.when((s > 0) & (s < MAX_EPOCH_S)).then(s)


def _to_ts(expr: pl.Expr) -> pl.Expr:
    return (expr * 1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def _split_records(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(records with raw fields, quarantine, skipped): comments and near-empty lines are skipped."""
    skip = pl.col("line").str.starts_with("#") | (pl.col("line").str.strip_chars().str.len_chars() <= 1)
    skipped = lines.filter(skip).height
    body = lines.filter(~skip)
    if body.height == 0:
        return body, empty_quarantine(), skipped
    head = pl.col("line").str.splitn(":", N_FIXED + 1)
    df = body.lazy().with_columns(head.alias("_h")).with_columns(
        *[pl.col("_h").struct.field(f"field_{i}").alias(SGE_FIELDS[i]) for i in range(N_FIXED)],
        pl.col("_h").struct.field(f"field_{N_FIXED}").alias("_tail"),
    ).drop("_h").with_columns(
        pl.col("_tail").str.extract_groups(_TAIL_RE).alias("_t"),
    ).with_columns(
        pl.col("_t").struct.field("1").alias("category"),
        pl.col("_t").struct.field("2").alias("iow"),
        pl.col("_t").struct.field("3").alias("pe_taskid"),
        pl.col("_t").struct.field("4").alias("maxvmem"),
    ).drop("_t").collect()
    n_fields = pl.col("line").str.count_matches(":", literal=True) + 1
    reason = (
        pl.when(n_fields < MIN_FIELDS).then(pl.format(
            "SGE accounting record has {} colon-separated fields, at least {} expected "
            "(qname:hostname:group:owner:...:category:iow:pe_taskid:maxvmem)", n_fields, pl.lit(MIN_FIELDS)))
        .when(pl.col("maxvmem").is_null()).then(pl.lit(
            "SGE accounting record: no iow:pe_taskid:maxvmem fields after the category (expected a number, "
            "NONE or N.host, and a number)"))
        .when(_int(pl.col("job_number")).fill_null(0) <= 0).then(pl.format(
            "SGE job_number is not a positive integer: {}", pl.col("job_number").str.slice(0, 40).fill_null("")))
        .when(_int(pl.col("submission_time")).is_null()).then(pl.format(
            "SGE submission_time is not an epoch: {}", pl.col("submission_time").str.slice(0, 40).fill_null("")))
        .when(_int(pl.col("start_time")).is_null()).then(pl.format(
            "SGE start_time is not an epoch: {}", pl.col("start_time").str.slice(0, 40).fill_null("")))
        .when(_int(pl.col("end_time")).is_null()).then(pl.format(
            "SGE end_time is not an epoch: {}", pl.col("end_time").str.slice(0, 40).fill_null("")))
        .when(_int(pl.col("failed")).is_null()).then(pl.format(
            "SGE failed code is not an integer: {}", pl.col("failed").str.slice(0, 40).fill_null("")))
        .when(_int(pl.col("exit_status")).is_null()).then(pl.format(
            "SGE exit_status is not an integer: {}", pl.col("exit_status").str.slice(0, 40).fill_null("")))
        .when(~pl.col("slots").str.contains(r"^\d{1,9}$")).then(pl.format(
            "SGE slots is not a count: {}", pl.col("slots").str.slice(0, 40).fill_null("")))
        .when(~pl.col("task_number").str.contains(r"^\d{1,12}$")).then(pl.format(
            "SGE task_number is not a count: {}", pl.col("task_number").str.slice(0, 40).fill_null("")))
    )
    df = df.with_columns(reason.alias("_reason"))
    bad = df.filter(pl.col("_reason").is_not_null())
    q = quarantine_rows(bad["line_no"], bad["line"], bad["_reason"]) if bad.height else empty_quarantine()
    return df.filter(pl.col("_reason").is_null()).drop("_reason"), q, skipped


def _typed(records: pl.DataFrame) -> pl.DataFrame:
    """Per record: typed times and counts, requests from the category."""
    sub, start, end = (_int(pl.col(c)) for c in ("submission_time", "start_time", "end_time"))
    is_ms = (sub > MS_THRESHOLD) | (start > MS_THRESHOLD) | (end > MS_THRESHOLD)
    cat = pl.col("category")
    pe_req = cat.str.extract(r"(?:^|\s)-pe\s+\S+\s+(\d{1,9})(?:\s|$)", 1).cast(pl.Int64, strict=False)
    num_proc = _int(_resource(cat, "num_proc"))
    slots = pl.col("slots").cast(pl.Int64, strict=False)
    return records.lazy().with_columns(
        pl.col("job_number").cast(pl.Int64, strict=False).alias("_job"),
        pl.col("task_number").cast(pl.Int64, strict=False).alias("_task"),
        _epoch_s(sub, is_ms).alias("_sub"),
        _epoch_s(start, is_ms).alias("_start"),
        _epoch_s(end, is_ms).alias("_end"),
        is_ms.alias("_ms"),
        _int(pl.col("failed")).alias("_failed"),
        pl.col("exit_status").alias("_exit"),
        _int(pl.col("exit_status")).alias("_exit_int"),
        pl.max_horizontal(slots, pe_req, num_proc).clip(upper_bound=MAX_COUNT).alias("_cpus"),
        clock_seconds(_resource(cat, "h_rt")).alias("_h_rt"),
        clock_seconds(_resource(cat, "s_rt")).alias("_s_rt"),
        _mem_mib(_resource(cat, "m_mem_free|mem_free|h_vmem|s_vmem")).alias("_mem_per_slot"),
        _int(_resource(cat, "gpus?|ngpus")).alias("_gpus"),
        pl.col("maxvmem").cast(pl.Float64, strict=False).alias("_maxvmem"),
        (pl.col("pe_taskid") != "NONE").fill_null(False).alias("_is_task"),
        pl.when(pl.col("project") != "NONE").then(pl.col("project")).otherwise(pl.col("account")).alias("_account"),
    ).with_columns(
        pl.coalesce("_h_rt", "_s_rt").alias("_limit"),
        pl.min_horizontal(pl.when(pl.col("_h_rt") > 0).then(pl.col("_h_rt")),
                          pl.when(pl.col("_s_rt") > 0).then(pl.col("_s_rt"))).alias("_first_limit"),
    ).collect()


def _rows(masters: pl.DataFrame, tasks: pl.DataFrame) -> pl.DataFrame:
    """One row per (job, task, submission): aggregate its master records and its tasks' hosts."""
    key = ["_job", "_task", "_sub"]
    # The record that ended last carries the job's outcome (a rescheduled job's last attempt).
    ordered = masters.sort([*key, "_end", "line_no"], nulls_last=False)
    agg = ordered.group_by(key, maintain_order=True).agg(
        pl.col("line_no").last().alias("source_line"),
        pl.len().alias("_n"),
        pl.col("_start").min().alias("_start"),
        pl.col("_end").max().alias("_end"),
        *[pl.col(c).last() for c in ("qname", "owner", "group", "job_name", "_account", "_failed", "_exit",
                                     "_exit_int", "_limit", "_first_limit", "_mem_per_slot", "_gpus", "_ms")],
        pl.col("_cpus").max(),
        pl.col("_maxvmem").max(),
        pl.col("hostname"),
    )
    if tasks.height:
        # A task record belongs to the latest job of its number submitted before it started.
        t = tasks.select("_job", "_task", pl.col("_start").alias("_t_start"), pl.col("hostname").alias("_t_host"))
        cand = agg.select(*key).join(t, on=["_job", "_task"], how="inner")
        cand = cand.filter(pl.col("_t_start").is_null() | (pl.col("_sub") <= pl.col("_t_start")))
        best = cand.sort("_sub").group_by(["_job", "_task", "_t_start", "_t_host"], maintain_order=True).agg(
            pl.col("_sub").last())
        extra = best.group_by(key).agg(pl.col("_t_host").alias("_task_hosts"))
        agg = agg.join(extra, on=key, how="left", maintain_order="left").with_columns(
            pl.concat_list(pl.col("hostname"), pl.col("_task_hosts").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))))
            .alias("hostname")
        ).drop("_task_hosts")
    return agg


def _state(run: pl.Expr) -> pl.Expr:
    failed, exit_int, limit = pl.col("_failed"), pl.col("_exit_int"), pl.col("_first_limit")
    ran_out = (run >= limit).fill_null(False)  # reached h_rt or s_rt (s_rt sends SIGUSR1: exit 138)
    started = pl.col("_start").is_not_null()
    return (
        pl.when(~started).then(pl.when(failed != 0).then(pl.lit("FAILED")).otherwise(pl.lit("CANCELLED")))
        .when(failed == 0).then(
            pl.when(exit_int == 0).then(pl.lit("COMPLETED"))
            .when(ran_out & (exit_int > 128)).then(pl.lit("TIMEOUT"))
            .otherwise(pl.lit("FAILED")))
        .when(failed == _ENDED_BY_SIGNAL).then(pl.when(ran_out).then(pl.lit("TIMEOUT")).otherwise(pl.lit("CANCELLED")))
        .when(failed == _LIMIT_ENFORCED).then(pl.when(ran_out).then(pl.lit("TIMEOUT")).otherwise(pl.lit("FAILED")))
        .when(failed == _RESCHEDULED).then(pl.lit("REQUEUED"))
        .otherwise(pl.lit("FAILED"))
    )


def _canonical(rows: pl.DataFrame, cluster: str) -> pl.DataFrame:
    started = pl.col("_start").is_not_null()
    job, task = pl.col("_job").cast(pl.Utf8), pl.col("_task")
    is_array = task > 0
    run = pl.when(started & pl.col("_end").is_not_null()).then((pl.col("_end") - pl.col("_start")).clip(lower_bound=0))
    hosts = pl.col("hostname").list.eval(pl.element().filter(pl.element() != "")).list.unique(maintain_order=True)
    req_mem = (pl.col("_mem_per_slot").cast(pl.Float64) * pl.col("_cpus").fill_null(1).cast(pl.Float64))
    req_mem = pl.when(req_mem < 2**53).then(req_mem.cast(pl.Int64))
    vmem_mib = pl.when(pl.col("_maxvmem") > 0).then((pl.col("_maxvmem") / (1 << 20)).ceil().clip(upper_bound=2**53)
                                                   .cast(pl.Int64))
    out = rows.lazy().with_columns(run.alias("_run"), hosts.alias("_hosts"), req_mem.alias("_req_mem")).select(
        pl.lit(cluster).alias("cluster"),
        pl.when(is_array).then(job + "_" + task.cast(pl.Utf8)).otherwise(job).alias("job_id"),
        pl.when(is_array).then(job).alias("array_job_id"),
        pl.when(is_array).then(task).alias("array_task_id"),
        pl.when(pl.col("_ms")).then(pl.lit("uge")).otherwise(pl.lit("sge")).alias("source_format"),
        "source_line",
        pl.col("owner").alias("user_name"),
        pl.col("_account").alias("account_name"),
        pl.col("group").alias("group_name"),
        pl.col("job_name"),
        pl.col("qname").alias("partition"),
        _state(pl.col("_run")).alias("state"),
        pl.col("_exit").alias("exit_code"),
        _to_ts(pl.col("_sub")).alias("submit_time"),
        _to_ts(pl.col("_start")).alias("start_time"),
        _to_ts(pl.col("_end")).alias("end_time"),
        pl.when(started).then((pl.col("_start") - pl.col("_sub")).clip(lower_bound=0)).alias("wait_s"),
        pl.col("_run").alias("run_s"),
        pl.when(pl.col("_limit") > 0).then(pl.col("_limit")).alias("timelimit_s"),
        pl.col("_cpus").alias("req_cpus"),
        pl.col("_req_mem").alias("req_mem_mib"),
        pl.col("_gpus").fill_null(0).clip(upper_bound=MAX_COUNT).alias("req_gpus"),
        pl.when(started).then(pl.col("_cpus")).alias("alloc_cpus"),
        pl.when(started).then(pl.col("_hosts").list.len()).alias("alloc_nodes"),
        pl.when(started).then(pl.max_horizontal(pl.col("_req_mem"), vmem_mib)).alias("alloc_mem_mib"),
        pl.when(started).then(pl.col("_gpus").fill_null(0).clip(upper_bound=MAX_COUNT)).alias("alloc_gpus"),
        pl.when(started & (pl.col("_hosts").list.len() > 0)).then(pl.col("_hosts").list.join(",")).alias("node_list"),
    ).collect()
    return conform(out)


def parse_sge_chunk(chunk: pl.DataFrame, cluster: str) -> ParseResult:
    """Parse one chunk (`line_no`, `line`) of an SGE/UGE accounting file into canonical job rows."""
    lines = chunk.select(pl.col("line_no").cast(pl.Int64), pl.col("line").cast(pl.Utf8).fill_null(""))
    records, quarantine, skipped = _split_records(lines)
    if records.height == 0:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine, lines_read=lines.height, skipped=skipped)
    df = _typed(records)
    no_submit = df.filter(~pl.col("_is_task") & pl.col("_sub").is_null())
    if no_submit.height:
        quarantine = pl.concat([quarantine, quarantine_rows(
            no_submit["line_no"], no_submit["line"],
            "SGE record has no submission time (0 or out of range): a submit time is never invented")])
    masters = df.filter(~pl.col("_is_task") & pl.col("_sub").is_not_null())
    tasks = df.filter(pl.col("_is_task"))
    merged = tasks.height
    if masters.height == 0:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine.sort("line_no"), lines_read=lines.height,
                           merged=merged, skipped=skipped)
    rows = _rows(masters, tasks)
    merged += int(rows["_n"].sum() - rows.height)
    jobs = _canonical(rows, cluster).sort("source_line")
    return ParseResult(jobs=jobs, quarantine=quarantine.sort("line_no"), lines_read=lines.height,
                       merged=merged, skipped=skipped)


def identity_spans(line: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the identity fields of one raw record (IDENTITY_FIELDS), for hashing
    them in place; the fields that exist are found even in a malformed line (they all sit before
    the category, so colons inside it cannot shift them)."""
    out: list[tuple[int, int, str]] = []
    start = 0
    last = max(IDENTITY_FIELDS)
    for idx, field in enumerate(line.split(":", last + 1)):
        if idx > last:
            break
        end = start + len(field)
        kind = IDENTITY_FIELDS.get(idx)
        if kind and end > start:
            out.append((start, end, kind))
        start = end + 1
    return out


__all__ = ["IDENTITY_FIELDS", "SGE_FIELDS", "identity_spans", "parse_sge_chunk"]
