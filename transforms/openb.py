"""Parse Alibaba's openb GPU-cluster trace (ATC'23 FGD paper): node lists and pod lists (SPEC §3, §11).

- node list: `sn,cpu_milli,memory_mib,gpu,model` -> `nodes` rows (`model` empty or `nan` on
  CPU-only nodes). A node named twice keeps its first line; the later ones are quarantined, with a
  warning (issue 41: two machines under one name are two nodes, or a copy error, never a silent merge).
- pod list: `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
  deletion_time,scheduled_time` (the sampled lists such as `multigpu50` carry only the first five
  columns) -> canonical job rows plus the placement amounts the job record has no room for:
  `cpu_milli` and `gpu_milli` (milli-GPU *per GPU*: 1000 for whole GPUs, less for a share of one).

Mapping: job_id is the pod's number (`openb-pod-0017` -> `0017`; its line number when the name has
none), job_name the pod name; times are seconds from the trace start, stored as
`TRACE_EPOCH + s` (the trace publishes no calendar date); `pod_phase` Running/Succeeded/Failed/
Pending -> RUNNING/COMPLETED/FAILED/PENDING; req_cpus = ceil(cpu_milli / 1000), req_gpus =
num_gpu, gpu_type = gpu_spec (`V100M16|V100M32`: any of these models), req_nodes = 1.
A list without times gives every pod the trace start as its submit time (state UNKNOWN) and a
warning. A line with the wrong number of fields, a non-numeric or negative amount, a negative time,
or a deletion before its creation (or a scheduling before it) is quarantined with the reason.
"""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
from metapilot.transforms.canonical import ParseResult, conform, empty_quarantine, quarantine_rows

TRACE_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
NODE_HEADER = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_HEADER = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
              "creation_time", "deletion_time", "scheduled_time")
POD_MIN_HEADER = POD_HEADER[:5]
PHASE_TO_STATE = {"Running": "RUNNING", "Succeeded": "COMPLETED", "Failed": "FAILED", "Pending": "PENDING"}
NODE_SCHEMA: dict[str, pl.DataType] = {
    "node": pl.Utf8, "cpu_milli": pl.Int64, "memory_mib": pl.Int64, "gpus": pl.Int64, "gpu_model": pl.Utf8,
    "source_line": pl.Int64,
}
EXTRA_SCHEMA: dict[str, pl.DataType] = {"source_line": pl.Int64, "cpu_milli": pl.Int64, "gpu_milli": pl.Int64}
MILLI = 1000
MAX_GPUS_PER_NODE = 64


def _header(line: str) -> tuple[str, ...]:
    return tuple(f.strip().lower() for f in line.lstrip("\ufeff").strip().split(","))


def detect_openb(head_lines: list[str]) -> str | None:
    """`openb-nodes` or `openb-pods` from the header line, else None."""
    first = next((ln for ln in head_lines if ln.strip()), "")
    h = _header(first)
    if h == NODE_HEADER:
        return "openb-nodes"
    if h[:5] == POD_MIN_HEADER and set(h) <= set(POD_HEADER):
        return "openb-pods"
    return None


def _split(lines: pl.DataFrame, names: tuple[str, ...]) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Header and blanks skipped; lines split on `,` into `names`; wrong field counts quarantined."""
    body = lines.filter(pl.col("line").str.strip_chars() != "")
    skipped = lines.height - body.height
    is_header = body["line"].map_elements(lambda s: _header(s) == names, return_dtype=pl.Boolean) if body.height else pl.Series([], dtype=pl.Boolean)
    skipped += int(is_header.sum()) if body.height else 0
    body = body.filter(~is_header) if body.height else body
    parts = body.with_columns(pl.col("line").str.strip_chars_end("\r").str.split(",").alias("f"))
    n = len(names)
    ok = parts.filter(pl.col("f").list.len() == n)
    bad = parts.filter(pl.col("f").list.len() != n)
    q = quarantine_rows(bad["line_no"], bad["line"], f"expected {n} comma-separated fields ({','.join(names)})") if bad.height else empty_quarantine()
    fields = ok.select("line_no", "line", *[pl.col("f").list.get(i).str.strip_chars().alias(c) for i, c in enumerate(names)])
    return fields, q, skipped


def _int(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.Float64, strict=False).round(0).cast(pl.Int64, strict=False)


def _reject(df: pl.DataFrame, checks: list[tuple[pl.Expr, str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split rows into (good, quarantine) by the first failing check's reason."""
    reason = pl.lit(None, dtype=pl.Utf8)
    for bad_when, why in reversed(checks):
        reason = pl.when(bad_when.fill_null(False)).then(pl.lit(why)).otherwise(reason)
    df = df.with_columns(reason.alias("__why"))
    bad = df.filter(pl.col("__why").is_not_null())
    q = quarantine_rows(bad["line_no"], bad["line"], bad["__why"]) if bad.height else empty_quarantine()
    return df.filter(pl.col("__why").is_null()).drop("__why"), q


