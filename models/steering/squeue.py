"""Slurm's answers as frames: `squeue --json`, `sinfo --json`, `scontrol -o show partition`,
`sdiag`. Pure text-in, frame-out; the subprocess calls live in `slurm_cli.py`.

The JSON is parsed by the version it reports (meta.Slurm.version in 21.08-22.05, meta.slurm.version
from 23.02): 22.05 writes plain numbers and a state string; 23.02 and later write numbers as
{"set", "infinite", "number"} and states as lists. Both are read here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import polars as pl


class SlurmParseError(ValueError):
    """Slurm answered something this module cannot read: the message says what and where."""


JOB_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.Utf8, "array_job_id": pl.Utf8, "array_task_id": pl.Utf8, "array_task_string": pl.Utf8,
    "partition": pl.Utf8, "state": pl.Utf8, "reason": pl.Utf8, "priority": pl.Int64, "submit_s": pl.Int64,
    "eligible_s": pl.Int64, "start_s": pl.Int64, "time_limit_s": pl.Int64, "cpus": pl.Int64, "nodes": pl.Int64, "qos": pl.Utf8,
    "reservation": pl.Utf8, "dependency": pl.Utf8, "user": pl.Utf8,
}
NODE_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.Utf8, "state": pl.Utf8, "cpus": pl.Int64, "alloc_cpus": pl.Int64, "real_memory": pl.Int64,
    "alloc_memory": pl.Int64, "partitions": pl.List(pl.Utf8),
}


@dataclass(frozen=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"


def _load(text: str, what: str) -> dict:
    try:
        doc = json.loads(text, strict=False)  # a raw control character in a job's name is the user's, not an error
    except json.JSONDecodeError as e:
        raise SlurmParseError(f"{what} did not answer JSON ({e.msg} at line {e.lineno}): {text[:120]!r}") from None
    if not isinstance(doc, dict):
        raise SlurmParseError(f"{what} answered JSON that is not an object")
    errors = doc.get("errors") or []
    if errors:
        first = errors[0]
        raise SlurmParseError(f"{what} reported an error: {first.get('error') or first.get('description') or first}")
    return doc


def version_of(doc: dict) -> SlurmVersion:
    """The Slurm version a JSON answer reports."""
    meta = doc.get("meta") or {}
    v = (meta.get("Slurm") or meta.get("slurm") or {}).get("version") or {}
    try:
        return SlurmVersion(int(v["major"]), int(v["minor"]), int(v["micro"]))
    except (KeyError, TypeError, ValueError):
        raise SlurmParseError(f"no Slurm version in the answer's meta: {meta!r:.200}") from None


def _num(v) -> int | None:
    """22.05: a number or null; 23.02+: {"set": bool, "infinite": bool, "number": n}."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if v is None or isinstance(v, bool):
        return None
    return int(v)


def _state(v) -> str:
    if isinstance(v, list):
        return v[0] if v else ""
    return str(v or "")


def _text(v) -> str:
    return "" if v is None else str(v)


def parse_squeue(text: str) -> tuple[SlurmVersion, pl.DataFrame]:
    """`squeue --json` -> (version, one row per record: JOB_SCHEMA). An unsplit array is one
    record (array_task_string set, array_task_id null)."""
    doc = _load(text, "squeue --json")
    version = version_of(doc)
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise SlurmParseError("squeue --json has no list of jobs")
    try:
        cols = _job_columns(jobs)
    except (KeyError, TypeError, ValueError) as e:
        raise SlurmParseError(f"squeue --json: a job record cannot be read ({type(e).__name__}: {e})") from None
    return version, pl.DataFrame(cols, schema=JOB_SCHEMA)


