"""Parse IBM Spectrum LSF `lsb.acct` files into canonical job rows.

One record per line, blank-separated, strings in double quotes (`""` inside a string is one
`"`); the first field is the event type. Only JOB_FINISH records are jobs; other record types
(JOB_RESIZE, EVENT_ADRSV_FINISH, ... and lsb.events' JOB_NEW, JOB_START, ...) are skipped, as are
`#` comments and blank lines. Everything is vectorised with polars: the line is tokenised once
with one regex, and each field is read at its position, computed per line, since a JOB_FINISH
record holds variable-length arrays.

Layout of JOB_FINISH (lsb.acct(5), LSF 6 to 10.1; Open XDMoD's Lsf.php reads the same order):
0 "JOB_FINISH", 1 version, 2 event time (the job's end), 3 jobId, 4 userId, 5 options,
6 numProcessors, 7 submitTime, 8 beginTime, 9 termTime, 10 startTime, 11 userName, 12 queue,
13 resReq, 14 dependCond, 15 preExecCmd, 16 fromHost, 17 cwd, 18 inFile, 19 outFile, 20 errFile,
21 jobFile, 22 numAskedHosts, then that many askedHosts, numExHosts, that many execHosts
(`host` per slot, or `N*host` with LSF_HPC_EXTENSIONS=SHORT_EVENTFILE), then at e = their end:
jStatus, hostFactor, jobName, command, 19 lsfRusage fields, mailUser, projectName, exitStatus,
maxNumProcessors, loginShell, timeEvent, idx (e+29), maxRMem (KB), maxRSwap, ..., exitInfo
(e+38), ..., jobDescription (e+52), then (7.0 on) submitEXT: a count and key/value pairs,
numHostRusage and that many host entries (5 fields in 10.x; 6 seen in 9.1 files), then runLimit,
options3, avgMem, effectiveResReq, srcCluster, srcJobId, dstCluster, dstJobId, forwardTime,
flow_id, acJobWaitTime, totalProvisionTime, outdir, runTime, ... . A record may end early (older
versions, truncated writes): what is missing is null. Two quirks of real files are handled:
`02` for numAskedHosts with no numExHosts after the hosts (seen by aws-samples/hpc-cost-simulator;
the hosts are then the execution hosts), and 5- or 6-field host rusage entries (the width whose
following fields line up is used).

Mapping (SPEC §3/§4), after Open XDMoD's Lsf.php (end = event time, start = startTime, submit
= submitTime, cpus = numProcessors, nodes = distinct execution hosts, node_list = those hosts
without their `N*` prefix, exit_code = exitStatus, array index = idx):
- job_id: jobId, or `jobId_idx` for an array element (idx > 0); array_job_id/array_task_id.
- start: startTime; when it is 0 but runTime > 0 (a job that ran, its dispatch not logged), end
  - runTime, as aws-samples/hpc-cost-simulator does; else the job never started (null start,
  run and allocation). wait = start - submit, run = end - start, both >= 0. eligible = submit +
  ineligiblePendTime (LSF 10; 0 when not logged or -1), or beginTime (`bsub -b`) when later, as
  aws-samples/hpc-cost-simulator computes it.
- state from jStatus (bits: 64 DONE, 32 EXIT) and exitInfo (the TERM_ reason): DONE ->
  COMPLETED; EXIT of a job that never started -> CANCELLED; EXIT with TERM_RUNLIMIT (5) or
  TERM_CPULIMIT (12) -> TIMEOUT, TERM_DEADLINE (6) -> DEADLINE, TERM_PREEMPT (1) -> PREEMPTED,
  TERM_MEMLIMIT (16) or TERM_SWAP (20) -> OUT_OF_MEMORY, killed by owner or admin (8, 9, 14, 15)
  -> CANCELLED, requeued (10, 11) -> REQUEUED, any other -> FAILED; neither bit -> UNKNOWN.
- user = userName, account = projectName, partition = queue, job_name = jobName (empty -> null);
  no group in lsb.acct.
- req_cpus = numProcessors; alloc_cpus = the slots of the execution host list (else
  numProcessors); alloc_nodes, node_list from the distinct hosts. timelimit = runLimit when > 0.
  GPUs: ngpus_physical of effectiveResReq's rusage (times the hosts for `/host`), else 0, as
  XDMoD's gpu_count. Memory: the request's units depend on the site (LSF_UNIT_FOR_LIMITS), so it
  is not read; alloc_mem_mib = maxRMem (peak resident KB of the job) in MiB.
- a record with the same key (job_id, submit) later in the input replaces the earlier one
  (merged): a requeued job logs JOB_FINISH again with the same submit time.
- quarantined: unbalanced quotes, a first field that is not a quoted event type, a JOB_FINISH
  whose event time, jobId or submitTime is not a positive integer, or whose host lists do not
  line up with jStatus and hostFactor after them.

`identity_spans` finds the fields of a raw record that identify people or their work (user,
uid, paths, job name, command, mail, project) so the quarantine can hash them (SPEC §8).
"""

