"""Parse node metrics as Prometheus exports them into `node_metrics` rows (SPEC §3, §11).

Two inputs, both pure text in, frame out:

- the text exposition format (what node_exporter serves on /metrics): `# HELP`/`# TYPE` comments,
  then one sample a line, `name{label="value",...} value [timestamp_ms]`; values may be `NaN`,
  `+Inf`, `-Inf`; label values may hold escaped `\\"`, `\\\\` and `\\n`. A sample without a
  timestamp gets `default_ts` (the scrape time the caller knows, e.g. the file's mtime).
- the JSON a range query answers (`/api/v1/query_range`): `{"status": "success", "data":
  {"resultType": "matrix", "result": [{"metric": {...}, "values": [[epoch_s, "v"], ...]}]}}`
  (an instant query's `vector` with one `value` each is read the same way).

Rows: `node, metric, labels (JSON, sorted keys, __name__ left out), ts (UTC), value`. The node is
the `instance` label (without its port), else `default_node` (the file's name).
A line that is not a sample, a comment or blank is quarantined with the reason, never dropped.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import polars as pl
from metapilot.transforms.canonical import empty_quarantine, quarantine_rows

UTC_TS = pl.Datetime("us", "UTC")
METRIC_SCHEMA: dict[str, pl.DataType] = {
    "node": pl.Utf8, "metric": pl.Utf8, "labels": pl.Utf8, "ts": UTC_TS, "value": pl.Float64, "source_line": pl.Int64,
}
# Only the scrape target names the node: node_exporter itself uses `node` for NUMA nodes ("0", "1")
# and DRBD peers ("local", "remote"), and `nodename` only on node_uname_info.
NODE_LABELS = ("instance",)
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE_RE = re.compile(
    r"^(" + _NAME + r")"                                  # metric name
    r"(?:\{((?:[^\"}]|\"(?:[^\"\\]|\\.)*\")*)\})?"         # {labels}, braces inside quotes allowed
    r"[ \t]+(\S+)"                                         # value
    r"(?:[ \t]+(-?\d+))?[ \t]*$"                           # optional timestamp (ms)
)
_LABEL_RE = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"((?:[^\"\\]|\\.)*)\"\s*(,|$)")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def empty_metrics() -> pl.DataFrame:
    return pl.DataFrame(schema=METRIC_SCHEMA)


def _unescape(v: str) -> str:
    return re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], v)


def parse_labels(text: str | None) -> dict[str, str] | None:
    """`a="1",b="x\\"y"` -> {"a": "1", "b": 'x"y'}; None when the text is not a label set."""
    out: dict[str, str] = {}
    if not text or not text.strip():
        return out
    pos = 0
    while pos < len(text):
        m = _LABEL_RE.match(text, pos)
        if m is None or m.end() == pos:
            return None if text[pos:].strip() else out
        out[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return out


def parse_value(text: str) -> float | None:
    """A sample value as Prometheus writes it (`NaN`, `+Inf`, `-Inf`, `1.3e-06`); None if not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def node_of(labels: dict[str, str], default_node: str) -> str:
    """The node a series belongs to: its instance (port dropped) or node-name label, else the default."""
    for key in NODE_LABELS:
        v = labels.get(key)
        if v:
            return re.sub(r":\d+$", "", v) if key == "instance" else v
    return default_node


def _labels_json(labels: dict[str, str]) -> str:
    return json.dumps({k: labels[k] for k in sorted(labels) if k != "__name__"}, separators=(",", ":"))


def is_exposition(head_lines: list[str]) -> bool:
    """Text exposition: `# TYPE`/`# HELP` comments and lines that are samples (most of them)."""
    lines = [ln.strip() for ln in head_lines if ln.strip()]
    comments = [ln for ln in lines if ln.startswith("#")]
    samples = [ln for ln in lines if not ln.startswith("#")]
    typed = any(ln.startswith(("# TYPE ", "# HELP ")) for ln in comments)
    if not samples:
        return typed and len(comments) == len(lines)
    ok = sum(1 for ln in samples if _SAMPLE_RE.match(ln))
    return typed and ok >= 0.8 * len(samples)


