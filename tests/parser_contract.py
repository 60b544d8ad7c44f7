"""What every parser's result must satisfy (SPEC §4): the canonical schema, reconciled counts,
Slurm state names, a submit time on every job, one row per (job, submit), no negative amount,
and quarantine reasons a person can act on. Shared by the parser tests."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from metapilot.transforms.canonical import PARSED_SCHEMA, SLURM_STATES, ParseResult

NON_NEGATIVE = ("wait_s", "run_s", "alloc_cpus", "req_cpus", "req_mem_mib", "req_gpus", "timelimit_s",
                "alloc_mem_mib", "alloc_nodes")


def check_contract(r: ParseResult) -> None:
    assert dict(r.jobs.schema) == PARSED_SCHEMA
    assert r.reconciles(), (r.lines_read, r.lines_loaded, r.merged, r.quarantine.height, r.skipped)
    assert set(r.jobs["state"].to_list()) <= set(SLURM_STATES)
    assert r.jobs["submit_time"].null_count() == 0
    assert r.jobs.select(pl.struct("job_id", "submit_time").is_unique()).to_series().all()
    for col in NON_NEGATIVE:
        assert (r.jobs[col].drop_nulls() >= 0).all(), col
    assert (r.quarantine["reason"].str.len_chars() > 10).all()


def utc(epoch: int | str) -> datetime:
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc)


def mutated_records(records: list[str], edits, sep: str) -> list[str]:
    """Real records with fields overwritten and the line cut short: `edits` = [(record index,
    [(field position, new value)], cut)] as the parsers' property tests draw them."""
    lines = []
    for i, changes, cut in edits:
        fields = records[i].split(sep)
        for pos, value in changes:
            if pos < len(fields):
                fields[pos] = value
        lines.append(sep.join(fields)[:cut])
    return lines
