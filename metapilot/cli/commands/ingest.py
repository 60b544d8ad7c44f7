"""`metapilot ingest PATH...`: load Slurm/PBS/SWF/SGE/LSF logs into the warehouse: a Prefect flow
reporting to the configured Prefect server (`PREFECT_API_URL`, or a temporary local API with
`--flow`), else the same work run directly, without Prefect: starting a temporary API and importing
Prefect cost more than ingesting a million lines (issue 14)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer


def print_ingest_summary(reports: list[dict], db_file: str) -> int:
    """Print one line per file and the totals; return the number of files that failed or of
    which nothing loaded (every line quarantined), for a non-zero exit."""
    from rich.table import Table

    from metapilot.cli.console import console

    t = Table(title="Ingest")
    for col in ("file", "outcome", "format", "cluster", "lines", "loaded", "jobs", "merged", "quarantined", "skipped", "valid.", "s"):
        t.add_column(col, justify="right" if col in ("lines", "loaded", "jobs", "merged", "quarantined", "skipped", "s") else "left")
    failed = 0
    for r in reports:
        v = r.get("data_checks") or {}
        vtxt = "" if not v else ("ok" if v.get("success") else f"{v.get('failed_rows', 0)} rows failed")
        style = {"failed": "red", "quarantined": "red", "skipped": "dim"}.get(r["outcome"], "")
        counts = ("lines_read", "rows_loaded", "jobs_written", "rows_merged", "rows_quarantined", "lines_skipped")
        shown = [f"{r[c]:,}" if r["outcome"] in ("loaded", "quarantined") else "" for c in counts]  # skipped: loaded before
        t.add_row(r["path"].split("/")[-1], r["outcome"], r.get("format") or "", r.get("cluster") or "",
                  *shown, vtxt, f"{r['seconds']:.2f}", style=style)
        failed += r["outcome"] in ("failed", "quarantined")  # quarantined: not one line loaded
    console.print(t)
    for r in reports:
        if r["outcome"] in ("failed", "quarantined") and r.get("message"):
            console.print(f"error: {r['message']}", style="red", markup=False, highlight=False)
        elif r["outcome"] == "skipped" and r.get("message"):
            console.print(f"skipped: {r['path']}: {r['message']}", style="dim", markup=False, highlight=False)
        for w in r.get("warnings") or []:
            console.print(f"[yellow]warning:[/yellow] {w}")
        v = r.get("data_checks") or {}
        for res in v.get("results", []):
            if not res.get("success"):
                n = res.get("unexpected_count")
                what = f"failed for {n} rows (quarantined)" if n is not None else "failed for the batch as a whole"
                console.print(f"[yellow]data checks:[/yellow] {r['path'].split('/')[-1]}: {res.get('expectation')}"
                              f"({res.get('column')}) {what}")
    console.print(f"warehouse: [bold]{db_file}[/bold]")
    return failed


def _refuse_raw_beside_hashed(db: str | None) -> None:
    """--keep-names on a pseudonymised warehouse would store raw names next to the hashes of the
    same users, undoing the pseudonymisation (SPEC §8): refused unless --mix-names says so."""
    from metapilot.ground.paths import db_path
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.jobs_store import holds_hashed_names

    if not db_path(db).exists():
        return
    con = connect(db, read_only=True)
    try:
        hashed = holds_hashed_names(con)
    finally:
        con.close()
    if hashed:
        raise ValueError(f"{db_path(db)} holds pseudonymised names: --keep-names would store raw names beside them "
                         "(and so identify those users); add --mix-names if that is intended, or drop --keep-names")


def _keep_freed_memory() -> None:
    """Let polars' allocator (jemalloc) keep freed pages for 1 s before returning them to the
    system, unless the user configured it: an ingest allocates and frees the same chunk-sized
    buffers over and over, and faulting them back in cost about a fifth of its CPU time (issue 14).
    One second keeps that saving (staging 5M lines: 52 CPU-s, 62 with no delay) and gives the pages
    back soon after staging ends instead of holding them beside DuckDB through the commit (peak
    RSS 720-790 MiB against 860-935 with 5 s; issue 53).
    Two arenas, not jemalloc's four per core: the chunks are parsed and written in several threads
    (issue 53), and each arena kept its own freed pages (staging 5M lines: 699 MiB of RSS with two
    arenas, 863 MiB with eight, no slower; the command at 20M lines: 955 MiB, 1,111 with eight).
    Read when polars loads, so only before that."""
    import os
    import sys

    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:1000,muzzy_decay_ms:1000,narenas:2")


def _mem_unit(value: str) -> str:
    """--mem-unit, refused before any work when it is not one of SWF's memory units."""
    from metapilot.transforms.swf import MEM_UNITS_KB

    unit = value.strip().lower()
    if unit not in MEM_UNITS_KB:
        raise typer.BadParameter(f"takes one of {', '.join(MEM_UNITS_KB)}, got {value!r}", param_hint="--mem-unit")
    return unit


