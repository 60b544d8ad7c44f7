"""Check each parsed batch of job rows against the GX suite kept in the repo.

The suite (`warehouse/expectations/jobs.json`, a GX 1.x ExpectationSuite) is the single source of
truth. Rows that GX lists as unexpected for a row-level expectation are returned in `failed` with
the expectation's name, so the loader can quarantine their lines (`mostly` only decides the
expectation's success, not whether its unexpected rows are kept); the suite's result (`summary`)
goes to `data_check_runs` and the ingest summary.

Why two modes. GX over a whole batch on pandas costs ~0.2-0.35 s of fixed overhead (about 10 ms
per expectation: GX builds a metric graph through pydantic) plus ~1.3 us per row: 3.5-7 us/row at
100k rows, over the ingest budget (>= 100k jobs/s end to end). GX on a DuckDB/SQL datasource
has the same per-expectation overhead and does not work with duckdb-engine 0.17 + duckdb 2.0
(MetricResolutionError on table.row_count). So by default (`mode="fast"`) each expectation of the
suite is *compiled* into a polars predicate "this row may violate it", and GX evaluates, on the
suspect rows only, just the expectations that have suspects plus the schema-level ones (which need
no rows, so GX runs on every batch). GX's verdict on those rows is the result: a precheck false
positive is cleared by GX, and because every violation is among the suspects, GX's unexpected
counts are the whole batch's. Expectations the compiler does not know (or that use `mostly` < 1,
a `row_condition`, suite parameters, or a dtype it cannot mirror) are run by GX over the whole
batch. Cost: ~0.15 us/row for a clean batch, plus ~10 ms per expectation that has suspects and
~1.3 us per suspect row. `mode="full"` (or `METAPILOT_VALIDATION=full`) runs the whole suite
through GX over every row, for audits; the tests check that both modes agree.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from metapilot.ground.paths import expectations_file

if TYPE_CHECKING:  # importing GX costs ~2.5 s: only when validation actually runs
    import great_expectations as gx

SUITE_PATH = expectations_file()
SUITE_NAME = "metapilot_jobs"
FAILED_SCHEMA: dict[str, pl.DataType] = {"source_line": pl.Int64, "reason": pl.Utf8}

Mode = Literal["fast", "full"]

# Expectations that look only at the batch's columns, not its rows: GX can judge them on any subset.
_SCHEMA_ONLY = frozenset({
    "expect_table_columns_to_match_ordered_list", "expect_table_columns_to_match_set",
    "expect_table_column_count_to_equal", "expect_table_column_count_to_be_between",
    "expect_column_to_exist",
})
_RESULT_FORMAT = {"result_format": "COMPLETE", "partial_unexpected_count": 0,
                  "return_unexpected_index_query": False}


class SuiteError(RuntimeError):
    """The suite could not be loaded or evaluated: the batch's validity is unknown."""


@dataclass
class DataCheckOutcome:
    """`good`: rows passing every row-level expectation (input schema); `failed`: one row per
    failing row (source_line, reason); `summary`: the suite's result for `data_check_runs`."""

    good: pl.DataFrame
    failed: pl.DataFrame
    summary: dict


@dataclass(frozen=True)
class _Check:
    """One expectation of the suite, as the fast path sees it."""

    index: int  # position in the suite; carried through GX in meta so results map back
    type: str
    kwargs: dict
    config: dict  # the suite's JSON entry, as GX will evaluate it
    column: str | None  # for the summary: "col", "col_a, col_b" or None (table-level)

    @property
    def label(self) -> str:
        return f"{self.type}({self.column or ''})"


# --------------------------------------------------------------------------- suite


def _read_suite_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SuiteError(f"cannot read the data-check suite {path}: {e}") from e


def load_suite(path: str | Path | None = None) -> gx.ExpectationSuite:
    """The repo's suite as a GX ExpectationSuite.

    GX logs and drops an expectation whose configuration it rejects; here that is an error, so a
    typo in the JSON cannot silently switch a check off.
    """
    with _quiet():  # GX's import chain emits DeprecationWarnings from third-party modules
        import great_expectations as gx

    path = Path(path) if path else SUITE_PATH
    d = _read_suite_json(path)
    try:
        with _quiet():
            suite = gx.ExpectationSuite(**d)
    except Exception as e:  # GX raises pydantic errors for bad kwargs, drops unknown types
        raise SuiteError(f"{path}: GX rejects the suite: {e}") from e
    want = len(d.get("expectations", []))
    if len(suite.expectations) != want:
        raise SuiteError(f"{path}: GX accepted {len(suite.expectations)} of {want} expectations; "
                         "check the rejected ones' type and kwargs against GX 1.x")
    return suite