from __future__ import annotations

import re

import polars as pl
from metapilot.transforms.canonical import (
    ParseResult,
    conform,
    empty_jobs,
    empty_quarantine,
    quarantine_rows,
)

TOKEN_RE = r'"(?:[^"]|"")*"|[^\s"]+'
_TOKEN = re.compile(TOKEN_RE)
_INT_RE = r"^-?\d{1,19}$"
_NUM_RE = r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$"
_EVENT_RE = r'^"[A-Z][A-Z0-9_]*"$'
MAX_EPOCH_S = 10**11
MAX_COUNT = 10**9
N_HEAD = 23  # tokens up to and including numAskedHosts

# Positions after e (the jStatus token).
J_STATUS, HOST_FACTOR, JOB_NAME, COMMAND = 0, 1, 2, 3
MAIL_USER, PROJECT, EXIT_STATUS, MAX_NUM_PROC, IDX, MAX_RMEM = 23, 24, 25, 26, 29, 30
EXIT_INFO, CHARGED_SAAP, JOB_DESCRIPTION, SUBMIT_EXT = 38, 41, 52, 53
# Positions after r (the runLimit token, after host rusage).
R_EFFECTIVE_RES_REQ, R_OUTDIR, R_RUN_TIME, R_SUBCWD, R_NUM_NETWORK = 3, 12, 13, 14, 15
# Positions after n (the affinity token, after the network allocations): numAllocSlots, then
# that many allocSlots, then ineligiblePendTime.
N_NUM_ALLOC_SLOTS = 6

DONE, EXIT = 64, 32
TERM_STATES: dict[int, str] = {
    1: "PREEMPTED", 5: "TIMEOUT", 6: "DEADLINE", 12: "TIMEOUT", 16: "OUT_OF_MEMORY", 20: "OUT_OF_MEMORY",
    8: "CANCELLED", 9: "CANCELLED", 14: "CANCELLED", 15: "CANCELLED", 10: "REQUEUED", 11: "REQUEUED",
}
# Identity fields (SPEC §8): fixed positions, and positions after e / r.
IDENTITY_HEAD: dict[int, str] = {4: "user_id", 11: "user", 17: "path", 18: "path", 19: "path", 20: "path"}
IDENTITY_AFTER_E: dict[int, str] = {JOB_NAME: "job_name", COMMAND: "command", MAIL_USER: "mail",
                                    PROJECT: "account", CHARGED_SAAP: "account", JOB_DESCRIPTION: "job_name"}
IDENTITY_AFTER_R: dict[int, str] = {R_OUTDIR: "path", R_SUBCWD: "path"}


# --------------------------------------------------------------------------- token access