def parse_node_list(lines: pl.DataFrame) -> tuple[pl.DataFrame, ParseResult]:
    """Node-list lines (`line_no`, `line`) -> (nodes frame, counts/quarantine as a ParseResult
    whose `jobs` is empty and whose `merged` counts nodes listed again)."""
    f, q0, skipped = _split(lines, NODE_HEADER)
    f = f.with_columns(_int("cpu_milli").alias("cpu"), _int("memory_mib").alias("mem"), _int("gpu").alias("g"))
    good, q1 = _reject(f, [
        (pl.col("sn") == "", "empty node name (sn)"),
        (pl.col("cpu").is_null() | (pl.col("cpu") <= 0), "cpu_milli is not a positive number"),
        (pl.col("mem").is_null() | (pl.col("mem") < 0), "memory_mib is not a non-negative number"),
        (pl.col("g").is_null() | (pl.col("g") < 0) | (pl.col("g") > MAX_GPUS_PER_NODE),
         f"gpu is not a GPU count between 0 and {MAX_GPUS_PER_NODE}"),
    ])
    model = pl.when(pl.col("model").str.to_lowercase().is_in(["", "nan", "none", "null"])).then(None).otherwise(pl.col("model"))
    good = good.with_columns(pl.col("line_no").min().over("sn").alias("__first"))
    again = good.filter(pl.col("line_no") != pl.col("__first"))
    good = good.filter(pl.col("line_no") == pl.col("__first"))
    q2 = quarantine_rows(again["line_no"], again["line"], again.select(pl.format(
        "node name listed again (first at line {}): each node is listed once; the first listing is kept",
        "__first")).to_series()) if again.height else empty_quarantine()
    nodes = good.select(pl.col("sn").alias("node"), pl.col("cpu").alias("cpu_milli"), pl.col("mem").alias("memory_mib"),
                        pl.col("g").alias("gpus"), model.alias("gpu_model"), pl.col("line_no").alias("source_line"))
    q = pl.concat([q0, q1, q2], how="vertical_relaxed")
    res = ParseResult(conform(pl.DataFrame()), q, lines.height, skipped=skipped)
    if again.height:
        names = again["sn"].unique(maintain_order=True).to_list()
        res.warnings.append(f"{again.height} line(s) name a node listed before ({', '.join(names[:5])}"
                            f"{', ...' if len(names) > 5 else ''}): quarantined, and the capacity counts each name once; "
                            "if they are different machines, give them distinct names and ingest the list again")
    return nodes.cast(NODE_SCHEMA), res