def _column_label(type_: str, kwargs: dict) -> str | None:
    """"col" for column expectations, "col_a, col_b" for pairs, "a, b, c" for multicolumn ones,
    None for table-level ones (their column_list is the expected schema, not what they check)."""
    if "column" in kwargs:
        return str(kwargs["column"])
    if "column_A" in kwargs:
        return f"{kwargs['column_A']}, {kwargs['column_B']}"
    if isinstance(kwargs.get("column_list"), list) and not type_.startswith("expect_table_"):
        return ", ".join(map(str, kwargs["column_list"]))
    return None


@dataclass
class _Plan:
    """A suite file, parsed once per version, with the GX sub-suites built from it so far."""

    name: str
    checks: tuple[_Check, ...]
    suites: dict[tuple[int, ...], Any]
    path: str = ""
    vetted: bool = False


@lru_cache(maxsize=8)
def _plan(path: str, mtime_ns: int) -> _Plan:
    # GX vets the whole suite the first time GX runs in the process (`_GX.validate`) and in the
    # tests; a clean batch that the compiled predicates clear never pays GX's multi-second import.
    d = _read_suite_json(Path(path))
    checks = []
    for i, e in enumerate(d["expectations"]):
        t = e.get("type") or e.get("expectation_type")
        kw = dict(e.get("kwargs") or {})
        cfg = {k: v for k, v in e.items() if k != "id"}
        cfg["meta"] = {**(e.get("meta") or {}), "metapilot_index": i}
        checks.append(_Check(i, t, kw, cfg, _column_label(t, kw)))
    return _Plan(d.get("name") or SUITE_NAME, tuple(checks), {}, path)


def _suite_plan(path: str | Path | None) -> _Plan:
    p = Path(path) if path else SUITE_PATH
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as e:
        raise SuiteError(f"cannot read the data-check suite {p}: {e}") from e
    return _plan(str(p), mtime)


# --------------------------------------------------------------------------- precheck compiler


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_plain(kwargs: dict) -> bool:
    """No suite parameters ({"$PARAMETER": ...}) anywhere in the kwargs."""
    return "$PARAMETER" not in json.dumps(kwargs, default=str)


def _suspect_expr(c: _Check, schema: pl.Schema) -> pl.Expr | None:
    """A polars predicate true for every row that may violate `c` (superset is fine: GX confirms).

    None means "no translation": GX runs `c` over the whole batch. Semantics follow GX's pandas
    engine: nulls (and NaN) are "missing" and ignored by column-map expectations.
    """
    kw = c.kwargs
    if kw.get("row_condition") or kw.get("mostly", 1) != 1 or not _is_plain(kw):
        return None
    if c.type == "expect_column_pair_values_a_to_be_greater_than_b":
        return _pair_greater_expr(kw, schema)
    col = kw.get("column")
    if not isinstance(col, str) or col not in schema:
        return None
    x = pl.col(col)
    missing = (x.is_null() | x.is_nan()) if schema[col].is_float() else x.is_null()
    present = ~missing
    if c.type == "expect_column_values_to_not_be_null":
        return missing
    if c.type in ("expect_column_values_to_be_in_set", "expect_column_values_to_not_be_in_set"):
        vs = kw.get("value_set")
        if not isinstance(vs, list) or not vs:
            return None
        inside = x.is_in(vs)
        return present & (inside if c.type == "expect_column_values_to_not_be_in_set" else ~inside)
    if c.type == "expect_column_values_to_be_between":
        lo, hi = kw.get("min_value"), kw.get("max_value")
        if (lo is None and hi is None) or not all(v is None or _is_number(v) for v in (lo, hi)):
            return None
        if not schema[col].is_numeric():
            return None
        ok = pl.lit(True)
        if lo is not None:
            ok = ok & ((x > lo) if kw.get("strict_min") else (x >= lo))
        if hi is not None:
            ok = ok & ((x < hi) if kw.get("strict_max") else (x <= hi))
        return present & ~ok
    if c.type == "expect_column_values_to_match_regex":
        if schema[col] != pl.Utf8 or not isinstance(kw.get("regex"), str):
            return None  # GX matches str(value): for other dtypes the text differs from polars'
        # Rust and Python regex may disagree on non-ASCII text: send such rows to GX as well.
        return present & (~x.str.contains(kw["regex"]) | (x.str.len_bytes() != x.str.len_chars()))
    return None


