"""Parse `sacct --json` (Slurm's OpenAPI dump, data_parser v0.0.37 and later) into canonical rows.

The accounting unit is one job object: `lines_read` counts job objects, steps inside a job are
part of it, and `source_line` is the job's 1-based position in the `jobs` list. A document
that is not JSON, or has no `jobs` list, is one quarantine row (line 1). JSON is small next to
text logs, so the walk over job objects is plain Python; the field parsing afterwards reuses the
vectorised expressions of the text parser (TRES strings are rebuilt from the TRES lists).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from metapilot.transforms import slurm_fields as sf
from metapilot.transforms.canonical import (
    UTC_TS,
    ParseResult,
    conform,
    empty_jobs,
    quarantine_rows,
)
from metapilot.transforms.sacct import NEVER_RAN_NODES, dedupe_jobs, finish_job_times

NO_VAL = 0xFFFFFFFE  # Slurm's "not set" for 32-bit fields; INFINITE is one more
_RAW_MAX = 65536  # characters of an unusable document kept in quarantine

_RAW_SCHEMA: dict[str, pl.DataType] = {
    "source_line": pl.Int64, "cluster": pl.Utf8, "job_id": pl.Utf8, "array_job_id": pl.Utf8,
    "array_task_id": pl.Int64, "het_job_id": pl.Utf8, "het_offset": pl.Int64, "user_name": pl.Utf8,
    "account_name": pl.Utf8, "group_name": pl.Utf8, "job_name": pl.Utf8, "partition": pl.Utf8,
    "qos": pl.Utf8, "_state_raw": pl.Utf8, "exit_code": pl.Utf8, "_submit_s": pl.Int64,
    "_eligible_s": pl.Int64, "_start_s": pl.Int64, "_end_s": pl.Int64, "_elapsed": pl.Int64,
    "timelimit_s": pl.Int64, "req_cpus": pl.Int64, "_req_nodes": pl.Int64,
    "_alloc_nodes": pl.Int64, "_req_tres": pl.Utf8, "_alloc_tres": pl.Utf8, "_nodes": pl.Utf8,
}


class _BadJob(ValueError):
    """A job object that cannot become a row; the message is the quarantine reason."""


def _number(v: Any) -> int | None:
    """An integer field: plain (v0.0.37) or `{"set": .., "infinite": .., "number": ..}` (v0.0.39+)."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite", False):
            return None
        v = v.get("number")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = int(v)
    return None if v >= NO_VAL or v < 0 else v


def _epoch(v: Any) -> int | None:
    """Epoch seconds; 0 means "not happened" in Slurm's dump."""
    n = _number(v)
    return n if n else None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v.strip() else None


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _state(job: dict) -> str | None:
    """`state.current` is a string (v0.0.37) or a list of flags (v0.0.40+); older dumps a string."""
    cur = _get(job, "state", "current") if isinstance(job.get("state"), dict) else job.get("state")
    if isinstance(cur, list):
        cur = next((c for c in cur if isinstance(c, str)), None)
    return _text(cur)


def _exit_code(job: dict) -> str | None:
    """`return_code:signal`, as sacct's text ExitCode prints it."""
    ec = job.get("exit_code")
    if not isinstance(ec, dict):
        return None
    rc = _number(ec.get("return_code"))
    sig = _number(_get(ec, "signal", "id")) or _number(_get(ec, "signal", "signal_id")) or 0
    return None if rc is None else f"{rc}:{sig}"


def _tres_string(items: Any) -> str | None:
    """Rebuild sacct's text TRES (`cpu=4,mem=40960M,node=1,gres/gpu=1`) from the JSON list."""
    if not isinstance(items, list):
        return None
    parts = []
    for it in items:
        if not isinstance(it, dict):
            continue
        kind, name, count = it.get("type"), it.get("name"), _number(it.get("count"))
        if not isinstance(kind, str) or count is None:
            continue
        key = f"{kind}/{name}" if isinstance(name, str) and name else kind
        parts.append(f"{key}={count}M" if key == "mem" else f"{key}={count}")
    return ",".join(parts)


def _ids(job: dict) -> list[tuple[str, str | None, int | None, str | None, int | None]]:
    """(job_id, array_job_id, array_task_id, het_job_id, het_offset) rows; a pending array
    meta-record (`array.task` = "1-3,7") expands to one row per task."""
    jid = _number(job.get("job_id"))
    if jid is None:
        raise _BadJob(f"bad job id {job.get('job_id')!r}")
    array_id = _number(_get(job, "array", "job_id"))
    task_id = _number(_get(job, "array", "task_id"))
    het_id = _number(_get(job, "het", "job_id"))
    het_off = _number(_get(job, "het", "job_offset"))
    if array_id:
        if task_id is not None:
            return [(f"{array_id}_{task_id}", str(array_id), task_id, None, None)]
        spec = _text(_get(job, "array", "task"))
        if spec:
            tasks = sf.expand_array_spec(spec.split("%")[0].strip("[]"))
            if tasks is None:
                raise _BadJob(f"bad array index range '{spec[:60]}'")
            return [(f"{array_id}_{t}", str(array_id), t, None, None) for t in tasks]
    if het_id and het_off is not None:
        return [(f"{het_id}+{het_off}", None, None, str(het_id), het_off)]
    return [(str(jid), None, None, None, None)]


