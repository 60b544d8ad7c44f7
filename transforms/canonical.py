"""The canonical job record (SPEC §4) as parsers emit it, and the result every parser returns.

Parsers emit raw user/account/group/job names; `transforms.privacy` turns them into keyed hashes
before anything reaches the warehouse. `source_line` is the 1-based line of the job's primary
record, so that loader errors and quarantine can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")

# Columns every parser returns, in this order, with these dtypes. Unknown is null, never a sentinel.
PARSED_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.Utf8,
    "job_id": pl.Utf8,  # array task / het offset included: "123_4", "123+1"
    "array_job_id": pl.Utf8,
    "array_task_id": pl.Int64,
    "het_job_id": pl.Utf8,
    "het_offset": pl.Int64,
    "source_format": pl.Utf8,  # sacct | sacct-json | pbs | swf | sge | uge | lsf
    "source_line": pl.Int64,
    "user_name": pl.Utf8,
    "account_name": pl.Utf8,
    "group_name": pl.Utf8,
    "job_name": pl.Utf8,
    "partition": pl.Utf8,
    "qos": pl.Utf8,
    "state": pl.Utf8,  # Slurm's state names (COMPLETED, FAILED, CANCELLED, TIMEOUT, PENDING, ...)
    "exit_code": pl.Utf8,
    "submit_time": UTC_TS,
    "eligible_time": UTC_TS,
    "start_time": UTC_TS,  # null when the job never ran
    "end_time": UTC_TS,
    "wait_s": pl.Int64,
    "run_s": pl.Int64,  # null when the job never ran
    "timelimit_s": pl.Int64,  # null when unlimited / unknown
    "req_cpus": pl.Int64,
    "req_nodes": pl.Int64,
    "req_mem_mib": pl.Int64,  # total for the job
    "req_gpus": pl.Int64,
    "alloc_cpus": pl.Int64,
    "alloc_nodes": pl.Int64,
    "alloc_mem_mib": pl.Int64,  # total for the job
    "alloc_gpus": pl.Int64,
    "gpu_type": pl.Utf8,
    "node_list": pl.Utf8,
}

QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "line_no": pl.Int64,
    "raw": pl.Utf8,
    "reason": pl.Utf8,
}

# Slurm's job states (sacct --helpformat / squeue man page); every parser maps into these.
SLURM_STATES: tuple[str, ...] = (
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "CONFIGURING", "COMPLETING", "DEADLINE", "FAILED",
    "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RUNNING", "REQUEUED", "RESIZING",
    "REVOKED", "SUSPENDED", "TIMEOUT", "UNKNOWN",
)
ENDED_STATES: tuple[str, ...] = (
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "TIMEOUT",
)


@dataclass
class ParseResult:
    """What a parser returns for one chunk of input.

    Accounting (SPEC §4): every input line of the chunk is in exactly one bucket:
    `lines_loaded` (lines that produced job rows; a pending array range is one line but many rows),
    `merged` (steps folded into their job, records superseded within the input),
    `quarantine` (one row per line, with the reason), `skipped` (comments, blank lines, headers).
    """

    jobs: pl.DataFrame
    quarantine: pl.DataFrame
    lines_read: int
    merged: int = 0
    skipped: int = 0
    capacity: list[dict] = field(default_factory=list)  # e.g. from an SWF header
    warnings: list[str] = field(default_factory=list)

    @property
    def lines_loaded(self) -> int:
        return self.jobs["source_line"].n_unique() if self.jobs.height else 0

    def reconciles(self) -> bool:
        return self.lines_read == self.lines_loaded + self.merged + self.quarantine.height + self.skipped


def empty_jobs() -> pl.DataFrame:
    return pl.DataFrame(schema=PARSED_SCHEMA)


def empty_quarantine() -> pl.DataFrame:
    return pl.DataFrame(schema=QUARANTINE_SCHEMA)


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Add missing canonical columns as nulls, cast, and order them; drop anything else."""
    if df.height == 0:
        return empty_jobs()
    exprs = []
    for name, dtype in PARSED_SCHEMA.items():
        if name in df.columns:
            exprs.append(pl.col(name).cast(dtype, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    return df.select(exprs)


def quarantine_rows(line_no: pl.Series | list[int], raw: pl.Series | list[str], reason: str | pl.Series) -> pl.DataFrame:
    """Build quarantine rows; `reason` may be one string for all or a series per row."""
    df = pl.DataFrame({"line_no": line_no, "raw": raw}, schema={"line_no": pl.Int64, "raw": pl.Utf8})
    if isinstance(reason, str):
        return df.with_columns(pl.lit(reason).alias("reason"))
    return df.with_columns(pl.Series("reason", reason, dtype=pl.Utf8))
