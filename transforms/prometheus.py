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
A line that is not a sample, a comment or blank is quarantined with the reason, never dropped
(issue 41: one bad line no longer makes the whole file unrecognised): an unclosed brace, a sample
with no value or a non-numeric one, a timestamp that is not whole milliseconds, a line without a
metric name, a label given twice, a timestamp before 1980 or after the file was written (plus two
days). A scrape whose samples span more than a day carries a warning.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import polars as pl
from metapilot.transforms.canonical import empty_quarantine, quarantine_rows
from metapilot.transforms.data_checks import FUTURE_MARGIN, SCHEDULER_EPOCH

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


def _numeric_sample(line: str) -> bool:
    m = _SAMPLE_RE.match(line)
    return m is not None and parse_value(m.group(3)) is not None


SPAN_WARN = timedelta(days=1)  # one scrape is one moment: samples further apart than this are suspect


def is_exposition(head_lines: list[str]) -> bool:
    """Text exposition, recognised by its lines: with `# TYPE`/`# HELP` comments, at least half the
    other lines are samples (the rest are quarantined line by line); without them, at least three
    lines and nine in ten samples with a numeric value."""
    lines = [ln.strip() for ln in head_lines if ln.strip()]
    comments = [ln for ln in lines if ln.startswith("#")]
    samples = [ln for ln in lines if not ln.startswith("#")]
    typed = any(ln.startswith(("# TYPE ", "# HELP ")) for ln in comments)
    if not samples:
        return typed and len(comments) == len(lines)
    ok = sum(1 for ln in samples if _numeric_sample(ln))
    if typed:
        return ok >= 1 and ok >= 0.5 * len(samples)
    return len(samples) >= 3 and ok >= 0.9 * len(samples)


def _why_not_a_sample(s: str) -> str:
    """The reason a line that is not a comment does not parse as a sample."""
    if not re.match(_NAME, s):
        return "no metric name at the start of the line (name{labels} value [timestamp])"
    if "{" in s and "}" not in s:
        return "unclosed label braces: '{' without '}'"
    rest = re.sub(r"^" + _NAME + r"(\{.*\})?", "", s).split()
    if not rest:
        return "no sample value after the metric name"
    if len(rest) == 2 and not re.fullmatch(r"-?\d+", rest[1]):
        return f"timestamp {rest[1]!r} is not a whole number of milliseconds"
    return "not a Prometheus sample line (name{labels} value [timestamp])"


def _repeated_label(text: str | None) -> str | None:
    names = [m.group(1) for m in _LABEL_RE.finditer(text or "")]
    return next((n for i, n in enumerate(names) if n in names[:i]), None)


def is_query_range_json(head_lines: list[str]) -> bool:
    """A Prometheus API answer: a JSON object with `"resultType"` in its head."""
    text = "\n".join(head_lines).lstrip()
    return text.startswith("{") and '"resultType"' in text and '"data"' in text


def parse_exposition(lines: pl.DataFrame, default_node: str, default_ts: datetime) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Exposition lines (`line_no`, `line`) -> (metric rows, quarantine, lines skipped).

    Comments and blank lines are skipped; every other line is a row or quarantined. `default_ts`
    (the file's modification time) dates samples without a timestamp and bounds the others: a
    sample cannot be later than the file that holds it (plus `FUTURE_MARGIN` for clocks)."""
    latest = default_ts + FUTURE_MARGIN
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
            bad_no.append(line_no), bad_raw.append(line), bad_why.append(_why_not_a_sample(s))
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
        twice = _repeated_label(label_text)
        if twice is not None:
            bad_no.append(line_no), bad_raw.append(line), bad_why.append(f"label {twice!r} given twice: which value holds is unknown")
            continue
        try:
            ts = default_ts if ts_text is None else datetime.fromtimestamp(int(ts_text) / 1000, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            ts = None
        if ts is None or ts < SCHEDULER_EPOCH or ts > latest:
            shown = "out of range" if ts is None else ts.strftime("%Y-%m-%d %H:%M:%S")
            bad_no.append(line_no), bad_raw.append(line)
            bad_why.append(f"timestamp {ts_text} ms ({shown} UTC) is before {SCHEDULER_EPOCH.year} or after the file was "
                           f"written ({default_ts:%Y-%m-%d %H:%M} UTC) plus {FUTURE_MARGIN.days} days: a corrupt timestamp")
            continue
        rows.append((node_of(labels, default_node), name, _labels_json(labels), ts, value, line_no))
    df = pl.DataFrame(rows, schema=METRIC_SCHEMA, orient="row") if rows else empty_metrics()
    q = quarantine_rows(bad_no, bad_raw, pl.Series(bad_why, dtype=pl.Utf8)) if bad_no else empty_quarantine()
    return df, q, skipped


def span_warning(df: pl.DataFrame) -> str | None:
    """A warning when one scrape's samples lie more than `SPAN_WARN` apart (a clock or a file
    stitched together from several scrapes), naming the range."""
    if not df.height:
        return None
    lo, hi = df["ts"].min(), df["ts"].max()
    if hi - lo <= SPAN_WARN:
        return None
    return (f"the samples span {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC, more than {SPAN_WARN.days} day for one "
            "scrape: check the timestamps (they are loaded as given)")


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


__all__ = ["parse_exposition", "span_warning", "parse_query_range", "parse_labels", "is_exposition", "is_query_range_json",
           "node_of", "finite", "empty_metrics", "METRIC_SCHEMA"]