def _pair_greater_expr(kw: dict, schema: pl.Schema) -> pl.Expr | None:
    """GX pandas: A >= B (or A > B) on the rows `ignore_row_if` keeps; a null side compares False."""
    a_name, b_name = kw.get("column_A"), kw.get("column_B")
    if a_name not in schema or b_name not in schema or schema[a_name].is_float() or schema[b_name].is_float():
        return None
    a, b = pl.col(a_name), pl.col(b_name)
    ok = ((a >= b) if kw.get("or_equal") else (a > b)).fill_null(False)
    ignore = kw.get("ignore_row_if", "both_values_are_missing")
    if ignore == "either_value_is_missing":
        return a.is_not_null() & b.is_not_null() & ~ok
    if ignore == "both_values_are_missing":
        return ~(a.is_null() & b.is_null()) & ~ok
    if ignore == "neither":
        return ~ok
    return None


def _schema_holds(c: _Check, df: pl.DataFrame) -> bool:
    """Exactly GX's verdict for the table-level expectations whose answer is plain from the frame's
    columns; False (let GX judge) for any other or when in doubt."""
    cols = list(df.columns)
    if c.type == "expect_table_columns_to_match_ordered_list":
        return cols == list(c.kwargs.get("column_list") or [])
    if c.type == "expect_table_columns_to_match_set" and c.kwargs.get("exact_match", True):
        return set(cols) == set(c.kwargs.get("column_set") or [])
    if c.type == "expect_column_to_exist" and "column_index" not in c.kwargs:
        return c.kwargs.get("column") in cols
    if c.type == "expect_table_column_count_to_equal":
        return len(cols) == c.kwargs.get("value")
    return False


def _suspects(df: pl.DataFrame, checks: tuple[_Check, ...]) -> tuple[dict[int, str], pl.DataFrame]:
    """Evaluate every compiled predicate in one polars pass.

    Returns the checks GX must run on the whole batch ({index: why}) and a frame of one boolean
    column per compiled check (name = its index).
    """
    whole: dict[int, str] = {}
    exprs: dict[int, pl.Expr] = {}
    for c in checks:
        if c.type in _SCHEMA_ONLY:
            continue
        e = _suspect_expr(c, df.schema)
        if e is None:
            whole[c.index] = "not compiled"
        else:
            exprs[c.index] = e.fill_null(True).alias(str(c.index))
    try:
        flags = df.select(list(exprs.values()))
    except pl.exceptions.PolarsError:  # one predicate does not fit the data: find it, GX decides
        cols = []
        for i, e in exprs.items():
            try:
                cols.append(df.select(e).to_series())
            except pl.exceptions.PolarsError:
                whole[i] = "precheck failed"
        flags = pl.DataFrame(cols)
    return whole, flags


# --------------------------------------------------------------------------- GX