def parse_pod_list(lines: pl.DataFrame, header: tuple[str, ...], cluster: str) -> tuple[ParseResult, pl.DataFrame]:
    """Pod-list lines -> (ParseResult with canonical job rows, extras: source_line, cpu_milli, gpu_milli)."""
    f, q0, skipped = _split(lines, header)
    timed = "creation_time" in header
    for c in POD_HEADER:
        if c not in f.columns:
            f = f.with_columns(pl.lit(None, dtype=pl.Utf8).alias(c))
    f = f.with_columns(
        _int("cpu_milli").alias("cpu"), _int("memory_mib").alias("mem"), _int("num_gpu").alias("ng"),
        _int("gpu_milli").alias("gm"), _int("creation_time").alias("t_c"), _int("deletion_time").alias("t_d"),
        _int("scheduled_time").alias("t_s"),
    )
    has = lambda c: pl.col(c).is_not_null() & (pl.col(c) != "") & (pl.col(c).str.to_lowercase() != "nan")  # noqa: E731
    checks = [
        (pl.col("name") == "", "empty pod name"),
        (pl.col("cpu").is_null() | (pl.col("cpu") < 0), "cpu_milli is not a non-negative number"),
        (pl.col("mem").is_null() | (pl.col("mem") < 0), "memory_mib is not a non-negative number"),
        (pl.col("ng").is_null() | (pl.col("ng") < 0) | (pl.col("ng") > MAX_GPUS_PER_NODE), "num_gpu is not a GPU count"),
        (pl.col("gm").is_null() | (pl.col("gm") < 0) | (pl.col("gm") > MILLI), "gpu_milli is not between 0 and 1000"),
        ((pl.col("ng") > 0) & (pl.col("gm") == 0), "num_gpu > 0 with gpu_milli 0"),
        ((pl.col("ng") > 1) & (pl.col("gm") < MILLI), "a share of a GPU (gpu_milli < 1000) with num_gpu > 1"),
    ]
    if timed:
        checks += [
            (has("creation_time") & pl.col("t_c").is_null(), "creation_time is not a number"),
            (has("deletion_time") & pl.col("t_d").is_null(), "deletion_time is not a number"),
            (has("scheduled_time") & pl.col("t_s").is_null(), "scheduled_time is not a number"),
            (pl.col("t_c").is_null(), "no creation_time"),
            ((pl.col("t_c") < 0) | (pl.col("t_d") < 0) | (pl.col("t_s") < 0), "negative time"),
            (pl.col("t_d") < pl.col("t_c"), "deletion_time before creation_time"),
            (pl.col("t_s") < pl.col("t_c"), "scheduled_time before creation_time"),
            (pl.col("t_d") < pl.col("t_s"), "deletion_time before scheduled_time"),
        ]
    good, q1 = _reject(f, checks)
    ts = lambda c: (pl.lit(TRACE_EPOCH) + pl.duration(seconds=pl.col(c))).cast(pl.Datetime("us", "UTC"))  # noqa: E731
    digits = pl.col("name").str.extract(r"(\d+)$")
    gpu_spec = pl.when(has("gpu_spec")).then(pl.col("gpu_spec")).otherwise(None)
    if timed:
        submit, start, end = ts("t_c"), ts("t_s"), ts("t_d")
        state = pl.col("pod_phase").replace_strict(PHASE_TO_STATE, default="UNKNOWN")
        wait, run = pl.col("t_s") - pl.col("t_c"), pl.col("t_d") - pl.col("t_s")
    else:
        submit = pl.lit(TRACE_EPOCH).cast(pl.Datetime("us", "UTC"))
        start = end = pl.lit(None, dtype=pl.Datetime("us", "UTC"))
        state, wait, run = pl.lit("UNKNOWN"), pl.lit(None, dtype=pl.Int64), pl.lit(None, dtype=pl.Int64)
    jobs = good.select(
        pl.lit(cluster).alias("cluster"),
        pl.coalesce(digits, pl.col("line_no").cast(pl.Utf8)).alias("job_id"),
        pl.lit("openb").alias("source_format"), pl.col("line_no").alias("source_line"),
        pl.col("name").alias("job_name"), pl.when(has("qos")).then(pl.col("qos")).otherwise(None).alias("qos"),
        state.alias("state"), submit.alias("submit_time"), submit.alias("eligible_time"),
        start.alias("start_time"), end.alias("end_time"), wait.alias("wait_s"), run.alias("run_s"),
        ((pl.col("cpu") + MILLI - 1) // MILLI).alias("req_cpus"), pl.lit(1).alias("req_nodes"),
        pl.col("mem").alias("req_mem_mib"), pl.col("ng").alias("req_gpus"), gpu_spec.alias("gpu_type"),
    )
    extras = good.select(pl.col("line_no").alias("source_line"), pl.col("cpu").alias("cpu_milli"),
                         pl.col("gm").alias("gpu_milli")).cast(EXTRA_SCHEMA)
    warnings = [] if timed else [
        "the pod list has no creation/deletion/scheduled times: every pod gets the trace start as its submit time; "
        "a time replay treats them as arriving at once and never leaving (use --mode inflate)"]
    res = ParseResult(conform(jobs), pl.concat([q0, q1], how="vertical_relaxed"), lines.height, skipped=skipped,
                      warnings=warnings)
    return res, extras


__all__ = ["detect_openb", "parse_node_list", "parse_pod_list", "TRACE_EPOCH", "NODE_HEADER", "POD_HEADER"]


def placement_pods(jobs: pl.DataFrame, extras: pl.DataFrame) -> pl.DataFrame:
    """The replay's pods frame (`models.placement.engine.build_workload`) from a parsed pod list,
    as `sql/placement/pods.sql` reads it from the warehouse: sizes, GPU model, creation time and
    how long the pod holds its resources (end - scheduled, else - created)."""
    j = jobs.join(extras, on="source_line")
    return j.select(
        "cpu_milli", pl.col("req_mem_mib").alias("memory_mib"), pl.col("req_gpus").alias("num_gpu"), "gpu_milli",
        pl.col("gpu_type").alias("gpu_spec"),
        pl.col("submit_time").dt.epoch("s").cast(pl.Float64).alias("creation_s"),
        (pl.col("end_time") - pl.coalesce("start_time", "submit_time")).dt.total_seconds().cast(pl.Float64)
        .alias("duration_s"),
    )