def _job_columns(jobs: list[dict]) -> dict[str, list]:
    """Column by column (10,000 jobs in a few tens of milliseconds): numbers through `_num`, which
    reads both the plain and the {"set", "number"} shapes."""
    limit = [_num(j.get("time_limit")) for j in jobs]
    arr = [_num(j.get("array_job_id")) or 0 for j in jobs]
    task = [_num(j.get("array_task_id")) for j in jobs]
    return {
        "job_id": [str(_num(j["job_id"])) for j in jobs],
        "array_job_id": [str(a) if a else None for a in arr],
        "array_task_id": [None if t is None else str(t) for t in task],
        "array_task_string": [_text(j.get("array_task_string")) or None for j in jobs],
        "partition": [_text(j.get("partition")) for j in jobs],
        "state": [_state(j.get("job_state")) for j in jobs],
        "reason": [_text(j.get("state_reason")) for j in jobs],
        "priority": [_num(j.get("priority")) for j in jobs],
        "submit_s": [_num(j.get("submit_time")) for j in jobs],
        "eligible_s": [_num(j.get("eligible_time")) for j in jobs],
        "start_s": [_num(j.get("start_time")) for j in jobs],  # running: when it started (pending: Slurm's estimate)
        "time_limit_s": [None if x is None else x * 60 for x in limit],
        "cpus": [_num(j.get("cpus")) for j in jobs],
        "nodes": [_num(j.get("node_count")) for j in jobs],
        "qos": [_text(j.get("qos")) for j in jobs],
        "reservation": [_text(j.get("resv_name")) or None for j in jobs],
        "dependency": [_text(j.get("dependency")) or None for j in jobs],
        "user": [_text(j.get("user_name")) for j in jobs],
    }




def parse_sinfo(text: str) -> pl.DataFrame:
    """`sinfo --json` -> one row per node: NODE_SCHEMA."""
    doc = _load(text, "sinfo --json")
    rows = []
    for n in doc.get("nodes") or []:
        rows.append({"name": _text(n.get("name")), "state": _state(n.get("state")).lower(),
                     "cpus": _num(n.get("cpus")) or 0, "alloc_cpus": _num(n.get("alloc_cpus")) or 0,
                     "real_memory": _num(n.get("real_memory")) or 0, "alloc_memory": _num(n.get("alloc_memory")) or 0,
                     "partitions": list(n.get("partitions") or [])})
    return pl.DataFrame(rows, schema=NODE_SCHEMA)


def parse_partitions(text: str) -> dict[str, int]:
    """`scontrol -o show partition` -> {partition: PriorityTier} (Slurm compares jobs within a tier)."""
    out = {}
    for line in text.splitlines():
        name = re.search(r"\bPartitionName=(\S+)", line)
        if name:
            tier = re.search(r"\bPriorityTier=(\d+)", line)
            out[name.group(1)] = int(tier.group(1)) if tier else 1
    return out


def parse_sdiag_rpcs(text: str) -> dict[str, int]:
    """The RPC counts by message type from `sdiag` (what the loop costs slurmctld)."""
    out = {}
    for m in re.finditer(r"^\s*(REQUEST_\w+|RESPONSE_\w+|MESSAGE_\w+)\s*\(\s*\d+\)\s*count:(\d+)", text, re.MULTILINE):
        out[m.group(1)] = int(m.group(2))
    return out


def parse_config_weights(text: str) -> dict[str, int]:
    """PriorityWeight* values from `scontrol show config` (to size the site factor's step)."""
    out = {}
    for m in re.finditer(r"^(PriorityWeight\w+)\s*=\s*(\d+)\s*$", text, re.MULTILINE):
        out[m.group(1)] = int(m.group(2))
    return out


def parse_cluster_name(text: str) -> str | None:
    """ClusterName from `scontrol show config` (None when it names none)."""
    m = re.search(r"^ClusterName\s*=\s*(\S+)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def parse_site_factors(text: str) -> dict[str, int]:
    """`sprio -h -o %i|%S` -> {job id: site factor} (an unsplit array under its id)."""
    out = {}
    for line in text.splitlines():
        jid, sep, value = line.partition("|")
        if sep and jid.strip():
            try:
                out[jid.strip()] = int(float(value))
            except ValueError:
                continue
    return out
