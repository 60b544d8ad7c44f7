"""Great Expectations data docs of the ingest's validation results: rendered beside the warehouse,
incrementally, only when GX ran or when asked; summarised and linked in the weekly report."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
POZIDRIV = REPO / "samples" / "logs" / "slurm" / "pozidriv.log.gz"
DATA = Path(__file__).parent / "data"
GL26 = DATA / "lsf" / "hpc-cost-simulator" / "issues-gl-26" / "lsb.acct.issue-gl-26"
WYNTON = DATA / "sge" / "wyntonquery" / "accounting.head"


@pytest.fixture
def file_db(tmp_path, site_key):
    """A warehouse file with two ingested files (their validation results stored, not rendered)."""
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    db = tmp_path / "m.duckdb"
    con = connect(db)
    for path, cluster in ((GL26, "lsfsite"), (WYNTON, "wynton")):
        assert ingest_file(con, path, IngestOptions(cluster=cluster), site_key).outcome == "loaded"
    yield db, con
    con.close()


def _pages(site: Path) -> list[Path]:
    return sorted((site / "validations").rglob("*.html"))


def test_render_incrementally_one_page_per_ingested_file(file_db, site_key):
    from metapilot.warehouse.data_docs import (
        docs_dir_for,
        pending_runs,
        render_data_docs,
    )
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    db, con = file_db
    site = docs_dir_for(con)
    assert site == db.parent / "data_docs" and len(pending_runs(con, site)) == 2
    index = render_data_docs(con)
    assert index == site / "index.html" and index.exists()
    pages = _pages(site)
    assert len(pages) == 2 and pending_runs(con, site) == []
    text = {p.name.split("-")[0]: p.read_text() for p in pages}
    assert "lsb.acct.issue" in "".join(text) and "metapilot_jobs" in "".join(text.values())
    assert "Succeeded" in next(iter(text.values()))
    assert index.read_text().count("ingest ") >= 2
    mtime = index.stat().st_mtime_ns
    assert render_data_docs(con) == index and index.stat().st_mtime_ns == mtime  # nothing new: nothing done
    assert ingest_file(con, POZIDRIV, IngestOptions(), site_key).outcome == "loaded"
    assert len(pending_runs(con, site)) == 1
    render_data_docs(con)
    assert len(_pages(site)) == 3 and "pozidriv" in index.read_text()


def test_failed_expectations_show_on_the_page(tmp_path, site_key):
    from metapilot.warehouse.data_docs import render_data_docs
    from metapilot.warehouse.db import connect
    from metapilot.warehouse.ingest import IngestOptions, ingest_file

    # a real SGE record whose end precedes its start: the suite's pair expectation fails for it
    line = (DATA / "sge" / "apel" / "sge-test-parse-line.accounting").read_text().splitlines()[2]
    bad = line.replace(":1358190002:1358210574:", ":1358210574:1358190002:")
    log = tmp_path / "accounting"
    log.write_text(line + "\n" + bad.replace(":1630912:", ":1630913:") + "\n")
    con = connect(tmp_path / "m.duckdb")
    rep = ingest_file(con, log, IngestOptions(), site_key)
    assert rep.outcome == "loaded" and rep.rows_quarantined == 1 and not rep.data_checks["success"]
    assert rep.data_checks["gx_rows"] >= 1
    index = render_data_docs(con)
    con.close()
    page = _pages(index.parent)[0].read_text()
    assert "Failed" in page and "end_time" in page


def test_after_ingest_only_when_gx_ran(file_db):
    from metapilot.warehouse.data_docs import render_after_ingest

    db, con = file_db
    con.close()
    clean = [{"outcome": "loaded", "data_checks": {"gx_rows": 0}}]
    assert render_after_ingest(str(db), clean) is None and not (db.parent / "data_docs").exists()
    ran = [{"outcome": "loaded", "data_checks": {"gx_rows": 3}}]
    index = render_after_ingest(str(db), ran)
    assert index is not None and index.exists() and len(_pages(index.parent)) == 2


def test_weekly_report_section_and_link(file_db):
    from metapilot.models.reporting.render import _data_quality_html, data_quality_lines
    from metapilot.warehouse.data_docs import data_quality, link_from

    db, con = file_db
    dq = data_quality(con, "lsfsite")
    assert (dq["files"], dq["lines"], dq["quarantined"]) == (1, 28, 1)
    assert len(dq["warnings"]) == 1 and "--encoding latin-1" in dq["warnings"][0]["warning"]
    assert dq["docs_index"] == str(db.parent / "data_docs" / "index.html") and Path(dq["docs_index"]).exists()
    folder = db.parent / "reports" / "lsfsite" / "2013-W02"
    dq["docs_link"] = link_from(folder, dq["docs_index"])
    assert dq["docs_link"] == "../../../data_docs/index.html"
    lines, warnings, link = data_quality_lines({"data_quality": dq})
    assert "1 quarantined (3.57%)" in lines[0] and warnings and link == dq["docs_link"]
    html = _data_quality_html({"data_quality": dq})
    assert "href=\"../../../data_docs/index.html\"" in html and "GX data docs" in html
    assert data_quality(con, "wynton")["warnings"] == []


def test_in_memory_warehouse_has_no_docs(mem_con):
    from metapilot.warehouse.data_docs import data_quality, render_data_docs

    assert render_data_docs(mem_con) is None
    assert "in memory" in data_quality(mem_con, "x")["docs_message"]


def test_data_docs_command(file_db):
    from typer.testing import CliRunner

    from metapilot.cli import app

    db, con = file_db
    con.close()
    res = CliRunner().invoke(app, ["data-docs", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "index.html" in res.output and "2 new data-check results" in res.output
