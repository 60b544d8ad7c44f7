"""Great Expectations data docs for the ingest's validation results: static HTML beside the
warehouse (`data_docs/index.html`), one page per ingested file, linked from the weekly report.

The ingest validates every chunk against the suite (`warehouse/expectations/jobs.json`) and keeps
one merged result per file in `data_check_runs`; the fast path runs GX itself only on suspect
rows, so a clean file never imports GX. The pages are therefore rendered from the stored results
(each expectation of the suite with its success and unexpected count over the file's rows):
right after an ingest in which GX ran (`render_after_ingest`), else when asked (`metapilot
data-docs`) or when the weekly report is built. GX keeps its stores under `data_docs/.gx/`;
`data_docs/.rendered` lists the validation runs already on the site, so rendering is
incremental and costs nothing (no GX import) when nothing is new.
"""

from __future__ import annotations

import html
import json
import os
from datetime import timezone
from pathlib import Path
from typing import Any

from metapilot.ground.files import safe_name
from metapilot.ground.paths import sql_text

DOCS_DIR = "data_docs"
SITE_NAME = "metapilot"
MANIFEST = ".rendered"


def db_file(con) -> Path | None:
    """The database file behind a connection (None for an in-memory warehouse)."""
    try:
        rows = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    except Exception:  # noqa: BLE001 - an older DuckDB: no docs rather than an error
        return None
    path = rows[0][0] if rows else None
    return Path(path).resolve() if path and path != ":memory:" else None


def docs_dir_for(con) -> Path | None:
    f = db_file(con)
    return None if f is None else f.parent / DOCS_DIR


ESCAPED_MARK = ".names-escaped-v1"  # pages rendered since names are escaped (issue 37)


def _rendered(site: Path) -> set[str]:
    """Runs already on the site. A site written before names were escaped is rendered again
    whole: its pages may carry a hostile file name as HTML."""
    if site.is_dir() and not (site / ESCAPED_MARK).exists():
        import shutil

        for old in ("validations", "expectations", "static"):
            shutil.rmtree(site / old, ignore_errors=True)
        (site / MANIFEST).unlink(missing_ok=True)
        (site / "index.html").unlink(missing_ok=True)
        (site / ESCAPED_MARK).write_text("every name in these pages is escaped\n")
    m = site / MANIFEST
    return set(m.read_text().split()) if m.exists() else set()


def pending_runs(con, site: Path) -> list[str]:
    """Validation runs not yet on the site, oldest first."""
    done = _rendered(site)
    ids = [r[0] for r in con.execute(sql_text("ingest/data_check_run_ids.sql")).fetchall()]
    return [i for i in ids if i not in done]


def _safe(text: str) -> str:
    return safe_name(text)[:80]


def _context(site: Path) -> Any:
    """An ephemeral GX context whose stores and site live on disk under `site`."""
    from metapilot.transforms.data_checks import _quiet

    with _quiet():
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            FilesystemStoreBackendDefaults,
            ProgressBarsConfig,
        )

    cfg = DataContextConfig(
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
        store_backend_defaults=FilesystemStoreBackendDefaults(root_directory=str(site / ".gx")),
        data_docs_sites={SITE_NAME: {
            "class_name": "SiteBuilder", "show_how_to_buttons": False,
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(site)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        }},
    )
    with _quiet():
        return gx.get_context(mode="ephemeral", project_config=cfg)


def _result_for(cfg: Any, stored: dict | None, evaluated: int, columns: list[str]) -> Any:
    """One ExpectationValidationResult from what the ingest stored for that expectation."""
    from great_expectations.core import ExpectationValidationResult

    success = True if stored is None else bool(stored.get("success"))
    uc = None if stored is None else stored.get("unexpected_count")
    t = cfg.type
    if t.startswith("expect_table_") or uc is None:
        observed: Any = columns if "columns" in t else (len(columns) if "count" in t else None)
        result = {"observed_value": observed}
    else:
        uc = int(uc)
        pct = 100.0 * uc / evaluated if evaluated else 0.0
        result = {"element_count": evaluated, "unexpected_count": uc, "unexpected_percent": pct,
                  "unexpected_percent_total": pct, "unexpected_percent_nonmissing": pct,
                  "missing_count": 0, "missing_percent": 0.0, "partial_unexpected_list": []}
    return ExpectationValidationResult(success=success, expectation_config=cfg, result=result,
                                       exception_info={"raised_exception": False, "exception_message": None,
                                                       "exception_traceback": None})