def ingest_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files, globs, directories; .gz is read transparently.")],
    cluster: Annotated[Optional[str], typer.Option(help="Cluster name of logs that carry none (SWF, PBS, SGE, LSF; default: the file name); a log that names its cluster (sacct) is refused when that name differs.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto|sacct|sacct-json|pbs|swf|sge|lsf (uge = sge); for node placement openb-nodes|openb-pods|prom-text|prom-range")] = "auto",
    timezone: Annotated[str, typer.Option(help="Time zone of local times in the logs (sacct, PBS).")] = "UTC",
    delimiter: Annotated[Optional[str], typer.Option(help="sacct field delimiter (any string, multi-byte too).")] = None,
    fields: Annotated[Optional[str], typer.Option(help="Column names of headerless sacct output, comma-separated.")] = None,
    mem_unit: Annotated[str, typer.Option("--mem-unit", help="Unit of SWF's memory fields: kb (the standard), b (bytes, as in Alea's extended SWF) or mb.")] = "kb",
    encoding: Annotated[Optional[str], typer.Option(help="Text encoding of the logs (default utf-8), e.g. latin-1 for older sites' logs; a file loaded before with undecodable lines is loaded again.")] = None,
    keep_names: Annotated[bool, typer.Option("--keep-names", help="Store raw user/account/group/job names instead of keyed hashes (refused on a warehouse that holds hashed names, unless --mix-names).")] = False,
    mix_names: Annotated[bool, typer.Option("--mix-names", help="With --keep-names: store raw names beside the hashed ones already in the warehouse (those users become identifiable).")] = False,
    new_key: Annotated[bool, typer.Option("--new-key", help="Accept a new site key (secret.key missing, or not the one the warehouse records): the same users then get new ids; recorded in site_keys.")] = False,
    db: Annotated[Optional[str], typer.Option(help="Warehouse file (default $METAPILOT_DB or warehouse/metapilot.duckdb).")] = None,
    flow: Annotated[bool, typer.Option("--flow", help="Run as a Prefect flow even when no Prefect server is configured (PREFECT_API_URL): a temporary local API is started for it.")] = False,
) -> None:
    """Ingest accounting logs into the warehouse; every line is loaded, merged, quarantined or skipped."""
    _keep_freed_memory()
    from metapilot.flows.prefect_api import api_configured
    from metapilot.ground.paths import db_path
    from metapilot.warehouse.ingest import IngestOptions, expand_paths_checked
    from metapilot.warehouse.secret import load_site_key

    from metapilot.cli.options import timezone_option

    from metapilot.cli.flags import refuse_switch_values

    refuse_switch_values(paths, "--keep-names, --mix-names, --new-key, --flow")  # `--keep-names true`
    timezone_option(timezone)  # a bad option is refused before any file is read or recorded
    mem_unit = _mem_unit(mem_unit)
    if keep_names and not mix_names:
        _refuse_raw_beside_hashed(db)
    expand_paths_checked(paths)  # nothing to load, a missing key: say so before starting anything
    if encoding:
        from metapilot.transforms.lines import check_encoding

        check_encoding(encoding)  # an unknown or non-ASCII-compatible codec: say so now
    load_site_key(db, new_key=new_key, log=lambda m: typer.echo(m, err=True))
    opts = IngestOptions(cluster=cluster, fmt=fmt, timezone=timezone, delimiter=delimiter,
                         fields=[f.strip() for f in fields.split(",")] if fields else None, keep_names=keep_names,
                         new_key=new_key, encoding=encoding, cluster_must_match=cluster is not None,
                         mem_unit=mem_unit)
    if flow or api_configured():  # report to the user's Prefect server (or a temporary API), as a flow
        from metapilot.cli.batch import prefect_session

        with prefect_session(db):
            from metapilot.flows.ingest import ingest_flow

            reports = ingest_flow(paths, db=db, opts=opts)
    else:  # the same work without a Prefect API: no temporary server, no Prefect import (issue 14)
        from metapilot.warehouse.ingest import ingest_batch

        reports = ingest_batch(paths, db, opts, log=lambda m: typer.echo(m, err=True))
    failed = print_ingest_summary(reports, str(db_path(db).resolve()))
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_cmd)