def _tok(i: pl.Expr | int) -> pl.Expr:
    return pl.col("_tok").list.get(i, null_on_oob=True)


def _unq(expr: pl.Expr) -> pl.Expr:
    """A token's value: quotes stripped and `""` unescaped (unquoted tokens as they are)."""
    quoted = expr.str.starts_with('"') & expr.str.ends_with('"') & (expr.str.len_bytes() >= 2)
    inner = expr.str.slice(1, expr.str.len_chars() - 2).str.replace_all('""', '"', literal=True)
    return pl.when(quoted).then(inner).otherwise(expr)


def _int(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr.str.contains(_INT_RE)).then(expr.cast(pl.Int64, strict=False))


def _is_num(expr: pl.Expr) -> pl.Expr:
    return expr.str.contains(_NUM_RE).fill_null(False)


def _all_quoted(start: pl.Expr, n: pl.Expr) -> pl.Expr:
    """The n tokens from `start` all exist and are quoted strings (host names)."""
    part = pl.col("_tok").list.slice(start, n)
    return (part.list.len() == n) & part.list.eval(pl.element().str.starts_with('"')).list.all().fill_null(True)


def _epoch(expr: pl.Expr) -> pl.Expr:
    return pl.when((expr > 0) & (expr < MAX_EPOCH_S)).then(expr)