def _validation_result(row: dict, suite: Any) -> tuple[Any, Any]:
    """(identifier, ExpectationSuiteValidationResult) of one `data_check_runs` row."""
    from great_expectations.core import ExpectationSuiteValidationResult
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )
    from metapilot.transforms.canonical import PARSED_SCHEMA
    from metapilot.transforms.data_checks import _column_label

    stored = {(r.get("expectation"), r.get("column")): r for r in json.loads(row["results_json"] or "[]")}
    evaluated = int(row["evaluated"] or 0)
    results = []
    for e in suite.expectations:
        cfg = e.configuration
        results.append(_result_for(cfg, stored.get((cfg.type, _column_label(cfg.type, cfg.kwargs))), evaluated,
                                   list(PARSED_SCHEMA)))
    ok = sum(1 for r in results if r.success)
    # GX writes these into its pages unescaped (breadcrumb, run name): only safe characters go in,
    # and free text (the path, the cluster) is HTML-escaped (a file named `<svg onload=...>.log`)
    name = _safe(Path(row["path"] or "file").name)
    when = row["checked_at"]
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    run_id = RunIdentifier(run_name=f"ingest {name}", run_time=when)
    batch = f"{name}-{row['file_sha256'][:12]}"
    vr = ExpectationSuiteValidationResult(
        success=bool(row["success"]), results=results, suite_name=suite.name,
        statistics={"evaluated_expectations": len(results), "successful_expectations": ok,
                    "unsuccessful_expectations": len(results) - ok,
                    "success_percent": 100.0 * ok / len(results) if results else 100.0},
        meta={"run_id": run_id, "validation_time": when.isoformat(),
              "batch_spec": {"data_asset_name": name},
              "active_batch_definition": {"datasource_name": "metapilot-ingest", "data_connector_name": "files",
                                          "data_asset_name": name, "batch_identifiers": {"sha256": row["file_sha256"]}},
              "metapilot": {"path": html.escape(row["path"] or ""), "sha256": row["file_sha256"], "rows_evaluated": evaluated,
                            "rows_failed": int(row["failed_rows"] or 0), "format": html.escape(row.get("format") or ""),
                            "cluster": html.escape(row.get("cluster") or "")}},
    )
    ident = ValidationResultIdentifier(expectation_suite_identifier=ExpectationSuiteIdentifier(name=suite.name),
                                       run_id=run_id, batch_identifier=batch)
    return ident, vr


def render_data_docs(con, site: Path | None = None, run_ids: list[str] | None = None) -> Path | None:
    """Render the validation runs not yet on the site (or those named) and the site's index;
    returns the index (None for an in-memory warehouse). Imports GX only when there is work."""
    site = site or docs_dir_for(con)
    if site is None:
        return None
    todo = pending_runs(con, site) if run_ids is None else [r for r in run_ids if r not in _rendered(site)]
    index = site / "index.html"
    if not todo and index.exists():
        return index
    site.mkdir(parents=True, exist_ok=True)
    (site / ESCAPED_MARK).touch()
    from metapilot.transforms.data_checks import _quiet, load_suite

    suite = load_suite()
    ctx = _context(site)
    with _quiet():
        try:
            ctx.suites.add_or_update(suite)
        except AttributeError:  # older 1.x
            ctx.suites.add(suite)
    idents = []
    if todo:
        rows = con.execute(sql_text("ingest/data_check_rows.sql"), [todo]).fetchall()
        cols = ["run_id", "file_sha256", "suite_name", "success", "evaluated", "failed_rows", "results_json",
                "checked_at", "path", "format", "cluster"]
        for r in rows:
            ident, vr = _validation_result(dict(zip(cols, r)), suite)
            with _quiet():
                ctx.validation_results_store.set(ident, vr)
            idents.append(ident)
    with _quiet():
        ctx.build_data_docs(site_names=[SITE_NAME], resource_identifiers=idents or None)
    with open(site / MANIFEST, "a") as f:
        f.writelines(f"{i}\n" for i in todo)
    return index