def is_query_range_json(head_lines: list[str]) -> bool:
    """A Prometheus API answer: a JSON object with `"resultType"` in its head."""
    text = "\n".join(head_lines).lstrip()
    return text.startswith("{") and '"resultType"' in text and '"data"' in text


def parse_exposition(lines: pl.DataFrame, default_node: str, default_ts: datetime) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Exposition lines (`line_no`, `line`) -> (metric rows, quarantine, lines skipped).

    Comments and blank lines are skipped; every other line is a row or quarantined."""
    rows: list[tuple] = []
    bad_no: list[int] = []
    bad_raw: list[str] = []
    bad_why: list[str] = []
    skipped = 0
    label_cache: dict[str | None, dict | None] = {}
    for line_no, line in zip(lines["line_no"].to_list(), lines["line"].to_list()):
        s = (line or "").strip()
        if not s or s.startswith("#"):
            skipped += 1
            continue
        m = _SAMPLE_RE.match(s)
        if m is None:
            bad_no.append(line_no), bad_raw.append(line), bad_why.append("not a Prometheus sample line (name{labels} value [timestamp])")
            continue
        name, label_text, value_text, ts_text = m.groups()
        if label_text not in label_cache:
            label_cache[label_text] = parse_labels(label_text)
        labels = label_cache[label_text]
        value = parse_value(value_text)
        if labels is None or value is None:
            why = "malformed label set" if labels is None else f"sample value {value_text!r} is not a number"
            bad_no.append(line_no), bad_raw.append(line), bad_why.append(why)
            continue
        ts = default_ts if ts_text is None else datetime.fromtimestamp(int(ts_text) / 1000, tz=timezone.utc)
        rows.append((node_of(labels, default_node), name, _labels_json(labels), ts, value, line_no))
    df = pl.DataFrame(rows, schema=METRIC_SCHEMA, orient="row") if rows else empty_metrics()
    q = quarantine_rows(bad_no, bad_raw, pl.Series(bad_why, dtype=pl.Utf8)) if bad_no else empty_quarantine()
    return df, q, skipped


def parse_query_range(text: str, default_node: str) -> tuple[pl.DataFrame, list[str]]:
    """A query_range (or instant query) JSON answer -> (metric rows, problems found).

    Raises ValueError when the text is not such an answer (the caller quarantines the file's
    lines); a series with a bad point keeps its other points and the problem is reported."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not valid JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict):
        raise ValueError("not a Prometheus API answer (no top-level \"data\" object)")
    if doc.get("status") not in (None, "success"):
        raise ValueError(f"the query failed: status {doc.get('status')!r}, error {doc.get('error')!r}")
    data = doc["data"]
    kind = data.get("resultType")
    if kind not in ("matrix", "vector"):
        raise ValueError(f"resultType {kind!r}: only matrix (query_range) and vector answers hold node series")
    rows: list[tuple] = []
    problems: list[str] = []
    for i, series in enumerate(data.get("result") or []):
        labels = {str(k): str(v) for k, v in (series.get("metric") or {}).items()}
        name = labels.get("__name__", "value")
        points = series.get("values") if kind == "matrix" else [series.get("value")]
        node, lj = node_of(labels, default_node), _labels_json(labels)
        for p in points or []:
            try:
                ts = datetime.fromtimestamp(float(p[0]), tz=timezone.utc)
                value = float(p[1])
            except (TypeError, ValueError, IndexError, OverflowError):
                problems.append(f"series {i} ({name}): bad point {p!r}")
                continue
            rows.append((node, name, lj, ts, value, None))
    df = pl.DataFrame(rows, schema=METRIC_SCHEMA, orient="row") if rows else empty_metrics()
    return df, problems


def finite(df: pl.DataFrame) -> pl.DataFrame:
    """Rows whose value is a finite number (NaN/Inf are kept in the warehouse, left out of features)."""
    return df.filter(pl.col("value").is_finite())


__all__ = ["parse_exposition", "parse_query_range", "parse_labels", "is_exposition", "is_query_range_json",
           "node_of", "finite", "empty_metrics", "METRIC_SCHEMA"]