def _to_ts(expr: pl.Expr) -> pl.Expr:
    return (expr * 1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


# --------------------------------------------------------------------------- records


def _classify(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(JOB_FINISH records with tokens, quarantine, skipped)."""
    blank_or_comment = pl.col("line").str.contains(r"^\s*(?:#|$)")
    skipped = lines.filter(blank_or_comment).height
    body = lines.filter(~blank_or_comment)
    if body.height == 0:
        return body.with_columns(pl.lit(None, dtype=pl.List(pl.Utf8)).alias("_tok")), empty_quarantine(), skipped
    body = body.with_columns(pl.col("line").str.extract_all(TOKEN_RE).alias("_tok"))
    first = pl.col("_tok").list.first()
    odd_quotes = (pl.col("line").str.count_matches('"', literal=True) % 2) == 1
    reason = (
        pl.when(odd_quotes).then(pl.lit('lsb.acct record has unbalanced double quotes (truncated or corrupted)'))
        .when(~first.str.contains(_EVENT_RE).fill_null(False)).then(pl.format(
            'not an lsb.acct record: it should start with a quoted event type such as "JOB_FINISH", found {}',
            pl.col("line").str.slice(0, 30).fill_null("")))
    )
    body = body.with_columns(reason.alias("_reason"))
    bad = body.filter(pl.col("_reason").is_not_null())
    q = quarantine_rows(bad["line_no"], bad["line"], bad["_reason"]) if bad.height else empty_quarantine()
    good = body.filter(pl.col("_reason").is_null()).drop("_reason")
    finish = good.filter(pl.col("_tok").list.first() == '"JOB_FINISH"')
    skipped += good.height - finish.height  # other record types: counted as skipped
    return finish, q, skipped


def _positions(df: pl.DataFrame) -> pl.DataFrame:
    """Where the variable-length parts put each field: e (jStatus) and r (runLimit), per line."""
    n_asked = _int(_tok(22))
    a = 23 + n_asked  # numExHosts
    n_ex = _int(_tok(pl.col("_a")))
    df = df.lazy().with_columns(n_asked.alias("_n_asked")).with_columns(a.alias("_a")).with_columns(
        n_ex.alias("_n_ex"),
    ).with_columns(
        (pl.col("_a") + 1 + pl.col("_n_ex")).alias("_e1"),
    ).with_columns(
        # usual layout: numExHosts, hosts, then jStatus (int) and hostFactor (number)
        ((pl.col("_n_asked") >= 0) & (pl.col("_n_ex") >= 0) & (pl.col("_n_ex") <= MAX_COUNT)
         & _all_quoted(pl.lit(23), pl.col("_n_asked").clip(0, MAX_COUNT))
         & _all_quoted(pl.col("_a") + 1, pl.col("_n_ex").clip(0, MAX_COUNT))
         & _int(_tok(pl.col("_e1"))).is_not_null() & _is_num(_tok(pl.col("_e1") + 1))).fill_null(False).alias("_ok1"),
        # numExHosts missing: jStatus right after the asked hosts, which are the execution hosts
        ((pl.col("_n_asked") >= 0) & _all_quoted(pl.lit(23), pl.col("_n_asked").clip(0, MAX_COUNT))
         & _int(_tok(pl.col("_a"))).is_not_null() & _is_num(_tok(pl.col("_a") + 1))).fill_null(False).alias("_ok2"),
    ).with_columns(
        pl.when(pl.col("_ok1")).then(pl.col("_e1")).when(pl.col("_ok2")).then(pl.col("_a")).alias("_e"),
        pl.when(pl.col("_ok1")).then(pl.col("_tok").list.slice(pl.col("_a") + 1, pl.col("_n_ex").clip(0, MAX_COUNT)))
        .when(pl.col("_ok2")).then(pl.col("_tok").list.slice(23, pl.col("_n_asked").clip(0, MAX_COUNT)))
        .alias("_hosts_raw"),
    ).with_columns(
        (pl.col("_e") + SUBMIT_EXT).alias("_x"),
    ).with_columns(
        (pl.col("_x") + 1 + 2 * _int(_tok(pl.col("_x"))).clip(0, MAX_COUNT)).alias("_s"),
    ).with_columns(
        _int(_tok(pl.col("_s"))).clip(0, MAX_COUNT).alias("_n_hr"),
    ).with_columns(
        (pl.col("_s") + 1 + 5 * pl.col("_n_hr")).alias("_r5"),
        (pl.col("_s") + 1 + 6 * pl.col("_n_hr")).alias("_r6"),
    )

    def tail_ok(r: str) -> pl.Expr:
        return (_int(_tok(pl.col(r))).is_not_null() & _int(_tok(pl.col(r) + 1)).is_not_null()
                & _int(_tok(pl.col(r) + 2)).is_not_null()
                & _tok(pl.col(r) + R_EFFECTIVE_RES_REQ).str.starts_with('"')).fill_null(False)

    df = df.with_columns(
        pl.when(tail_ok("_r5")).then(pl.col("_r5")).when(tail_ok("_r6")).then(pl.col("_r6")).alias("_r"),
    ).with_columns(
        (pl.col("_r") + R_NUM_NETWORK + 1 + 2 * _int(_tok(pl.col("_r") + R_NUM_NETWORK)).clip(0, MAX_COUNT)).alias("_n"),
    ).with_columns(
        _int(_tok(pl.col("_n") + N_NUM_ALLOC_SLOTS)).clip(0, MAX_COUNT).alias("_n_alloc"),
    ).with_columns(
        # ineligiblePendTime (LSF 10), where the fields before it are what they should be
        pl.when(pl.all_horizontal(*[_is_num(_tok(pl.col("_n") + i)) for i in range(1, N_NUM_ALLOC_SLOTS)])
                & _all_quoted(pl.col("_n") + N_NUM_ALLOC_SLOTS + 1, pl.col("_n_alloc")))
        .then(_int(_tok(pl.col("_n") + N_NUM_ALLOC_SLOTS + 1 + pl.col("_n_alloc")))).alias("_ineligible"),
    )
    return df.collect()


def _fields(df: pl.DataFrame) -> pl.DataFrame:
    e, r = pl.col("_e"), pl.col("_r")
    hosts = pl.col("_hosts_raw").list.eval(_unq(pl.element()))
    return df.lazy().with_columns(
        _int(_tok(2)).alias("_event"),
        _int(_tok(3)).alias("_job"),
        _int(_tok(6)).alias("_nproc"),
        _int(_tok(7)).alias("_submit"),
        _int(_tok(8)).alias("_begin"),
        _int(_tok(10)).alias("_start_raw"),
        _unq(_tok(11)).alias("_user"),
        _unq(_tok(12)).alias("_queue"),
        _int(_tok(e + J_STATUS)).alias("_jstatus"),
        _unq(_tok(e + JOB_NAME)).alias("_jobname"),
        _unq(_tok(e + PROJECT)).alias("_project"),
        _tok(e + EXIT_STATUS).alias("_exit"),
        _int(_tok(e + IDX)).alias("_idx"),
        _int(_tok(e + MAX_RMEM)).alias("_maxrmem"),
        _int(_tok(e + EXIT_INFO)).alias("_exit_info"),
        _int(_tok(r)).alias("_run_limit"),
        _unq(_tok(r + R_EFFECTIVE_RES_REQ)).alias("_eff_res_req"),
        _int(_tok(r + R_RUN_TIME)).alias("_run_time"),
        hosts.list.eval(pl.element().str.extract(r"^(\d+)\*", 1).cast(pl.Int64, strict=False).fill_null(1))
        .list.sum().alias("_slots"),
        hosts.list.eval(pl.element().str.replace(r"^\d+\*", "")).list.eval(pl.element().filter(pl.element() != ""))
        .list.unique(maintain_order=True).alias("_hosts"),
    ).collect()


def _quarantine_reason() -> pl.Expr:
    return (
        pl.when(_epoch(pl.col("_event")).is_null()).then(pl.format(
            "JOB_FINISH event time is not an epoch: {}", _tok(2).str.slice(0, 30).fill_null("")))
        .when(pl.col("_job").fill_null(0) <= 0).then(pl.format(
            "JOB_FINISH jobId is not a positive integer: {}", _tok(3).str.slice(0, 30).fill_null("")))
        .when(_epoch(pl.col("_submit")).is_null()).then(pl.format(
            "JOB_FINISH has no submit time (submitTime {}): a submit time is never invented", _tok(7).str.slice(0, 30).fill_null("")))
        .when(_int(_tok(10)).is_null()).then(pl.format(
            "JOB_FINISH startTime is not an epoch: {}", _tok(10).str.slice(0, 30).fill_null("")))
        .when(pl.col("_e").is_null()).then(pl.format(
            "JOB_FINISH host lists do not line up (numAskedHosts {}, then {}): jStatus and hostFactor not found "
            "after them (truncated or corrupted record)", _tok(22).str.slice(0, 12).fill_null(""), _tok(pl.col("_a")).str.slice(0, 30).fill_null("")))
    )


def _state(started: pl.Expr) -> pl.Expr:
    js, info = pl.col("_jstatus"), pl.col("_exit_info")
    term = info.replace_strict(TERM_STATES, default="FAILED", return_dtype=pl.Utf8)
    return (
        pl.when((js & DONE) != 0).then(pl.lit("COMPLETED"))
        .when(((js & EXIT) != 0) & ~started).then(pl.lit("CANCELLED"))
        .when((js & EXIT) != 0).then(term.fill_null("FAILED"))
        .otherwise(pl.lit("UNKNOWN"))
    )


def _canonical(df: pl.DataFrame, cluster: str) -> pl.DataFrame:
    end = _epoch(pl.col("_event"))
    start = (pl.when(pl.col("_start_raw") > 0).then(_epoch(pl.col("_start_raw")))
             .when(pl.col("_run_time") > 0).then(_epoch(pl.col("_event") - pl.col("_run_time"))))
    df = df.lazy().with_columns(start.alias("_start"), end.alias("_end"))
    started = pl.col("_start").is_not_null()
    job, idx = pl.col("_job").cast(pl.Utf8), pl.col("_idx").fill_null(0)
    is_array = idx > 0
    ngpus = pl.col("_eff_res_req").str.extract(r"ngpus_physical=(\d+(?:\.\d+)?)", 1).cast(pl.Float64, strict=False)
    per_host = pl.col("_eff_res_req").str.contains(r"ngpus_physical=[\d.]+/host").fill_null(False)
    n_hosts = pl.col("_hosts").list.len()
    gpus = (pl.when(per_host).then(ngpus * n_hosts.clip(lower_bound=1)).otherwise(ngpus)).round(0)
    gpus = pl.when(gpus.is_finite() & (gpus >= 0) & (gpus <= MAX_COUNT)).then(gpus.cast(pl.Int64)).otherwise(0)
    slots = pl.when(pl.col("_slots") > 0).then(pl.col("_slots")).otherwise(pl.col("_nproc"))
    out = df.with_columns(gpus.alias("_gpus")).select(
        pl.lit(cluster).alias("cluster"),
        pl.when(is_array).then(job + "_" + idx.cast(pl.Utf8)).otherwise(job).alias("job_id"),
        pl.when(is_array).then(job).alias("array_job_id"),
        pl.when(is_array).then(idx).alias("array_task_id"),
        pl.lit("lsf").alias("source_format"),
        pl.col("line_no").alias("source_line"),
        pl.when(pl.col("_user") != "").then(pl.col("_user")).alias("user_name"),
        pl.when(pl.col("_project") != "").then(pl.col("_project")).alias("account_name"),
        pl.when(pl.col("_jobname") != "").then(pl.col("_jobname")).alias("job_name"),
        pl.when(pl.col("_queue") != "").then(pl.col("_queue")).alias("partition"),
        _state(started).alias("state"),
        pl.col("_exit").alias("exit_code"),
        _to_ts(_epoch(pl.col("_submit"))).alias("submit_time"),
        _to_ts(pl.max_horizontal(pl.col("_submit") + pl.col("_ineligible").clip(lower_bound=0).fill_null(0),
                                 _epoch(pl.col("_begin")))).alias("eligible_time"),
        _to_ts(pl.col("_start")).alias("start_time"),
        _to_ts(pl.col("_end")).alias("end_time"),
        pl.when(started).then((pl.col("_start") - pl.col("_submit")).clip(lower_bound=0)).alias("wait_s"),
        pl.when(started).then((pl.col("_end") - pl.col("_start")).clip(lower_bound=0)).alias("run_s"),
        pl.when(pl.col("_run_limit") > 0).then(pl.col("_run_limit")).alias("timelimit_s"),
        pl.when(pl.col("_nproc") >= 0).then(pl.col("_nproc").clip(upper_bound=MAX_COUNT)).alias("req_cpus"),
        pl.col("_gpus").alias("req_gpus"),
        pl.when(started).then(slots.clip(0, MAX_COUNT)).alias("alloc_cpus"),
        pl.when(started & (n_hosts > 0)).then(n_hosts).alias("alloc_nodes"),
        pl.when(started & (pl.col("_maxrmem") > 0)).then((pl.col("_maxrmem") + 1023) // 1024).alias("alloc_mem_mib"),
        pl.when(started).then(pl.col("_gpus")).alias("alloc_gpus"),
        pl.when(started & (n_hosts > 0)).then(pl.col("_hosts").list.join(",")).alias("node_list"),
    ).collect()
    return conform(out)


def parse_lsf_chunk(chunk: pl.DataFrame, cluster: str) -> ParseResult:
    """Parse one chunk (`line_no`, `line`) of lsb.acct into canonical job rows."""
    lines = chunk.select(pl.col("line_no").cast(pl.Int64), pl.col("line").cast(pl.Utf8).fill_null(""))
    finish, quarantine, skipped = _classify(lines)
    if finish.height == 0:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine, lines_read=lines.height, skipped=skipped)
    df = _fields(_positions(finish))
    df = df.with_columns(_quarantine_reason().alias("_reason"))
    bad = df.filter(pl.col("_reason").is_not_null())
    if bad.height:
        quarantine = pl.concat([quarantine, quarantine_rows(bad["line_no"], bad["line"], bad["_reason"])])
    jobs = _canonical(df.filter(pl.col("_reason").is_null()), cluster)
    merged = 0
    if jobs.height:
        last = jobs.select(pl.struct("job_id", "submit_time").is_last_distinct()).to_series()
        merged = int((~last).sum())
        jobs = jobs.filter(last)
    return ParseResult(jobs=jobs.sort("source_line"), quarantine=quarantine.sort("line_no"),
                       lines_read=lines.height, merged=merged, skipped=skipped)


# --------------------------------------------------------------------------- identity fields


def _unquoted_int(tok: str | None) -> int | None:
    return int(tok) if tok is not None and re.fullmatch(r"-?\d{1,9}", tok) else None


def identity_spans(line: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the identity fields of one raw record, quotes excluded.

    A JOB_FINISH whose layout is found gets its user, uid, paths, job name, command, mail and
    project fields; for anything else every quoted string after the event type and version is
    listed (when the layout is unknown, hashing too much is the safe side)."""
    toks = list(_TOKEN.finditer(line))

    def span(m: re.Match, kind: str) -> tuple[int, int, str] | None:
        s, e = m.span()
        if m.group().startswith('"') and e - s >= 2:
            s, e = s + 1, e - 1
        return (s, e, kind) if e > s else None

    def all_quoted() -> list[tuple[int, int, str]]:
        return [sp for m in toks[2:] if m.group().startswith('"') and (sp := span(m, "text"))]

    if len(toks) < N_HEAD or toks[0].group() != '"JOB_FINISH"':
        return all_quoted()
    text = [m.group() for m in toks]
    n_asked = _unquoted_int(text[22])
    if n_asked is None or n_asked < 0:
        return all_quoted()
    a = 23 + n_asked

    def quoted(i: int, n: int) -> bool:
        return i + n <= len(text) and all(t.startswith('"') for t in text[i:i + n])

    def num(i: int) -> bool:
        return i < len(text) and re.fullmatch(_NUM_RE, text[i]) is not None

    n_ex = _unquoted_int(text[a]) if a < len(text) else None
    e = None
    if n_ex is not None and 0 <= n_ex < len(text) and quoted(a + 1, n_ex) and _unquoted_int(
            text[a + 1 + n_ex] if a + 1 + n_ex < len(text) else None) is not None and num(a + 2 + n_ex):
        e = a + 1 + n_ex
    elif n_ex is not None and num(a + 1):
        e = a
    if e is None:
        return all_quoted()
    wanted: dict[int, str] = dict(IDENTITY_HEAD)
    wanted.update({e + k: v for k, v in IDENTITY_AFTER_E.items()})
    x = e + SUBMIT_EXT
    n_ext = _unquoted_int(text[x]) if x < len(text) else None
    if n_ext is not None and n_ext >= 0:
        s = x + 1 + 2 * n_ext
        n_hr = _unquoted_int(text[s]) if s < len(text) else None
        if n_hr is not None and n_hr >= 0:
            for width in (5, 6):
                r = s + 1 + width * n_hr
                if all(_unquoted_int(text[i] if i < len(text) else None) is not None for i in (r, r + 1, r + 2)) \
                        and r + 3 < len(text) and text[r + 3].startswith('"'):
                    wanted.update({r + k: v for k, v in IDENTITY_AFTER_R.items()})
                    break
    out = []
    for i, kind in sorted(wanted.items()):
        if i < len(toks) and (sp := span(toks[i], kind)):
            out.append(sp)
    return out


__all__ = ["IDENTITY_HEAD", "TOKEN_RE", "identity_spans", "parse_lsf_chunk"]