class _GX:
    """One ephemeral GX context, pandas datasource and batch definition per process (setup and
    the GX import are slow); a lock because GX's context is not thread-safe."""

    _lock = threading.Lock()
    _batch_def: Any = None

    @classmethod
    def batch_definition(cls) -> Any:
        if cls._batch_def is None:
            import great_expectations as gx
            from great_expectations.data_context.types.base import (
                DataContextConfig,
                InMemoryStoreBackendDefaults,
                ProgressBarsConfig,
            )

            cfg = DataContextConfig(
                analytics_enabled=False,
                progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
                store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
            )
            ctx = gx.get_context(mode="ephemeral", project_config=cfg)
            asset = ctx.data_sources.add_pandas("metapilot_data_checks").add_dataframe_asset("jobs")
            cls._batch_def = asset.add_batch_definition_whole_dataframe("batch")
        return cls._batch_def

    @staticmethod
    def suite(plan: _Plan, checks: list[_Check]) -> Any:
        """The sub-suite of `checks` (built once per combination: GX's constructor is not free)."""
        import great_expectations as gx

        key = tuple(c.index for c in checks)
        s = plan.suites.get(key)
        if s is None:
            if len(plan.suites) > 256:
                plan.suites.clear()
            s = plan.suites[key] = gx.ExpectationSuite(name=plan.name, expectations=[c.config for c in checks])
        return s

    @classmethod
    def validate(cls, plan: _Plan, checks: list[_Check], df: pl.DataFrame, positions: pl.Series | None) -> dict[int, dict]:
        """Run `checks` through GX on `df`; return per check index: success, unexpected_count and
        the failing rows' positions in the caller's batch (`positions[i]` for row i of `df`)."""
        if not checks:
            return {}
        if not plan.vetted:
            load_suite(plan.path or None)  # let GX vet every expectation once
            plan.vetted = True
        pdf = df.to_pandas()
        if positions is not None:
            pdf.index = positions.to_numpy()
        with cls._lock, _quiet():
            batch = cls.batch_definition().get_batch(batch_parameters={"dataframe": pdf})
            res = batch.validate(cls.suite(plan, checks), result_format=_RESULT_FORMAT)
        out: dict[int, dict] = {}
        for r in res.results:
            cfg = r.expectation_config
            i = int((cfg.meta or {})["metapilot_index"])
            if r.exception_info and r.exception_info.get("raised_exception"):
                raise SuiteError(f"GX could not evaluate {cfg.type}({_column_label(cfg.type, cfg.kwargs) or ''}): "
                                 f"{r.exception_info.get('exception_message')}")
            for v in (r.exception_info or {}).values():  # GX nests per-metric errors in 1.x
                if isinstance(v, dict) and v.get("raised_exception"):
                    raise SuiteError(f"GX could not evaluate {cfg.type}({_column_label(cfg.type, cfg.kwargs) or ''}): "
                                     f"{v.get('exception_message')}")
            rr = r.result or {}
            out[i] = {"success": bool(r.success), "unexpected_count": rr.get("unexpected_count"),
                      "rows": rr.get("unexpected_index_list")}
        return out


class _quiet:
    """Silence GX's loggers and library warnings for the duration of a call."""

    def __enter__(self) -> None:
        self._log = logging.getLogger("great_expectations")
        self._level = self._log.level
        self._log.setLevel(logging.CRITICAL)  # failures surface as SuiteError instead
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: object) -> None:
        self._w.__exit__(*exc)
        self._log.setLevel(self._level)


# --------------------------------------------------------------------------- entry point


# Bounds no real job crosses (issue 37): absurd values (a submit time of year 9999, an end in
# 2326, 10^12 cores) would otherwise load and make a replay run for hours week by week to 9999.
SCHEDULER_EPOCH = datetime(1980, 1, 1, tzinfo=timezone.utc)  # before any batch scheduler's accounting log
FUTURE_MARGIN = timedelta(days=2)  # after the ingest time: clocks and zones differ by hours, not days
MAX_CORES = 50_000_000  # several times the largest machine ever built
MAX_NODES, MAX_GPUS = 5_000_000, 5_000_000
MAX_MEM_MIB = 1 << 40  # an exbibyte
_TIME_COLUMNS = ("submit_time", "eligible_time", "start_time", "end_time")
_SIZE_BOUNDS = {"req_cpus": MAX_CORES, "alloc_cpus": MAX_CORES, "req_nodes": MAX_NODES, "alloc_nodes": MAX_NODES,
                "req_gpus": MAX_GPUS, "alloc_gpus": MAX_GPUS, "req_mem_mib": MAX_MEM_MIB, "alloc_mem_mib": MAX_MEM_MIB}
# Formats whose times may count from 1970-01-01 without a calendar date: the openb trace, and SWF
# with no UnixStartTime in its header (offsets from the epoch). Only the upper bound applies to them.
UNTIMED_FORMATS = ("openb", "swf")


