"""Parse Standard Workload Format traces (Parallel Workloads Archive) into canonical job rows.

SWF (Chapin et al.; Feitelson, Tsafrir & Krakov, JPDC 74(10) 2014) is one job per line, 18
whitespace-separated numbers, `-1` for unknown, and `;` comment lines that carry a header
(`; MaxProcs: 100`). Everything is vectorised with polars: traces run to millions of lines.

Mapping decisions (SPEC §3/§4):
- times: submit = UnixStartTime + field 2 (UTC; UnixStartTime is an epoch, so TimeZoneString is
  informational only); start = submit + wait when wait >= 0, else null (NASA-iPSC has no waits);
  end = start + run when both are known.
- status: 1 COMPLETED, 0 FAILED, 5 CANCELLED, -1 UNKNOWN; the partial-execution codes of
  checkpointed/swapped jobs map to their outcome: 2 ("partial, will be continued") PREEMPTED,
  3 ("last partial, completed") COMPLETED, 4 ("last partial, failed") FAILED.
- a job number seen on several lines (partial executions, or a dirty trace) yields one row: the
  summary line (status 0/1/5/-1) when there is one, else the last line; the others are `merged`.
- ids: user/group/queue/partition numbers become strings (queue -> qos, partition -> partition);
  -1 becomes null. Memory fields are KB per processor: totals are KB x procs / 1024 MiB, with the
  allocated processors standing in when the requested count is unknown.
- a line with fewer than 18 fields, a non-numeric or absurd value, no job number or no submit
  time is quarantined with the reason; extra trailing tokens (extended SWF) are ignored.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

import polars as pl
from metapilot.transforms.canonical import (
    ParseResult,
    conform,
    empty_quarantine,
    quarantine_rows,
)

SWF_FIELDS: tuple[str, ...] = (
    "job", "submit", "wait", "run", "alloc_procs", "avg_cpu", "used_mem_kb", "req_procs",
    "req_time", "req_mem_kb", "status", "user", "group", "executable", "queue", "partition",
    "preceding_job", "think_time",
)
N_FIELDS = len(SWF_FIELDS)
# Values beyond this (seconds, KB, counts) are garbage, and would overflow microsecond timestamps.
MAX_ABS_VALUE = 1e12
STATUS_TO_STATE: dict[int, str] = {
    1: "COMPLETED", 0: "FAILED", 5: "CANCELLED", 2: "PREEMPTED", 3: "COMPLETED", 4: "FAILED",
}
PARTIAL_STATUSES = (2, 3, 4)
_CONTROL_BLANKS = r"[\t\r\x0b\x0c]"  # whitespace that SWF writers may leave besides blanks
# `; Key: value` with at most one blank after the `;`: deeper-indented lines continue a Note.
_HEADER_FIELD = re.compile(r"^;[ \t]?([A-Z][A-Za-z]*)[ \t]*:[ \t]?(.*)$")
_INT_FIELDS = {
    "UnixStartTime": "unix_start_time", "TimeZone": "time_zone", "MaxProcs": "max_procs",
    "MaxNodes": "max_nodes", "MaxJobs": "max_jobs", "MaxRecords": "max_records",
    "MaxRuntime": "max_runtime", "MaxMemory": "max_memory",
}


@dataclass
class SwfHeader:
    """What an SWF header says; every field is optional because real headers omit many."""

    unix_start_time: int | None = None
    time_zone_string: str | None = None
    time_zone: int | None = None  # deprecated seconds offset; kept for the record only
    max_procs: int | None = None
    max_nodes: int | None = None
    max_jobs: int | None = None
    max_records: int | None = None
    max_runtime: int | None = None
    max_memory: int | None = None
    version: str | None = None
    computer: str | None = None
    installation: str | None = None
    acknowledge: str | None = None
    notes: list[str] = field(default_factory=list)
    queues: dict[str, str] = field(default_factory=dict)  # number -> name, from `; Queue:` lines
    partitions: dict[str, str] = field(default_factory=dict)  # number -> name
    fields: dict[str, str] = field(default_factory=dict)  # every `Key: value`, last one wins


def _parse_int(text: str) -> int | None:
    """Leading integer of a header value (`93312`, `100 (plus 2 spares)`), else None."""
    m = re.match(r"\s*(-?\d+)", text)
    return int(m.group(1)) if m else None


def parse_swf_header(head_lines: list[str]) -> SwfHeader:
    """Read the `;` header of an SWF file from its first lines; data lines are ignored.

    Continuation lines (a `;` followed by a tab or several blanks) extend the preceding Note, so
    multi-line notes stay whole for the capacity record.
    """
    h = SwfHeader()
    last_key: str | None = None
    for raw in head_lines:
        line = raw.rstrip("\r\n")
        if not line.startswith(";"):
            continue
        m = _HEADER_FIELD.match(line)
        if not m:
            text = line[1:].strip()
            if text and last_key == "Note" and h.notes:
                h.notes[-1] = f"{h.notes[-1]} {text}"
            elif not text:
                last_key = None
            continue
        key, value = m.group(1), m.group(2).strip()
        last_key = key
        h.fields[key] = value
        if key in _INT_FIELDS:
            setattr(h, _INT_FIELDS[key], _parse_int(value))
        elif key == "TimeZoneString":
            h.time_zone_string = value or None
        elif key == "Note":
            h.notes.append(value)
        elif key in ("Queue", "Partition"):
            parts = value.split(None, 1)
            if parts:
                target = h.queues if key == "Queue" else h.partitions
                target[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
        elif key in ("Version", "Computer", "Installation", "Acknowledge"):
            setattr(h, key.lower(), value)
    return h


def header_capacity(header: SwfHeader) -> list[dict]:
    """The cluster-wide capacity the header declares (SPEC §5), or [] when it declares none.

    Without MaxProcs, MaxNodes stands in for the cores (one processor per node, as in the
    Lublin model's output); the note says so.
    """
    cores, nodes = header.max_procs, header.max_nodes
    extra = ""
    if cores is None and nodes is not None:
        cores, extra = nodes, " MaxProcs missing: cores taken from MaxNodes (1 per node)."
    if cores is None:
        return []
    who = header.installation or header.computer or "SWF trace"
    note = f"{who}: MaxNodes={nodes}, MaxProcs={header.max_procs}.{extra}"
    if header.notes:
        note += " Notes: " + " | ".join(header.notes)
    valid_from = datetime.fromtimestamp(header.unix_start_time or 0, tz=timezone.utc)
    return [{
        "partition": "*", "nodes": nodes, "cores": cores, "gpus": 0, "mem_mib": None,
        "source": "swf-header", "note": note[:2000], "valid_from": valid_from,
    }]


def swf_count_warning(header: SwfHeader, n_jobs: int) -> str | None:
    """Compare the jobs a whole file held with the header's MaxJobs/MaxRecords.

    Chunks cannot know the file's total, so the ingest flow calls this once after the last chunk
    with the summed job rows. Cleaned PWA traces often keep the original counts in the header.
    """
    claims = {k: v for k, v in (("MaxRecords", header.max_records), ("MaxJobs", header.max_jobs)) if v is not None}
    if not claims or n_jobs in claims.values():
        return None
    said = ", ".join(f"{k} {v:,}" for k, v in claims.items())
    return f"SWF header says {said}, but the file holds {n_jobs:,} jobs (a cleaned or cut trace?)"


def _normalised_lines(lines: pl.Series) -> pl.Series:
    """Each run of blanks/tabs as one blank, none at the ends, so that tokens split on one blank.

    Literal replaces (four blanks by one, then two by one until none are left) measured several
    times faster than a regex, per line, or than bytes replaces on the joined text.
    """
    s = lines
    if s.str.contains(_CONTROL_BLANKS).any():
        s = s.str.replace_all(_CONTROL_BLANKS, " ")
    s = s.str.replace_all("    ", " ", literal=True)
    while s.str.contains("  ", literal=True).any():
        s = s.str.replace_all("  ", " ", literal=True)
    return s.str.strip_chars(" ")


def _fields_to_frame(lines: pl.Series) -> pl.DataFrame:
    """The first 18 tokens of each line as Float64 `<name>_f` columns; missing or non-numeric: null.

    polars' CSV reader does this several times faster than `str.split` + `list.get` + cast. The row
    count is checked, and the per-line split path is the fallback if the reader disagrees.
    """
    schema = {f"{name}_f": pl.Float64 for name in SWF_FIELDS}
    if lines.len() == 0:
        return pl.DataFrame(schema=schema)
    norm = _normalised_lines(lines)
    try:
        df = pl.read_csv(
            io.BytesIO(norm.str.join("\n").item().encode()), separator=" ", has_header=False, quote_char=None,
            schema=schema, truncate_ragged_lines=True, ignore_errors=True, raise_if_empty=False,
        )
        if df.height == lines.len():
            return df
    except Exception:  # noqa: BLE001 - any reader trouble falls back to the exact path
        pass
    toks = norm.str.split(" ")
    return pl.DataFrame([
        toks.list.get(i, null_on_oob=True).cast(pl.Float64, strict=False).alias(col)
        for i, col in enumerate(schema)
    ])


def _value_ok(name: str) -> pl.Expr:
    """A field parsed as a finite number of sane magnitude."""
    v = pl.col(f"{name}_f")
    return v.is_not_null() & v.is_finite() & (v.abs() <= MAX_ABS_VALUE)


def _bad_line_reason() -> pl.Expr:
    """Why a line is unusable: first bad field, no job number or no submit time (null if fine).

    Only evaluated on the few failing lines, as building strings for every line costs time.
    """
    checks = [
        pl.when(~_value_ok(name)).then(pl.lit(f"SWF field {i} ({name}) is not a usable number"))
        for i, name in enumerate(SWF_FIELDS, start=1)
    ]
    checks.append(pl.when(pl.col("job_f") < 0).then(pl.lit("SWF job number missing (-1)")))
    checks.append(pl.when(pl.col("job_f") != pl.col("job_f").floor()).then(pl.lit("SWF job number is not a whole number")))
    checks.append(pl.when(pl.col("submit_f") < 0).then(pl.lit("SWF submit time unknown (-1)")))
    return pl.coalesce(checks)


def _quarantine_bad(bad: pl.DataFrame) -> pl.DataFrame:
    """Quarantine rows for unusable lines, with the field count or the first bad field as reason."""
    ntok = _normalised_lines(bad["line"]).str.count_matches(" ", literal=True) + 1
    reasons = bad.with_columns(ntok.alias("_ntok")).select(
        pl.when(pl.col("_ntok") < N_FIELDS).then(pl.format("SWF line has {} fields, needs 18", pl.col("_ntok")))
        .otherwise(_bad_line_reason().fill_null("SWF line unusable"))
    ).to_series()
    return quarantine_rows(bad["line_no"], bad["line"], reasons)


def _line_ok() -> pl.Expr:
    """True when every field is usable and the job has a number and a submit time."""
    ok = pl.all_horizontal([_value_ok(name) for name in SWF_FIELDS])
    return ok & (pl.col("job_f") >= 0) & (pl.col("job_f") == pl.col("job_f").floor()) & (pl.col("submit_f") >= 0)


def _known(name: str) -> pl.Expr:
    """A field as Int64, with SWF's `-1` (or any negative) unknown marker as null."""
    v = pl.col(f"{name}_f")
    return pl.when(v >= 0).then(v.floor().cast(pl.Int64))


# The unit of the memory fields: KB by the standard; some logs (Alea's extended SWF) hold bytes.
MEM_UNITS_KB = {"kb": 1.0, "b": 1 / 1024, "mb": 1024.0}


def _mem_total_mib(kb_per_proc: str, procs: pl.Expr, kb_per_unit: float = 1.0) -> pl.Expr:
    """Memory per processor (KB, or `kb_per_unit` KB per unit) x processors, in MiB (rounded);
    null when either is unknown."""
    kb = pl.col(f"{kb_per_proc}_f")
    return pl.when((kb >= 0) & procs.is_not_null()).then(
        (kb * kb_per_unit * procs / 1024).round(0).cast(pl.Int64, strict=False))


def _dedupe_jobs(rows: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """One row per job number: the summary line if any, else the last partial line."""
    if rows["job_f"].is_unique().all():
        return rows, 0
    partial = pl.col("status_f").is_in([float(s) for s in PARTIAL_STATUSES])
    ranked = rows.with_columns(partial.alias("_partial")).sort(["job_f", "_partial", "line_no"], descending=[False, False, True])
    kept = ranked.unique(subset="job_f", keep="first", maintain_order=True).drop("_partial").sort("line_no")
    return kept, rows.height - kept.height


def _jobs_from_fields(rows: pl.DataFrame, header: SwfHeader, cluster: str, kb_per_unit: float = 1.0) -> pl.DataFrame:
    """Canonical columns from validated numeric SWF fields."""
    t0 = header.unix_start_time or 0
    alloc = _known("alloc_procs")
    req = _known("req_procs")
    wait, run = _known("wait"), _known("run")
    submit_s = pl.lit(t0, dtype=pl.Int64) + pl.col("submit_f").floor().cast(pl.Int64)
    start_s = submit_s + wait
    status = pl.col("status_f").floor().cast(pl.Int64)

    def ts(seconds: pl.Expr) -> pl.Expr:
        return (seconds * 1_000_000).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")

    def idstr(name: str) -> pl.Expr:
        return _known(name).cast(pl.Utf8)

    # Lazy so that polars shares the repeated sub-expressions (eager evaluation repeats them).
    out = rows.lazy().select(
        pl.lit(cluster).alias("cluster"),
        pl.col("job_f").cast(pl.Int64).cast(pl.Utf8).alias("job_id"),
        pl.lit("swf").alias("source_format"),
        pl.col("line_no").alias("source_line"),
        idstr("user").alias("user_name"),
        idstr("group").alias("group_name"),
        idstr("partition").alias("partition"),
        idstr("queue").alias("qos"),
        status.replace_strict(STATUS_TO_STATE, default="UNKNOWN", return_dtype=pl.Utf8).alias("state"),
        ts(submit_s).alias("submit_time"),
        ts(start_s).alias("start_time"),
        ts(start_s + run).alias("end_time"),
        wait.alias("wait_s"),
        run.alias("run_s"),
        _known("req_time").alias("timelimit_s"),
        req.alias("req_cpus"),
        _mem_total_mib("req_mem_kb", pl.coalesce(req, alloc), kb_per_unit).alias("req_mem_mib"),
        alloc.alias("alloc_cpus"),
        _mem_total_mib("used_mem_kb", alloc, kb_per_unit).alias("alloc_mem_mib"),
    ).collect()
    return conform(out)


def _procs_warning(jobs: pl.DataFrame, header: SwfHeader) -> list[str]:
    """Warn when jobs use more processors than the header's MaxProcs (capacity is then wrong)."""
    if header.max_procs is None or jobs.height == 0:
        return []
    size = pl.max_horizontal("alloc_cpus", "req_cpus")
    over = jobs.filter(size > header.max_procs)
    if over.height == 0:
        return []
    biggest = over.select(size.max()).item()
    return [f"{over.height:,} SWF jobs use more processors than the header's MaxProcs {header.max_procs:,} (largest {biggest:,}; first at line {over['source_line'].min()})"]


def _job_number_warning(jobs: pl.DataFrame, header: SwfHeader) -> list[str]:
    """Warn when job numbers run past the header's MaxJobs (the numbering is 1..MaxJobs)."""
    if header.max_jobs is None or jobs.height == 0:
        return []
    top = jobs["job_id"].cast(pl.Int64).max()
    if top is not None and top > header.max_jobs:
        return [f"SWF job numbers reach {top:,}, beyond the header's MaxJobs {header.max_jobs:,}"]
    return []


def parse_swf_chunk(chunk: pl.DataFrame, header: SwfHeader, cluster: str, mem_unit: str = "kb") -> ParseResult:
    """Parse one chunk (`line_no`, `line`) of an SWF file into canonical job rows.

    Header-derived output (capacity, missing UnixStartTime) comes with the chunk that holds line 1,
    so a multi-chunk file reports it once; data-derived warnings come with every chunk.
    The whole-file job count check is `swf_count_warning`, called by the ingest after the last chunk.
    `mem_unit`: the unit of the memory fields (`MEM_UNITS_KB`; KB by the standard).
    """
    lines = chunk.select(
        pl.col("line_no").cast(pl.Int64),
        pl.col("line").cast(pl.Utf8).fill_null(""),
    )
    stripped = lines["line"].str.strip_chars()
    ignorable = (stripped == "") | stripped.str.starts_with(";")
    skipped = int(ignorable.sum())
    data = lines.filter(~ignorable)
    rows = pl.concat([data, _fields_to_frame(data["line"])], how="horizontal")
    rows = rows.with_columns(_line_ok().fill_null(False).alias("_ok"))
    bad = rows.filter(~pl.col("_ok"))
    quarantine = _quarantine_bad(bad) if bad.height else empty_quarantine()
    good, merged = _dedupe_jobs(rows.filter(pl.col("_ok")))
    jobs = _jobs_from_fields(good, header, cluster, MEM_UNITS_KB[mem_unit])

    warnings: list[str] = []
    capacity: list[dict] = []
    if lines.height and lines["line_no"].min() == 1:
        capacity = header_capacity(header)
        if header.unix_start_time is None:
            warnings.append("SWF header has no UnixStartTime: submit times count from the Unix epoch (1970-01-01 UTC)")
        if not capacity:
            warnings.append("SWF header has neither MaxProcs nor MaxNodes: capacity must come from a config or be inferred")
    if merged:
        warnings.append(f"{merged:,} SWF lines share a job number with another line (partial executions or duplicates): one row per job kept")
    warnings += _procs_warning(jobs, header) + _job_number_warning(jobs, header)

    return ParseResult(
        jobs=jobs,
        quarantine=quarantine,
        lines_read=lines.height,
        merged=merged,
        skipped=skipped,
        capacity=capacity,
        warnings=warnings,
    )


__all__ = [
    "SWF_FIELDS", "SwfHeader", "header_capacity", "parse_swf_chunk", "parse_swf_header",
    "swf_count_warning",
]
