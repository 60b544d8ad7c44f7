"""Parse Slurm `sacct` text output (parsable, any delimiter) into canonical job rows (SPEC §3, §4).

Works on chunks of numbered lines from `transforms.lines.iter_line_chunks`, fully vectorised:
each line is split once with `splitn` semantics (so a delimiter inside the last field, the job
name, survives), then every field is parsed by the expressions of `transforms.slurm_fields`,
each distinct value of a low-cardinality field (TRES, ReqMem, State, Timelimit) only once.

Accounting per chunk: blank lines, `#` comments and header lines are `skipped`; steps
(`123.batch`, `123_4.0`, `123+1.extern`) are `merged` into their job (they add nothing the job
line lacks, so their fields are not read, and a step whose job line sits in another chunk is
still merged); malformed lines are quarantined with a precise reason; the rest are job rows. A
pending array range `123_[1-3,7]` is one line but one row per task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import polars as pl
from metapilot.transforms import slurm_fields as sf
from metapilot.transforms.canonical import (
    ENDED_STATES,
    ParseResult,
    conform,
    empty_jobs,
    empty_quarantine,
)

# Open XDMoD's headerless 26 fields (its Slurm shredder, current versions).
XDMOD_FIELDS: list[str] = [
    "jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user", "uid",
    "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes", "ncpus",
    "reqcpus", "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
]
# Older Open XDMoD (before QOS was collected): no qos, but ReqGRES before ReqTRES. Same count.
XDMOD_REQGRES_FIELDS: list[str] = [
    "jobid", "jobidraw", "cluster", "partition", "account", "group", "gid", "user", "uid",
    "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes", "ncpus",
    "reqcpus", "reqmem", "reqgres", "reqtres", "alloctres", "timelimit", "nodelist", "jobname",
]
# aws-samples/hpc-cost-simulator's SlurmLogParser; its v2 appends Partition.
HPC_COST_SIM_FIELDS: list[str] = [
    "state", "jobid", "reqcpus", "reqmem", "reqnodes", "constraints", "submit", "eligible", "start",
    "elapsed", "suspended", "end", "exitcode", "derivedexitcode", "allocnodes", "ncpus", "maxdiskread",
    "maxdiskwrite", "maxpages", "maxrss", "maxvmsize", "cputime", "usercpu", "systemcpu", "totalcpu",
]
HPC_COST_SIM_V2_FIELDS: list[str] = HPC_COST_SIM_FIELDS + ["partition"]

# sacct's own column names (lower-cased) that we read; everything else is carried and ignored.
KNOWN_FIELDS: frozenset[str] = frozenset(
    "jobid jobidraw cluster partition qos account group user submit eligible start end elapsed "
    "elapsedraw exitcode state nnodes allocnodes ncpus alloccpus reqcpus reqnodes reqmem reqtres "
    "alloctres reqgres allocgres timelimit timelimitraw nodelist jobname".split()
)

NEVER_RAN_NODES = ("None assigned", "(null)")
# States whose printed End is not an end (REQUEUED is not here: with --duplicates its record is
# a finished run, with a real end).
NOT_ENDED_STATES = ("PENDING", "RUNNING", "SUSPENDED", "RESIZING", "CONFIGURING")
_ALLOC_COLUMNS = ("alloc_cpus", "alloc_nodes", "alloc_mem_mib", "alloc_gpus")
_REASON_MAX = 60  # characters of a bad value quoted in a quarantine reason


@dataclass
class SacctConfig:
    """How to read one sacct file.

    `fields` are sacct column names in file order (case-insensitive); None means Open XDMoD's
    26. `trailing_delimiter` is `sacct -p` (every line ends with the delimiter). `timezone` is
    the zone sacct printed times in (the cluster's local time). `layout` only says what the
    sniffer recognised, for the ingest manifest. `min_fields` lets lines stop before optional
    trailing columns (the hpc-cost-simulator's files mix lines with and without Partition).
    """

    cluster: str = "unknown"
    delimiter: str = "|"
    fields: list[str] | None = None
    timezone: str = "UTC"
    header: bool = False
    trailing_delimiter: bool = False
    layout: str = "xdmod"
    min_fields: int | None = None  # lines may omit trailing optional columns down to this count

    def __post_init__(self) -> None:
        if not self.delimiter:
            raise ValueError("sacct delimiter must be a non-empty string")

    def names(self) -> list[str]:
        """Lower-cased column names; duplicates after the first are renamed so they are ignored."""
        seen: set[str] = set()
        out: list[str] = []
        for i, f in enumerate(self.fields if self.fields is not None else XDMOD_FIELDS):
            name = f.strip().lower()
            if name in seen or not name:
                name = f"_col{i}"
            seen.add(name)
            out.append(name)
        return out


# ---------------------------------------------------------------------------------------------
# Sniffing


_JOB_ID_RE = re.compile(sf.JOB_ID_PATTERN)
_STATE_RE = re.compile(r"^[A-Z_]+( by \d+)?$")


def _is_time(s: str) -> bool:
    try:
        datetime.strptime(s, sf.SACCT_TIME_FORMAT)
        return True
    except ValueError:
        return False


def _fits(cells: list[str], layout: str) -> bool:
    """Does one split line look like a headerless layout? Content decides, not only the count."""
    if layout == "xdmod":
        return bool(_JOB_ID_RE.match(cells[0])) and _is_time(cells[10]) and not _is_time(cells[9])
    if layout == "xdmod-reqgres":
        return bool(_JOB_ID_RE.match(cells[0])) and _is_time(cells[9])
    if layout == "hpc-cost-sim":
        return bool(_STATE_RE.match(cells[0])) and bool(_JOB_ID_RE.match(cells[1])) and _is_time(cells[6])
    return False


# layout -> (fields, fewest fields a line may have)
_HEADERLESS: dict[str, tuple[list[str], int]] = {
    "xdmod": (XDMOD_FIELDS, len(XDMOD_FIELDS)),
    "xdmod-reqgres": (XDMOD_REQGRES_FIELDS, len(XDMOD_REQGRES_FIELDS)),
    "hpc-cost-sim": (HPC_COST_SIM_V2_FIELDS, len(HPC_COST_SIM_FIELDS)),
}


def _split_for(line: str, delim: str, names: list[str], min_fields: int, trailing: bool) -> list[str] | None:
    """Split as the parser will; None if the count is wrong (only a last JobName may hold extras)."""
    if trailing:
        if not line.endswith(delim):
            return None
        line = line[: -len(delim)]
    n = len(names)
    found = line.count(delim) + 1
    if found < min_fields or (found > n and names[-1] != "jobname"):
        return None
    return line.split(delim, n - 1)


def _guess_headerless(data: list[str], delim: str) -> SacctConfig | None:
    """Find the headerless layout that the first line, or half of the first 20, fit.

    The content checks are specific (a job id, ISO times at the right places), so a few
    corrupt lines near the top do not hide an otherwise good file.
    """
    sample = data[:20]
    # `sacct -p` ends every line with the delimiter; a last JobName field would swallow it.
    trailings = (True, False) if all(line.endswith(delim) for line in sample) else (False,)
    for layout, (names, min_fields) in _HEADERLESS.items():
        for trailing in trailings:
            ok = [(c := _split_for(line, delim, names, min_fields, trailing)) is not None and _fits(c, layout) for line in sample]
            if ok[0] or sum(ok) >= 0.5 * len(sample):
                return SacctConfig(
                    delimiter=delim, fields=list(names), header=False, trailing_delimiter=trailing,
                    layout=layout, min_fields=min_fields if min_fields < len(names) else None,
                )
    return None


def sniff_sacct(head_lines: list[str], delimiter: str | None = None, fields: list[str] | None = None) -> SacctConfig | None:
    """Recognise sacct output from its first lines; None if it is not sacct.

    Handles `--parsable2` with a header (columns by name, any order, any delimiter), `-p`
    (trailing delimiter), Open XDMoD's headerless 26 fields (and its older ReqGRES variant), the
    hpc-cost-simulator's 25/26 headerless fields, and user-given `fields`. A header without
    Submit is still recognised: its lines are then quarantined by the parser with that reason.
    The returned config's cluster and timezone are defaults for the caller to set.
    """
    data = [ln.rstrip("\r") for ln in head_lines if ln.strip() and not ln.lstrip().startswith("#")]
    delims = [delimiter] if delimiter else ["|", "\t", ",", ";"]  # an empty one means "find it"
    if fields is not None:
        names = [f.strip().lower() for f in fields]
        if not data:
            return SacctConfig(delimiter=delims[0], fields=list(fields), layout="user")
        for d in delims:
            cells = data[0].split(d)
            trailing = len(cells) == len(names) + 1 and cells[-1] == ""
            if len(cells) >= len(names) or trailing:
                header = [c.strip().lower() for c in (cells[:-1] if trailing else cells)] == names
                return SacctConfig(delimiter=d, fields=list(fields), header=header, trailing_delimiter=trailing, layout="user")
        return SacctConfig(delimiter=delims[0], fields=list(fields), layout="user")
    if not data:
        return None
    for d in delims:
        cells = data[0].split(d)
        if len(cells) < 2:
            continue
        lowered = [c.strip().lower() for c in cells]
        if "jobid" in lowered or "jobidraw" in lowered:
            trailing = lowered[-1] == ""
            names = cells[:-1] if trailing else cells
            return SacctConfig(
                delimiter=d, fields=[c.strip() for c in names], header=True, trailing_delimiter=trailing, layout="header"
            )
        guess = _guess_headerless(data, d)
        if guess is not None:
            return guess
    return None


# ---------------------------------------------------------------------------------------------
# Parsing


def _empty_result(lines_read: int, skipped: int, quarantine: pl.DataFrame | None = None) -> ParseResult:
    q = quarantine if quarantine is not None else empty_quarantine()
    return ParseResult(jobs=empty_jobs(), quarantine=q, lines_read=lines_read, skipped=skipped)


def _split(body: pl.DataFrame, cfg: SacctConfig, names: list[str]) -> pl.DataFrame:
    """Split each line into the named fields we read, with `splitn` semantics: the last field
    keeps any extra delimiters (a `|` in a job name). Adds `_nf`, the number of fields found.

    One `split` into a list and positional gets is cheaper than `splitn` into a struct, and
    columns we never read (a 108-column export) are not materialised.
    """
    delim = cfg.delimiter
    line = pl.col("line")
    if cfg.trailing_delimiter:
        line = line.str.strip_suffix(delim)
    n = len(names)
    parts = pl.col("_parts")
    cols = [parts.list.get(i, null_on_oob=True).alias(name) for i, name in enumerate(names[:-1]) if name in KNOWN_FIELDS]
    if names[-1] in KNOWN_FIELDS:
        tail = parts.list.slice(n - 1).list.join(delim)
        cols.append(pl.when(parts.list.len() >= n).then(tail).alias(names[-1]))
    out = body.with_columns(line.str.split(delim).alias("_parts"))
    return out.with_columns(parts.list.len().cast(pl.Int64).alias("_nf"), *cols).drop("_parts")


def _parse_job_ids(col: pl.Expr) -> pl.Expr:
    """`slurm_fields.parse_job_id`, with the common case cheap: a plain number (most job lines)
    is its own base; only the other ids (arrays, het jobs, steps, garbage) go through the regex
    (null text costs it nothing)."""
    plain = col.str.contains(r"^\d+$")
    g = sf.parse_job_id(pl.when(plain).then(pl.lit(None, dtype=pl.Utf8)).otherwise(col))
    return pl.struct(
        pl.when(plain).then(col).otherwise(g.struct.field("base")).alias("base"),
        *[g.struct.field(f) for f in ("task", "spec", "het", "step")],
    )


def _col(name: str, present: set[str]) -> pl.Expr:
    """A field's raw text, or null text when the file has no such column."""
    return pl.col(name) if name in present else pl.lit(None, dtype=pl.Utf8)


def _quarantined(names: list[str], cfg: SacctConfig, bad_ranges: bool) -> pl.Expr:
    """Whether a line has a `_quarantine_reason`: plain comparisons over every line, so that the
    reasons (text formatted for each branch of every row, and the submit time read again) are
    made for the few lines that have one."""
    n = len(names)
    least = min(cfg.min_fields or n, n)
    nf = pl.col("_nf")
    bad = nf < least
    if names[-1] != "jobname":
        bad = bad | (nf > n)
    no_step = pl.col("_id").struct.field("step").is_null()
    unusable = pl.col("_submit").is_null()
    if bad_ranges:
        unusable = unusable | pl.col("_range_reason").is_not_null()
    return (bad | pl.col("_id").struct.field("base").is_null() | (no_step & unusable)).fill_null(True)


def _quarantine_reason(names: list[str], cfg: SacctConfig, bad_ranges: bool) -> pl.Expr:
    """Why a line cannot be a job or a step, in order of precedence; null when it is fine."""
    n = len(names)
    least = min(cfg.min_fields or n, n)
    expected = str(n) if least == n else f"{least} to {n}"
    last_is_name = names[-1] == "jobname"
    nf = pl.col("_nf")
    jid = pl.col("jobid").str.strip_chars()
    reason = pl.when(nf < least).then(pl.format("expected {} fields, found {}", pl.lit(expected), nf))
    if not last_is_name:
        reason = reason.when(nf > n).then(pl.format("expected {} fields, found {}", pl.lit(expected), nf))
    reason = (
        reason.when(pl.col("_id").struct.field("base").is_null())
        .then(pl.format("bad job id '{}'", jid.str.slice(0, _REASON_MAX)))
        .when(pl.col("_id").struct.field("step").is_not_null())
        .then(pl.lit(None, dtype=pl.Utf8))
        .when(pl.col("_submit").is_null() & sf.parse_naive_time(pl.col("submit")).is_not_null())
        .then(pl.format("submit time '{}' does not exist in time zone {}: clocks skipped that hour (daylight-saving "
                        "spring-forward); check --timezone", pl.col("submit").str.slice(0, _REASON_MAX), pl.lit(cfg.timezone)))
        .when(pl.col("_submit").is_null())
        .then(pl.format("bad submit time '{}'", pl.col("submit").fill_null("").str.slice(0, _REASON_MAX)))
    )
    if bad_ranges:
        reason = reason.when(pl.col("_range_reason").is_not_null()).then(pl.col("_range_reason"))
    return reason.otherwise(pl.lit(None, dtype=pl.Utf8))


def _by_value(
    df: pl.DataFrame, src: str, present: set[str], exprs: dict[str, pl.Expr], dtypes: dict[str, pl.DataType]
) -> pl.DataFrame:
    """Add columns computed from one raw field, evaluating each distinct value once.

    sacct fields such as TRES strings, ReqMem, State or Timelimit take a handful of distinct
    values over millions of lines, and their regexes dominate the parse time; parsing the
    distinct values and joining back is several times faster. `exprs` may only read `src`.
    Without the field the columns are null.
    """
    if src not in present:
        return df.with_columns([pl.lit(None, dtype=dtypes[name]).alias(name) for name in exprs])
    return df.hstack(_per_value(df.get_column(src), exprs, dtypes))


def _per_value(s: pl.Series, exprs: dict[str, pl.Expr], dtypes: dict[str, pl.DataType]) -> list[pl.Series]:
    """`exprs` over the series `s` (named as they read it), each distinct value evaluated once.

    The distinct values come from a categorical of the chunk's own (dense codes 0..k-1, freed with
    the chunk, not the process-wide string cache), and each row picks its result by code: one hash
    pass over the column and a gather, several times cheaper than `unique` + a join on text. A
    null row gets the result for null (the extra last value)."""
    cats = pl.Categories.random()
    cat = s.cast(pl.Categorical(cats))  # keep it alive: its categories live as long as it does
    codes = cat.to_physical()
    distinct = cats.to_series()
    if len(distinct) <= (codes.max() or 0):  # not dense after all: the plain way
        values = s.to_frame().unique().with_columns([e.cast(dtypes[n]).alias(n) for n, e in exprs.items()])
        joined = s.to_frame().join(values, on=s.name, how="left", nulls_equal=True, maintain_order="left")
        return joined.drop(s.name).get_columns()
    values = pl.concat([distinct, pl.Series([None], dtype=pl.Utf8)]).alias(s.name).to_frame()
    out = values.select([e.cast(dtypes[n]).alias(n) for n, e in exprs.items()])
    idx = codes.fill_null(len(distinct)) if codes.null_count() else codes
    del cat
    return out[idx].get_columns()


def _tres_columns(prefix: str) -> tuple[dict[str, pl.Expr], dict[str, pl.DataType]]:
    """What a TRES string yields: cpus, nodes, memory, GPUs, GPU type."""
    c = pl.col(f"{prefix}tres")
    exprs = {
        f"_{prefix}_cpu": sf.tres_count(c, "cpu"),
        f"_{prefix}_node": sf.tres_count(c, "node"),
        f"_{prefix}_mem": sf.tres_mem_mib(c),
        f"_{prefix}_gpus": sf.tres_gpus(c),
        f"_{prefix}_gtype": sf.tres_gpu_type(c),
    }
    dtypes = {k: (pl.Utf8 if k.endswith("gtype") else pl.Int64) for k in exprs}
    return exprs, dtypes


def _derive_jobs(jobs: pl.DataFrame, present: set[str], cfg: SacctConfig) -> pl.DataFrame:
    """Canonical columns from the raw fields of job lines."""
    tz = cfg.timezone
    blank = sf.null_if_blank
    t = lambda name: sf.parse_time(_col(name, present), tz)  # noqa: E731
    idf = lambda f: pl.col("_id").struct.field(f)  # noqa: E731
    node_raw = _col("nodelist", present).str.strip_chars()
    num = lambda name: sf.parse_int(_col(name, present))  # noqa: E731
    i64, utf8 = pl.Int64, pl.Utf8
    fall_back = not sf.is_utc(tz)

    st = pl.col("state")
    jobs = _by_value(
        jobs, "state", present,
        {"_state": sf.normalize_state(st), "_known_state": sf.state_is_known(st)},
        {"_state": utf8, "_known_state": pl.Boolean},
    )
    jobs = _by_value(jobs, "timelimit", present, {"_tl": sf.parse_duration(pl.col("timelimit"))}, {"_tl": i64})
    jobs = _by_value(jobs, "timelimitraw", present, {"_tlraw": sf.parse_raw_minutes(pl.col("timelimitraw"))}, {"_tlraw": i64})
    jobs = _by_value(jobs, "elapsed", present, {"_el": sf.parse_duration(pl.col("elapsed"))}, {"_el": i64})
    rm = pl.col("reqmem")
    jobs = _by_value(
        jobs, "reqmem", present,
        {"_rm_mib": sf.reqmem_base_mib(rm), "_rm_per": sf.reqmem_per(rm)},
        {"_rm_mib": pl.Float64, "_rm_per": utf8},
    )
    for prefix in ("req", "alloc"):
        exprs, dtypes = _tres_columns(prefix)
        jobs = _by_value(jobs, f"{prefix}tres", present, exprs, dtypes)
        g = pl.col(f"{prefix}gres")
        jobs = _by_value(
            jobs, f"{prefix}gres", present,
            {f"_{prefix}g_gpus": sf.gres_gpus(g), f"_{prefix}g_gtype": sf.gres_gpu_type(g)},
            {f"_{prefix}g_gpus": i64, f"_{prefix}g_gtype": utf8},
        )

    jobs = jobs.with_columns(
        pl.coalesce(blank(_col("cluster", present)), pl.lit(cfg.cluster)).alias("cluster"),
        pl.when(idf("task").is_not_null() | idf("spec").is_not_null()).then(idf("base")).alias("array_job_id"),
        idf("task").cast(i64, strict=False).alias("array_task_id"),
        pl.when(idf("het").is_not_null()).then(idf("base")).alias("het_job_id"),
        idf("het").cast(i64, strict=False).alias("het_offset"),
        pl.col("jobid").str.strip_chars().alias("job_id"),
        pl.lit("sacct").alias("source_format"),
        pl.col("line_no").alias("source_line"),
        blank(_col("user", present)).alias("user_name"),
        blank(_col("account", present)).alias("account_name"),
        blank(_col("group", present)).alias("group_name"),
        blank(_col("jobname", present)).alias("job_name"),
        blank(_col("partition", present)).alias("partition"),
        blank(_col("qos", present)).alias("qos"),
        pl.col("_known_state").fill_null(False),
        blank(_col("exitcode", present)).alias("exit_code"),
        pl.col("_submit").alias("submit_time"),
        t("eligible").alias("eligible_time"),
        t("start").alias("_start"),
        t("end").alias("_end"),
        *([sf.parse_time(_col("start", present), tz, ambiguous="latest").alias("_start_late"),
           sf.parse_time(_col("end", present), tz, ambiguous="latest").alias("_end_late")] if fall_back else []),
        pl.coalesce("_el", num("elapsedraw")).alias("_elapsed"),
        pl.coalesce("_tl", "_tlraw").alias("timelimit_s"),
        pl.coalesce(num("reqcpus"), "_req_cpu").alias("req_cpus"),
        pl.coalesce(num("reqnodes"), "_req_node").alias("req_nodes"),
        pl.coalesce(num("ncpus"), num("alloccpus"), "_alloc_cpu").alias("alloc_cpus"),
        pl.coalesce(num("nnodes"), num("allocnodes"), "_alloc_node").alias("alloc_nodes"),
        pl.col("_alloc_mem").alias("alloc_mem_mib"),
        pl.coalesce("_req_gpus", "_reqg_gpus").alias("req_gpus"),
        pl.coalesce("_alloc_gpus", "_allocg_gpus").alias("alloc_gpus"),
        pl.coalesce("_alloc_gtype", "_req_gtype", "_allocg_gtype", "_reqg_gtype").alias("gpu_type"),
        pl.when(node_raw.is_in(list(NEVER_RAN_NODES)) | (node_raw == "")).then(None).otherwise(node_raw).alias("node_list"),
        node_raw.is_in(list(NEVER_RAN_NODES)).fill_null(False).alias("_none_assigned"),
        (pl.col("_rm_mib").is_not_null() | blank(_col("reqmem", present)).is_null()).alias("_reqmem_ok"),
    ).with_columns(pl.col("_state").alias("state"))
    if fall_back:  # UTC has no repeated hour: no second reading to choose between
        jobs = _resolve_fall_back(jobs)
    jobs = jobs.with_columns(
        # No node was assigned: sacct says `None assigned`, or it counts 0 allocated nodes and
        # prints no node list (a job cancelled while pending, whose Start/End are the cancel time).
        (pl.col("_none_assigned") | ((pl.col("alloc_nodes") == 0) & pl.col("node_list").is_null()).fill_null(False))
        .alias("_no_nodes"),
        # Start `Unknown`/`None` says the job never started; a file without Start says nothing.
        (pl.col("_start").is_null() if "start" in present else pl.lit(False)).alias("_no_start"),
        # Old-style ReqMem is per CPU (`c`) or per node (`n`); ReqTRES mem is already a total.
        pl.coalesce(
            sf.reqmem_total(
                pl.col("_rm_mib"), pl.col("_rm_per"),
                pl.coalesce("req_cpus", "alloc_cpus"), pl.coalesce("req_nodes", "alloc_nodes"),
            ),
            "_req_mem",
        ).alias("req_mem_mib"),
    )
    return finish_job_times(jobs)


def _resolve_fall_back(jobs: pl.DataFrame) -> pl.DataFrame:
    """A local time in the repeated hour of a daylight-saving fall-back names two instants: the
    pair of (Start, End) readings whose span equals Elapsed is the one that happened (a job that
    ran 01:40 EDT to 01:20 EST, Elapsed 00:40:00). Without Elapsed, or when no pair matches, the
    earlier readings stay."""
    el = pl.col("_elapsed")

    def fits(s: str, e: str) -> pl.Expr:
        return ((pl.col(e) - pl.col(s)).dt.total_seconds() - el).abs() <= 1

    keep = el.is_null() | fits("_start", "_end").fill_null(True)
    late_end = ~keep & fits("_start", "_end_late").fill_null(False)
    both = ~keep & ~late_end & fits("_start_late", "_end_late").fill_null(False)
    late_start = ~keep & ~late_end & ~both & fits("_start_late", "_end").fill_null(False)
    return jobs.with_columns(
        pl.when(both | late_start).then(pl.col("_start_late")).otherwise(pl.col("_start")).alias("_start"),
        pl.when(late_end | both).then(pl.col("_end_late")).otherwise(pl.col("_end")).alias("_end"),
    )


ELAPSED_SLACK_S = 3600  # End - Start may exceed Elapsed (a suspended job) but not by this much and Elapsed itself


def _elapsed_mismatch(jobs: pl.DataFrame) -> pl.Expr:
    """Why a job's End - Start disagrees with its Elapsed by more than an hour and more than
    Elapsed itself (an end six years after a 10-minute run: a corrupt time), else null."""
    span = (pl.col("end_time") - pl.col("start_time")).dt.total_seconds()
    el = pl.col("_elapsed")
    bad = el.is_not_null() & span.is_not_null() & ((span - el).abs() > pl.max_horizontal(pl.lit(ELAPSED_SLACK_S), el))
    return (pl.when(bad).then(pl.format("End - Start ({} s) disagrees with Elapsed ({} s): a corrupt Start or End time",
                                        span, el)).otherwise(pl.lit(None, dtype=pl.Utf8)))


def finish_job_times(jobs: pl.DataFrame) -> pl.DataFrame:
    """start/end/wait/run from the raw `_start`, `_end`, `_elapsed`, `state`, `_no_nodes`,
    `_no_start` columns.

    A job never ran when no node was assigned, its start is `Unknown`/`None`, or it is still pending: it keeps
    null start, run and allocation whatever time the log printed. The End printed for a job
    still pending or running is not an end; a job that never ran keeps a real end only when it
    ended (cancelled while pending). wait = start - submit; run = end - start, else Elapsed.
    Negative spans (clock trouble) are unknown.
    """
    jobs = jobs.with_columns(
        (pl.col("_no_nodes") | pl.col("_no_start") | (pl.col("state") == "PENDING").fill_null(False)).alias("_never_ran")
    )
    never = pl.col("_never_ran")
    jobs = jobs.with_columns(
        pl.when(never).then(None).otherwise(pl.col("_start")).alias("start_time"),
        pl.when(pl.col("state").is_in(list(NOT_ENDED_STATES)).fill_null(False))
        .then(None)
        .when(never & ~pl.col("state").is_in(list(ENDED_STATES)).fill_null(False))
        .then(None)
        .otherwise(pl.col("_end"))
        .alias("end_time"),
        *[pl.when(never).then(None).otherwise(pl.col(c)).alias(c) for c in _ALLOC_COLUMNS],
    )
    jobs = jobs.with_columns(
        (pl.col("start_time") - pl.col("submit_time")).dt.total_seconds().alias("_wait"),
        pl.when(never)
        .then(None)
        .when(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
        .then((pl.col("end_time") - pl.col("start_time")).dt.total_seconds())
        .otherwise(pl.col("_elapsed"))
        .alias("_run"),
    )
    return jobs.with_columns(
        pl.when(pl.col("_wait") >= 0).then(pl.col("_wait")).alias("wait_s"),
        pl.when(pl.col("_run") >= 0).then(pl.col("_run")).alias("run_s"),
    )


def _expand_ranges(jobs: pl.DataFrame, tasks: pl.DataFrame) -> pl.DataFrame:
    """One row per task of each pending array range line."""
    is_range = pl.col("_id").struct.field("spec").is_not_null()
    ranged = jobs.filter(is_range)
    if ranged.height == 0:
        return jobs
    ranged = ranged.join(tasks, on="line_no", how="inner", maintain_order="right").with_columns(
        pl.col("task").alias("array_task_id"),
        pl.format("{}_{}", pl.col("array_job_id"), pl.col("task")).alias("job_id"),
    ).drop("task")
    return pl.concat([jobs.filter(~is_range), ranged], how="vertical_relaxed").sort("line_no", maintain_order=True)


def dedupe_jobs(jobs: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Within the input, a newer record of the same (cluster, job_id, submit_time) replaces the
    older one (SPEC §4); a record with a state Slurm defines beats one with garbage. Returns the
    rows kept and how many lines lost all their rows (they count as merged)."""
    key = ["cluster", "job_id", "submit_time"]
    if jobs.select(pl.struct(key).hash(seed=0).n_unique()).item() == jobs.height:
        return jobs, 0  # no two keys share a hash, so no key repeats (a third of `is_last_distinct`'s cost)
    last = jobs.select(pl.struct(key).is_last_distinct()).to_series()
    if last.all():
        return jobs, 0
    before = jobs["source_line"].n_unique()
    if jobs["_known_state"].all():  # the usual case: the later line wins, no sort needed
        kept = jobs.filter(last)
        return kept, before - kept["source_line"].n_unique()
    kept = (
        jobs.sort(["_known_state", "source_line"], maintain_order=True)
        .unique(subset=key, keep="last", maintain_order=True)
        .sort("source_line", maintain_order=True)
    )
    return kept, before - kept["source_line"].n_unique()


def _warnings(jobs: pl.DataFrame, present: set[str]) -> list[str]:
    """Counted, not per-row, notes on values that were unusable but did not sink the job."""
    out: list[str] = []
    w = jobs.select(
        (~pl.col("_known_state") & pl.col("state").is_not_null()).sum().alias("unknown_state"),
        (pl.col("_reqmem_ok") == False).sum().alias("bad_reqmem"),  # noqa: E712
        (pl.col("_wait") < 0).sum().alias("neg_wait"),
        (pl.col("_run") < 0).sum().alias("neg_run"),
    ).row(0, named=True)
    if w["unknown_state"]:
        unknown = jobs.filter(~pl.col("_known_state") & pl.col("state").is_not_null())
        states = unknown["_state_raw"].unique().sort().head(5).to_list()
        out.append(f"{w['unknown_state']} job(s) with a state Slurm does not define, recorded as UNKNOWN: {states}")
    if w["bad_reqmem"] and "reqmem" in present:
        out.append(f"{w['bad_reqmem']} job(s) with an unparseable ReqMem, req_mem_mib left null")
    if w["neg_wait"]:
        out.append(f"{w['neg_wait']} job(s) starting before their submit time, wait_s left null")
    if w["neg_run"]:
        out.append(f"{w['neg_run']} job(s) ending before their start, run_s left null")
    missing = [name for name in ("Start", "End", "State") if name.lower() not in present]
    if missing:
        out.append(f"no {'/'.join(missing)} column in this export: those values are left unknown, nothing is invented")
    return out


def parse_sacct_chunk(chunk: pl.DataFrame, cfg: SacctConfig) -> ParseResult:
    """Parse one chunk (`line_no: Int64, line: Utf8`) of sacct output into canonical job rows.

    Every line lands in exactly one bucket (ParseResult.reconciles()). Quarantine reasons: too
    few fields (or too many when the last field is not the job name), a malformed job id, an
    unparseable submit time, a bad pending-array range, or a file whose columns lack JobID or
    Submit (such a file cannot place jobs in time, so nothing is invented).
    """
    lines = chunk.select(pl.col("line_no").cast(pl.Int64), pl.col("line").cast(pl.Utf8).fill_null(""))
    lines_read = lines.height
    body = lines.filter(~pl.col("line").str.contains(r"^\s*(?:#|$)"))
    skipped = lines_read - body.height
    if body.height == 0:
        return _empty_result(lines_read, skipped)

    names = cfg.names()
    present = set(names) & KNOWN_FIELDS
    if "jobid" not in present and "jobidraw" in present:
        names = ["jobid" if n == "jobidraw" else n for n in names]
        present = set(names) & KNOWN_FIELDS
    if "jobid" not in present:
        reason = f"no JobID column in fields {cfg.fields}"
        q = body.select(pl.col("line_no"), pl.col("line").alias("raw"), pl.lit(reason).alias("reason"))
        return _empty_result(lines_read, skipped, q)

    split = _split(body, cfg, names).with_columns(_parse_job_ids(pl.col("jobid")).alias("_id"))
    # Only a line whose job id is not one can be a header: the text checks run on those alone.
    not_id = pl.when(pl.col("_id").struct.field("base").is_null()).then(pl.col("jobid"))
    is_header = not_id.str.strip_chars().str.to_lowercase().is_in(["jobid", "jobidraw"]).fill_null(False)
    flags = split.select(is_header).to_series()
    if flags.any():
        skipped += int(flags.sum())
        split = split.filter(~flags)
    if "submit" not in present:
        reason = f"no Submit column (fields: {', '.join(cfg.fields or XDMOD_FIELDS)}): cannot place jobs in time"
        q = split.select(pl.col("line_no"), pl.col("line").alias("raw"), pl.lit(reason).alias("reason"))
        return _empty_result(lines_read, skipped, q)

    split = split.with_columns(sf.parse_time(pl.col("submit"), cfg.timezone).alias("_submit"))

    # Pending array ranges: validate (and expand later) only the few lines that have one.
    specs = split.filter(pl.col("_id").struct.field("spec").is_not_null() & pl.col("_id").struct.field("step").is_null())
    specs = specs.select("line_no", pl.col("_id").struct.field("spec").alias("spec"))
    tasks = pl.DataFrame(schema={"line_no": pl.Int64, "task": pl.Int64})
    bad_ranges = False
    if specs.height:
        tasks, bad = sf.expand_array_specs(specs)
        if bad.height:
            bad_ranges = True
            split = split.join(bad.rename({"reason": "_range_reason"}), on="line_no", how="left", maintain_order="left")

    quarantined = split.select(_quarantined(names, cfg, bad_ranges)).to_series()
    quarantine = split.filter(quarantined).select(
        pl.col("line_no"), pl.col("line").alias("raw"), _quarantine_reason(names, cfg, bad_ranges).alias("reason")
    )
    ok = split.filter(~quarantined)
    is_step = pl.col("_id").struct.field("step").is_not_null()
    steps = ok.filter(is_step).height
    jobs = ok.filter(~is_step)
    if jobs.height == 0:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine, lines_read=lines_read, merged=steps, skipped=skipped)

    jobs = _derive_jobs(jobs.with_columns(_col("state", present).alias("_state_raw")), present, cfg)
    jobs = jobs.with_columns(_elapsed_mismatch(jobs).alias("_time_reason"))
    if jobs["_time_reason"].is_not_null().any():  # quarantined with the reason, never loaded as a years-long run
        bad = jobs.filter(pl.col("_time_reason").is_not_null())
        quarantine = pl.concat([quarantine, bad.select(pl.col("line_no"), pl.col("line").alias("raw"),
                                                       pl.col("_time_reason").alias("reason"))], how="vertical_relaxed")
        jobs = jobs.filter(pl.col("_time_reason").is_null())
    jobs = _expand_ranges(jobs, tasks)
    jobs, superseded = dedupe_jobs(jobs)
    warnings = _warnings(jobs, present)
    return ParseResult(
        jobs=conform(jobs),
        quarantine=quarantine,
        lines_read=lines_read,
        merged=steps + superseded,
        skipped=skipped,
        warnings=warnings,
    )