def bound_failures(df: pl.DataFrame, now: datetime) -> tuple[pl.DataFrame, list[dict]]:
    """Rows whose times fall before `SCHEDULER_EPOCH` or after `now` (the ingest time) plus
    `FUTURE_MARGIN`, or whose sizes exceed any machine: (source_line, reason) and one result per
    bound for the summary. Pure: the ingest time is handed in."""
    late = now + FUTURE_MARGIN
    dated = ~pl.col("source_format").is_in(list(UNTIMED_FORMATS)).fill_null(False)
    checks: list[tuple[str, str, pl.Expr, pl.Expr]] = []
    for c in _TIME_COLUMNS:
        if c in df.columns:
            x = pl.col(c)
            checks.append((c, "within_time_bounds", (x < SCHEDULER_EPOCH) & dated,
                           pl.format(f"{c} {{}} is before {SCHEDULER_EPOCH.date()}, earlier than any scheduler's "
                                     "accounting (an unset time written as 0?)", x.dt.strftime("%Y-%m-%d %H:%M:%S"))))
            checks.append((c, "within_time_bounds", x > late,
                           pl.format(f"{c} {{}} is after the ingest time ({now:%Y-%m-%d %H:%M} UTC) plus "
                                     f"{FUTURE_MARGIN.days} days: a corrupt or mis-zoned time", x.dt.strftime("%Y-%m-%d %H:%M:%S"))))
    for c, hi in _SIZE_BOUNDS.items():
        if c in df.columns:
            checks.append((c, "within_size_bounds", pl.col(c) > hi,
                           pl.format(f"{c} {{}} is more than any machine has (limit {hi:,})", pl.col(c))))
    if not checks or df.height == 0:
        return pl.DataFrame(schema=FAILED_SCHEMA), []
    # One pass of cheap comparisons over every row; the reasons (a strftime per time) are written
    # only for the rows that failed, which a clean log has none of (issue 53: formatting them for
    # every row cost as much as parsing the line).
    flags = df.select(*[e.fill_null(False).alias(f"f{i}") for i, (_, _, e, _) in enumerate(checks)])
    counts = flags.sum().row(0)
    results = [{"expectation": f"metapilot_{name}", "column": col, "success": n == 0, "unexpected_count": n}
               for (col, name, _, _), n in zip(checks, counts)]
    parts = []
    if any(counts):
        hit = [i for i, n in enumerate(counts) if n]
        mask = flags.select(pl.any_horizontal(pl.col(f"f{i}") for i in hit)).to_series()
        bad, bad_flags = df.filter(mask), flags.filter(mask)
        for i in hit:
            parts.append(bad.filter(bad_flags[f"f{i}"]).select(pl.col("source_line").cast(pl.Int64),
                                                               checks[i][3].alias("reason")))
    merged = {}
    for r in results:  # one result per column and bound kind
        k = (r["expectation"], r["column"])
        cur = merged.setdefault(k, {**r, "unexpected_count": 0, "success": True})
        cur["unexpected_count"] += r["unexpected_count"]
        cur["success"] = cur["success"] and r["success"]
    failed = (pl.concat(parts).group_by("source_line", maintain_order=True).agg(pl.col("reason").str.join("; "))
              if parts else pl.DataFrame(schema=FAILED_SCHEMA))
    return failed.cast(FAILED_SCHEMA), list(merged.values())


def check_jobs(df: pl.DataFrame, mode: Mode | None = None, suite_path: str | Path | None = None,
               now: datetime | None = None) -> DataCheckOutcome:
    """Validate one batch of canonical job rows (PARSED_SCHEMA) with the repo's GX suite, and the
    bounds no real job crosses (`bound_failures`; `now`: the ingest time, default the clock).

    `mode`: "fast" (default; precheck compiled from the suite, GX confirms suspects) or "full"
    (GX over every row); `METAPILOT_VALIDATION` sets the default. Raises SuiteError when the
    suite cannot be read or GX cannot evaluate an expectation (the batch's validity is unknown).
    """
    outcome = _check_suite(df, mode, suite_path)
    failed_b, results_b = bound_failures(df, now or datetime.now(timezone.utc))
    if failed_b.height == 0:  # the summary lists the suite's results, and a bound only when rows failed it
        return outcome
    summary = {**outcome.summary, "results": outcome.summary["results"] + [r for r in results_b if not r["success"]]}
    failed = (pl.concat([outcome.failed, failed_b]).group_by("source_line", maintain_order=True)
              .agg(pl.col("reason").str.join("; ")).cast(FAILED_SCHEMA))
    good = outcome.good.join(failed_b.select("source_line"), on="source_line", how="anti")
    summary.update(success=False, failed_rows=failed.height)
    return DataCheckOutcome(good=good, failed=failed, summary=summary)