def render_after_ingest(db: str | Path | None, reports: list[dict], log=None) -> Path | None:
    """After an ingest: render the new results when GX itself ran on some file (its import is
    paid already, or the file had rows to look at); otherwise leave them for later. Never fails
    the ingest: a rendering problem is only logged."""
    ran = any((r.get("data_checks") or {}).get("gx_rows") for r in reports if r.get("outcome") == "loaded")
    if not ran:
        return None
    from metapilot.warehouse.db import connect

    try:
        con = connect(db, read_only=True)
        try:
            return render_data_docs(con)
        finally:
            con.close()
    except Exception as e:  # noqa: BLE001 - docs are a convenience; the data is loaded
        if log:
            log(f"data docs not rendered ({type(e).__name__}: {e}); run `metapilot data-docs` to retry")
        return None


def data_quality(con, cluster: str) -> dict:
    """For the weekly report: what the cluster's ingested files say about data quality (lines,
    quarantine, files over the 1% quarantine warning, validation runs that failed) and where
    the data docs are (rendered first if new results are waiting)."""
    files = con.execute(
        "SELECT path, lines_read, rows_quarantined, message, finished_at FROM ingest_files "
        "WHERE outcome = 'loaded' AND (cluster = ? OR list_contains(string_split(cluster, ','), ?)) "
        "ORDER BY finished_at DESC", [cluster, cluster]).fetchall()
    lines = sum(int(f[1] or 0) for f in files)
    quarantined = sum(int(f[2] or 0) for f in files)
    warned = [{"file": Path(f[0]).name, "warning": f[3]} for f in files
              if f[3] and "quarantined" in f[3]][:10]
    failed_runs = con.execute(
        "SELECT count(*) FROM data_check_runs v JOIN ingest_files f ON f.sha256 = v.file_sha256 "
        "WHERE NOT v.success AND (f.cluster = ? OR list_contains(string_split(f.cluster, ','), ?))",
        [cluster, cluster]).fetchall()[0][0]
    out: dict[str, Any] = {"files": len(files), "lines": lines, "quarantined": quarantined,
                           "quarantined_share": (quarantined / lines) if lines else None,
                           "warnings": warned, "data_check_failed_files": int(failed_runs),
                           "docs_index": None, "docs_message": None, "lost": _lost(con, cluster)}
    site = docs_dir_for(con)
    if site is None:
        out["docs_message"] = "data docs are written beside a warehouse file (this one is in memory)"
        return out
    try:
        out["docs_index"] = str(render_data_docs(con, site))
    except Exception as e:  # noqa: BLE001 - the report still goes out, saying why
        out["docs_message"] = f"data docs could not be rendered ({type(e).__name__}: {e}); run `metapilot data-docs`"
    return out


def _lost(con, cluster: str) -> list[dict]:
    """Files of the cluster (or never recognised) that could not be loaded, with why (issue 41)."""
    from metapilot.warehouse.ingest_log import lost_files

    return [{"file": Path(f.path).name, "outcome": f.outcome,
             "why": (f.message or "no line loaded").removeprefix(f"{f.path}: ")} for f in lost_files(con, cluster)]


def link_from(report_folder: Path, target: str | None) -> str | None:
    """A relative link from the report's folder to a file (None when there is none)."""
    if not target:
        return None
    return os.path.relpath(target, report_folder).replace(os.sep, "/")


__all__ = ["data_quality", "docs_dir_for", "link_from", "pending_runs", "render_after_ingest", "render_data_docs"]