def _job_rows(job: Any, ordinal: int, cluster_default: str) -> list[dict]:
    """Raw rows (ids expanded) for one job object; raises _BadJob with the quarantine reason."""
    if not isinstance(job, dict):
        raise _BadJob("job entry is not an object")
    submit = _epoch(_get(job, "time", "submission"))
    if submit is None:
        sub = _get(job, "time", "submission")
        raise _BadJob("no submit time" if sub is None else f"bad submit time {sub!r}")
    limit = _number(_get(job, "time", "limit"))
    base = {
        "source_line": ordinal,
        "cluster": _text(job.get("cluster")) or cluster_default,
        "user_name": _text(job.get("user")),
        "account_name": _text(job.get("account")),
        "group_name": _text(job.get("group")),
        "job_name": _text(job.get("name")),
        "partition": _text(job.get("partition")),
        "qos": _text(job.get("qos")),
        "_state_raw": _state(job),
        "exit_code": _exit_code(job),
        "_submit_s": submit,
        "_eligible_s": _epoch(_get(job, "time", "eligible")),
        "_start_s": _epoch(_get(job, "time", "start")),
        "_end_s": _epoch(_get(job, "time", "end")),
        "_elapsed": _number(_get(job, "time", "elapsed")),
        "timelimit_s": limit * 60 if limit else None,
        "req_cpus": _number(_get(job, "required", "CPUs")),
        "_req_nodes": _number(_get(job, "required", "nodes")),
        "_alloc_nodes": _number(job.get("allocation_nodes")),
        "_req_tres": _tres_string(_get(job, "tres", "requested")),
        "_alloc_tres": _tres_string(_get(job, "tres", "allocated")),
        "_nodes": _text(job.get("nodes")),
    }
    return [
        {**base, "job_id": j, "array_job_id": a, "array_task_id": t, "het_job_id": h, "het_offset": o}
        for j, a, t, h, o in _ids(job)
    ]


def _derive(raw: pl.DataFrame) -> pl.DataFrame:
    """Canonical columns from the raw rows, with the text parser's rules for times and TRES."""
    to_ts = lambda c: pl.from_epoch(pl.col(c), time_unit="s").cast(UTC_TS)  # noqa: E731
    req, alloc = pl.col("_req_tres"), pl.col("_alloc_tres")
    nodes = pl.col("_nodes").str.strip_chars()
    df = raw.with_columns(
        pl.lit("sacct-json").alias("source_format"),
        sf.normalize_state(pl.col("_state_raw")).alias("state"),
        sf.state_is_known(pl.col("_state_raw")).fill_null(False).alias("_known_state"),
        to_ts("_submit_s").alias("submit_time"),
        to_ts("_eligible_s").alias("eligible_time"),
        to_ts("_start_s").alias("_start"),
        to_ts("_end_s").alias("_end"),
        pl.coalesce("req_cpus", sf.tres_count(req, "cpu")).alias("req_cpus"),
        pl.coalesce("_req_nodes", sf.tres_count(req, "node")).alias("req_nodes"),
        sf.tres_mem_mib(req).alias("req_mem_mib"),
        sf.tres_gpus(req).alias("req_gpus"),
        sf.tres_count(alloc, "cpu").alias("alloc_cpus"),
        pl.coalesce(sf.tres_count(alloc, "node"), "_alloc_nodes").alias("alloc_nodes"),
        sf.tres_mem_mib(alloc).alias("alloc_mem_mib"),
        sf.tres_gpus(alloc).alias("alloc_gpus"),
        pl.coalesce(sf.tres_gpu_type(alloc), sf.tres_gpu_type(req)).alias("gpu_type"),
        pl.when(nodes.is_in(list(NEVER_RAN_NODES))).then(None).otherwise(nodes).alias("node_list"),
        nodes.is_in(list(NEVER_RAN_NODES)).fill_null(False).alias("_no_nodes"),
        pl.col("_start_s").is_null().alias("_no_start"),  # 0 in the dump: not started
    )
    return finish_job_times(df)


def parse_sacct_json(text: str, cluster_default: str, tz: str = "UTC") -> ParseResult:
    """Parse a whole `sacct --json` document.

    `tz` is accepted for symmetry with the text parser: the JSON carries epoch seconds, which
    need no zone. A job object without a usable id or submit time is quarantined (its JSON text
    is the raw), the rest become rows; records of the same (cluster, job_id, submit_time) keep
    the later one and count as merged.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        q = quarantine_rows([1], [text[:_RAW_MAX]], f"not valid JSON: {e}"[:300])
        return ParseResult(jobs=empty_jobs(), quarantine=q, lines_read=1)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        q = quarantine_rows([1], [text[:_RAW_MAX]], "JSON document has no 'jobs' list: not sacct --json output")
        return ParseResult(jobs=empty_jobs(), quarantine=q, lines_read=1)

    rows: list[dict] = []
    q_no: list[int] = []
    q_raw: list[str] = []
    q_reason: list[str] = []
    for i, job in enumerate(jobs, start=1):
        try:
            rows.extend(_job_rows(job, i, cluster_default))
        except _BadJob as e:
            q_no.append(i)
            q_raw.append(json.dumps(job)[:_RAW_MAX])
            q_reason.append(str(e))
    quarantine = quarantine_rows(q_no, q_raw, pl.Series(q_reason, dtype=pl.Utf8))
    if not rows:
        return ParseResult(jobs=empty_jobs(), quarantine=quarantine, lines_read=len(jobs))
    raw = pl.DataFrame(rows, schema=_RAW_SCHEMA)
    out, superseded = dedupe_jobs(_derive(raw))
    warnings = []
    unknown = out.filter(~pl.col("_known_state") & pl.col("state").is_not_null())
    if unknown.height:
        warnings.append(f"{unknown.height} job(s) with a state Slurm does not define, recorded as UNKNOWN: "
                        f"{unknown['_state_raw'].unique().sort().head(5).to_list()}")
    return ParseResult(jobs=conform(out), quarantine=quarantine, lines_read=len(jobs), merged=superseded, warnings=warnings)