def _check_suite(df: pl.DataFrame, mode: Mode | None = None, suite_path: str | Path | None = None) -> DataCheckOutcome:
    """The GX suite's verdict on one batch (`check_jobs` adds the bounds)."""
    mode = mode or os.environ.get("METAPILOT_VALIDATION", "fast")  # type: ignore[assignment]
    if mode not in ("fast", "full"):
        raise ValueError(f"validation mode must be 'fast' or 'full', not {mode!r}")
    plan = _suite_plan(suite_path)
    name, checks = plan.name, plan.checks
    n = df.height
    results: dict[int, dict] = {}
    gx_rows = n
    if mode == "full":
        results = _GX.validate(plan, list(checks), df, None)
    else:
        whole, flags = _suspects(df, checks)
        if whole:
            results.update(_GX.validate(plan, [c for c in checks if c.index in whole], df, None))
        counts = flags.sum().row(0, named=True) if flags.width else {}
        hit = {int(k) for k, v in counts.items() if v}
        schema_ok = {c.index for c in checks if c.type in _SCHEMA_ONLY and _schema_holds(c, df)}
        on_suspects = [c for c in checks if c.index in hit or (c.type in _SCHEMA_ONLY and c.index not in schema_ok)]
        if hit:
            pos = flags.select(pl.any_horizontal(pl.col([str(i) for i in sorted(hit)]))).to_series().arg_true()
        else:
            pos = pl.Series("pos", [], dtype=pl.UInt32)
        gx_rows = len(pos) + (n if whole else 0)
        if on_suspects:  # a batch the suite's compiled predicates clear needs no GX run (nor its import)
            results.update(_GX.validate(plan, on_suspects, df[pos], pos))
        for i in schema_ok:  # as GX reports a table-level success: no row count
            results[i] = {"success": True, "unexpected_count": None, "rows": []}
        for c in checks:  # compiled and no suspect: no row can fail it
            results.setdefault(c.index, {"success": True, "unexpected_count": 0, "rows": []})

    parts, out_results = [], []
    for c in checks:
        r = results[c.index]
        if r["rows"]:
            parts.append(pl.DataFrame({"pos": pl.Series(r["rows"], dtype=pl.Int64), "k": c.index}))
        uc = r["unexpected_count"]
        out_results.append({"expectation": c.type, "column": c.column, "success": r["success"],
                            "unexpected_count": None if uc is None else int(uc)})
    if parts:  # one row per failing row, its expectations' names in suite order
        labels = pl.DataFrame({"k": [c.index for c in checks],
                               "reason": [f"failed expectation {c.label}" for c in checks]})
        per_row = (pl.concat(parts).unique().join(labels, on="k").sort("pos", "k")
                   .group_by("pos", maintain_order=True).agg(pl.col("reason").str.join("; ")))
        bad_pos = per_row["pos"]
        line = df["source_line"].cast(pl.Int64).gather(bad_pos) if "source_line" in df.columns \
            else pl.repeat(None, len(bad_pos), dtype=pl.Int64, eager=True)
        failed = pl.DataFrame({"source_line": line, "reason": per_row["reason"]}, schema=FAILED_SCHEMA)
        good = df.with_row_index("__pos").filter(~pl.col("__pos").is_in(bad_pos.cast(pl.UInt32).implode())).drop("__pos")
    else:
        bad_pos = pl.Series([], dtype=pl.Int64)
        failed = pl.DataFrame(schema=FAILED_SCHEMA)
        good = df
    summary = {
        "suite_name": name,
        "success": all(r["success"] for r in out_results),
        "evaluated": n,
        "failed_rows": len(bad_pos),
        "results": out_results,
        "mode": mode,
        "gx_rows": gx_rows,
    }
    return DataCheckOutcome(good=good, failed=failed, summary=summary)
