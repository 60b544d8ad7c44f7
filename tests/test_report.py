"""The weekly report on real data (KTH-SP2, ISO week 1996-W44, with four earlier weeks): its
numbers equal independent SQL on the warehouse, the HTML parses, embeds its plots, fetches
nothing and has every section; the Markdown and JSON carry the same numbers."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest
from evidence_fixtures import (
    CLUSTER,
    POLICY_ID,
    insert_policy,
    kth_warehouse,
    objective_replay,
    stub_controller,
    write_test_artifact,
)
from metapilot.models.controller.advice import score_recommendations
from metapilot.models.reporting import build_report, publish_markdown_artifact
from metapilot.ground.weeks import parse_week
from metapilot.models.reporting.data import last_complete_week
from metapilot.models.reporting.render import SECTIONS, fmt_duration, fmt_int, fmt_pct
from metapilot.models.evaluation.roi import RoiConfig
from metapilot.models.evaluation.heldout import run_heldout
from metapilot.warehouse.db import query_frame
from metapilot.warehouse.heldout_store import load_heldout, store_recommendations

UTC = timezone.utc
WEEK = "1996-W44"
WS = datetime(1996, 10, 28, tzinfo=UTC)
WE = WS + timedelta(days=7)


@pytest.fixture(scope="module")
def wh():
    con = kth_warehouse()
    yield con
    con.close()


@pytest.fixture(scope="module")
def vid(wh):
    """A validation (controller replayed) and a week of recommendations, stored before the report."""
    insert_policy(wh)
    replay, _ = objective_replay()
    vid = run_heldout(wh, POLICY_ID, replay=replay, controller_fn=stub_controller)
    hours = [WS + timedelta(hours=h) for h in range(168)]
    store_recommendations(wh, pl.DataFrame({
        "cluster": CLUSTER, "partition": "*", "epoch_start": hours, "epoch_s": 3600, "policy_id": POLICY_ID,
        "action": [1 if 8 <= t.hour < 18 else 0 for t in hours],
        "objective": ["W" if 8 <= t.hour < 18 else "U" for t in hours],
        "q_values": [[0.1, 0.2] for _ in hours],
    }))
    return vid


@pytest.fixture(scope="module")
def built(wh, vid, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    cfg = RoiConfig(value_per_wait_hour=2.0)
    report = build_report(wh, CLUSTER, WEEK, out, roi_config=cfg, generated_at=datetime(2024, 1, 1, tzinfo=UTC))
    return report, out


def _one(con, sql, params):
    return con.execute(sql, params).fetchall()[0]


def test_files_written(built):
    report, out = built
    folder = out / CLUSTER / WEEK
    assert {p.name for p in folder.iterdir()} == {"report.html", "report.md", "report.json"}
    assert report["files"]["html"] == str(folder / "report.html")
    doc = json.loads((folder / "report.json").read_text())
    assert doc["cluster"] == CLUSTER and doc["week"] == WEEK and doc["week_start"] == WS.isoformat()
    assert doc["glance"] == report["glance"] and doc["roi"] == report["roi"]
    assert report["artifact"] is None  # not in a flow: no Prefect artifact


def test_glance_equals_independent_sql(wh, built):
    report, _ = built
    c = next(r for r in report["glance"] if r["scope"] == "cluster")
    assert c["week"] == WEEK and c["capacity_cores"] == 100 and c["prev_weeks"] == 4
    sub = _one(wh, "SELECT count(*) FROM jobs WHERE cluster = ? AND submit_time >= ? AND submit_time < ?", [CLUSTER, WS, WE])
    assert c["jobs_submitted"] == sub[0]
    n, mean, p95, mx = _one(wh, """
        SELECT count(*), avg(epoch(start_time) - epoch(submit_time)),
               quantile_cont(epoch(start_time) - epoch(submit_time), 0.95), max(epoch(start_time) - epoch(submit_time))
        FROM jobs WHERE cluster = ? AND start_time >= ? AND start_time < ?""", [CLUSTER, WS, WE])
    assert c["jobs_started"] == n
    assert c["wait_mean_s"] == pytest.approx(mean, rel=1e-9)
    assert c["wait_p95_s"] == pytest.approx(p95, rel=1e-9)
    assert c["wait_max_s"] == pytest.approx(mx)
    (core_h,) = _one(wh, """
        SELECT sum(alloc_cpus * greatest(0, epoch(least(end_time, ?::TIMESTAMPTZ)) - epoch(greatest(start_time, ?::TIMESTAMPTZ)))) / 3600
        FROM jobs WHERE cluster = ? AND start_time < ? AND end_time > ?""", [WE, WS, CLUSTER, WE, WS])
    assert c["cpu_hours"] == pytest.approx(core_h, rel=1e-9)
    assert c["utilisation_cpu"] == pytest.approx(core_h / (100 * 168), rel=1e-9)
    assert c["gpu_hours"] == 0.0 and c["utilisation_gpu"] is None
    # the four weeks before, pooled
    p0 = WS - timedelta(days=28)
    pmean, pmax = _one(wh, """
        SELECT avg(epoch(start_time) - epoch(submit_time)), max(epoch(start_time) - epoch(submit_time))
        FROM jobs WHERE cluster = ? AND start_time >= ? AND start_time < ?""", [CLUSTER, p0, WS])
    assert c["prev_wait_mean_s"] == pytest.approx(pmean, rel=1e-9)
    assert c["prev_wait_max_s"] == pytest.approx(pmax)
    weekly_p95 = [_one(wh, """
        SELECT quantile_cont(epoch(start_time) - epoch(submit_time), 0.95) FROM jobs
        WHERE cluster = ? AND start_time >= ? AND start_time < ?""", [CLUSTER, p0 + timedelta(days=7 * k),
                                                                      p0 + timedelta(days=7 * (k + 1))])[0] for k in range(4)]
    assert c["prev_wait_p95_s"] == pytest.approx(np.mean(weekly_p95), rel=1e-9)
    (psub,) = _one(wh, "SELECT count(*) / 4.0 FROM jobs WHERE cluster = ? AND submit_time >= ? AND submit_time < ?",
                   [CLUSTER, p0, WS])
    assert c["prev_jobs_submitted"] == pytest.approx(psub)


def test_daily_and_queue_equal_independent_computation(wh, built):
    report, _ = built
    days = [r for r in report["daily"] if r["scope"] == "cluster"]
    assert [d["day"] for d in days] == [(WS + timedelta(days=k)).strftime("%Y-%m-%d") for k in range(7)]
    for k, d in enumerate(days):
        a, b = WS + timedelta(days=k), WS + timedelta(days=k + 1)
        (h,) = _one(wh, """
            SELECT coalesce(sum(alloc_cpus * greatest(0, epoch(least(end_time, ?::TIMESTAMPTZ)) - epoch(greatest(start_time, ?::TIMESTAMPTZ)))), 0) / 3600
            FROM jobs WHERE cluster = ? AND start_time < ? AND end_time > ?""", [b, a, CLUSTER, b, a])
        assert d["cpu_hours"] == pytest.approx(h, rel=1e-9)
        assert d["utilisation_cpu"] == pytest.approx(h / 2400, rel=1e-9)
    # hourly queue: recomputed in Python from the raw jobs
    jobs = query_frame(wh, "SELECT submit_time, start_time, end_time, req_cpus, alloc_cpus FROM jobs WHERE cluster = ?",
                       [CLUSTER])
    sub = jobs["submit_time"].to_numpy()
    st = jobs["start_time"].to_numpy()
    en = jobs["end_time"].to_numpy()
    cores = jobs["alloc_cpus"].to_numpy()
    q = report["queue_hourly"]
    assert len(q) == 168
    for r in q[::7]:
        h = np.datetime64(datetime.fromisoformat(r["hour_start"]).replace(tzinfo=None), "us")
        queued = (sub <= h) & (st > h)
        running = (st <= h) & (en > h)
        assert r["queued_jobs"] == int(queued.sum()), r["hour_start"]
        assert r["running_jobs"] == int(running.sum())
        assert r["busy_cores"] == int(cores[running].sum())


def test_wait_by_size_equals_independent_sql(wh, built):
    report, _ = built
    got = {r["size_class"]: r for r in report["wait_by_size"]}
    ref = query_frame(wh, """
        SELECT CASE WHEN alloc_cpus = 1 THEN '1' WHEN alloc_cpus <= 4 THEN '2-4' WHEN alloc_cpus <= 8 THEN '5-8'
                    WHEN alloc_cpus <= 16 THEN '9-16' WHEN alloc_cpus <= 32 THEN '17-32' WHEN alloc_cpus <= 64 THEN '33-64'
                    ELSE '65-128' END AS size_class,
               count(*) AS n, avg(epoch(start_time) - epoch(submit_time)) AS mean, max(epoch(start_time) - epoch(submit_time)) AS mx
        FROM jobs WHERE cluster = ? AND start_time >= ? AND start_time < ? GROUP BY 1""", [CLUSTER, WS, WE])
    assert set(got) == set(ref["size_class"])
    for r in ref.iter_rows(named=True):
        g = got[r["size_class"]]
        assert g["jobs_started"] == r["n"]
        assert g["wait_mean_s"] == pytest.approx(r["mean"], rel=1e-9)
        assert g["wait_max_s"] == pytest.approx(r["mx"])


def test_validation_recommendations_and_roi_sections(wh, vid, built):
    report, _ = built
    v = report["heldout"]
    stored = load_heldout(wh, vid)
    assert v["status"] == "ok" and v["heldout_id"] == vid
    assert [r["contender"] for r in v["rows"]] == stored.table["contender"].to_list()
    for r, s in zip(v["rows"], stored.table.iter_rows(named=True), strict=True):
        assert r["wait_mean_s"] == s["wait_mean_s"] and r["util_cpu"] == s["util_cpu"]
    assert len(v["diffs"]) == stored.diffs.height and v["verdict"]
    rec = report["recommendations"]
    (w_share,) = _one(wh, "SELECT avg((objective = 'W')::INT) FROM recommendations WHERE cluster = ? AND epoch_start >= ? "
                          "AND epoch_start < ?", [CLUSTER, WS, WE])
    assert rec["status"] == "ok" and rec["epochs"] == 168 and rec["policy_id"] == POLICY_ID
    assert rec["share"]["W"] == pytest.approx(w_share) and rec["switches"] == 14
    roi = report["roi"]
    assert roi["status"] == "ok" and roi["heldout_id"] == vid
    assert [r["reference_kind"] for r in roi["results"]] == ["best-fixed", "as-run"]
    assert roi["config"]["value_per_wait_hour"] == 2.0
    assert any("value of a researcher's wait-hour: 2 USD" in a for a in roi["assumptions"])
    assert report["decision"]["message"]  # what to run, in words (the first line of the report)


class _Doc(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.h2: list[str] = []
        self.imgs: list[str] = []
        self.urls: list[str] = []
        self._in_h2 = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "h2":
            self._in_h2 = True
            self.h2.append("")
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        for key in ("src", "href"):
            if a.get(key):
                self.urls.append(a[key])

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_h2:
            self.h2[-1] += data


def test_html_is_self_contained_with_every_section(built):
    report, out = built
    text = (out / CLUSTER / WEEK / "report.html").read_text()
    doc = _Doc()
    doc.feed(text)
    doc.close()
    assert doc.h2 == [t for _, t in SECTIONS]
    assert len(doc.imgs) == 5  # daily utilisation, queue, wait by size, recommendations, validation weeks
    assert all(src.startswith("data:image/png;base64,") for src in doc.imgs)
    assert not [u for u in doc.urls if not (u.startswith("#") or u.startswith("data:"))]
    assert "http://" not in text and "https://" not in text
    assert not {"script", "link", "iframe"} & set(doc.tags)
    assert "@media print" in text and "@page" in text
    body = " ".join(doc.text)
    c = next(r for r in report["glance"] if r["scope"] == "cluster")
    for needle in (fmt_duration(c["wait_mean_s"]), fmt_duration(c["wait_max_s"]), fmt_pct(c["utilisation_cpu"]),
                   fmt_int(c["jobs_submitted"]), fmt_int(c["cpu_hours"]), report["heldout"]["heldout_id"],
                   "payback", "Assumptions"):
        assert needle in body, needle


def test_markdown_has_the_same_sections_and_numbers(built):
    report, out = built
    md = (out / CLUSTER / WEEK / "report.md").read_text()
    for _, title in SECTIONS:
        assert f"## {title}" in md
    c = next(r for r in report["glance"] if r["scope"] == "cluster")
    assert fmt_duration(c["wait_p95_s"]) in md and fmt_pct(c["utilisation_cpu"]) in md
    assert "| MetaPilot |" in md


def test_empty_sections_say_so_plainly(tmp_path):
    """No policy, no validation: the report still builds and says so."""
    con = kth_warehouse()
    try:
        report = build_report(con, CLUSTER, None, tmp_path)
    finally:
        con.close()
    assert report["week"] == "1997-W34"  # last complete week: the log ends on Friday 1997-08-29
    assert report["recommendations"]["status"] == "no-policy"
    assert "No controller policy exists yet" in report["recommendations"]["message"]
    assert report["heldout"]["status"] == "none" and report["roi"]["status"] == "unavailable"
    html = (tmp_path / CLUSTER / "1997-W34" / "report.html").read_text()
    assert "No controller policy exists yet" in html and "No held-out replay has been run" in html
    doc = _Doc()
    doc.feed(html)
    assert doc.h2 == [t for _, t in SECTIONS] and len(doc.imgs) == 3


def test_score_recommendations_with_a_published_policy(tmp_path):
    """`report --policy` scores every hour of the week on the observed state: the test policy picks
    W exactly when more than five jobs were queued at the epoch start."""
    con = kth_warehouse()
    try:
        folder, sums = write_test_artifact(tmp_path / "policies", "kth-artifact")
        insert_policy(con, "kth-artifact", path=str(folder), sums_sha256=sums)
        assert score_recommendations(con, "kth-artifact", WEEK) == 168
        assert score_recommendations(con, "kth-artifact", WEEK) == 168  # replaced, not duplicated
        report = build_report(con, CLUSTER, WEEK, tmp_path / "reports")
    finally:
        con.close()
    rec = report["recommendations"]
    assert rec["status"] == "ok" and rec["epochs"] == 168 and rec["policy_id"] == "kth-artifact"
    queue = {r["hour_start"]: r["queued_jobs"] for r in report["queue_hourly"]}
    for r in rec["rows"]:
        assert (r["objective"] == "W") == (queue[r["epoch_start"]] > 5), r["epoch_start"]
        assert len(r["q_values"]) == 2
    assert rec["share"].get("W", 0.0) == pytest.approx(sum(n > 5 for n in queue.values()) / 168)


def test_weeks_and_errors(wh):
    assert parse_week("2024-W10") == datetime(2024, 3, 4, tzinfo=UTC)
    with pytest.raises(ValueError, match="ISO week"):
        parse_week("2024-10")
    assert last_complete_week(wh, CLUSTER) == "1997-W34"
    with pytest.raises(LookupError, match="no jobs for cluster"):
        last_complete_week(wh, "nope")
    with pytest.raises(LookupError, match="outside the data"):
        build_report(wh, CLUSTER, "2001-W01", "/tmp/unused-reports")


def test_artifact_helper_is_a_noop_outside_flows():
    assert publish_markdown_artifact("# hello", key="Report KTH 1996-W44") is None


def test_report_command(tmp_path):
    from typer.testing import CliRunner

    from metapilot.cli import app

    db = tmp_path / "w.duckdb"
    kth_warehouse(db).close()
    res = CliRunner().invoke(app, ["report", "--cluster", CLUSTER, "--week", WEEK, "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "reports" / CLUSTER / WEEK / "report.html").exists()
    assert "mean wait" in res.output and "report.html" in res.output
    res = CliRunner().invoke(app, ["report", "--cluster", CLUSTER, "--week", "1996-44", "--db", str(db)])
    assert res.exit_code == 2 and "ISO week" in res.output


def test_artifact_published_inside_a_flow(prefect_harness):
    """Inside a flow run the Markdown becomes a Prefect artifact (keys are lower-cased and dashed)."""
    import asyncio

    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    @flow
    def publish() -> str:
        return str(publish_markdown_artifact("# KTH-SP2 1996-W44\n\nhello", key="Report KTH-SP2 1996-W44"))

    assert publish()

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["report-kth-sp2-1996-w44"])))

    arts = asyncio.run(read())
    assert arts and arts[0].type == "markdown" and "hello" in arts[0].data


def test_placement_section_only_when_the_cluster_has_placement_runs(built):
    from metapilot.models.reporting.render import PLACEMENT, render_html, render_markdown

    report, _ = built
    assert "placement" not in report  # KTH-SP2 has no node list: no section (the h2 tests above)
    rows = [{"mode": "inflate", "policy": "fgd", "seed": 42, "created_at": "2024-01-01T00:00:00+00:00", "pods": 100,
             "placed": 90, "failed": 10, "mean_wait_s": None, "gpu_alloc_share": 0.9483, "frag_gpu_share": 0.05,
             "imbalance": 0.1061, "hot_node_share": 0.99, "idle_share": 0.05},
            {"mode": "time", "policy": "ob-placement-ppo-0123456789", "seed": 0, "created_at": "2024-01-01T00:00:00+00:00",
             "pods": 100, "placed": 100, "failed": 0, "mean_wait_s": 12.0, "gpu_alloc_share": 0.002,
             "frag_gpu_share": 0.13, "imbalance": 0.0208, "hot_node_share": 0.0, "idle_share": 0.0}]
    with_runs = {**report, "placement": rows}
    doc = _Doc()
    doc.feed(render_html(with_runs))
    assert doc.h2 == [t for _, t in SECTIONS[:-1]] + [PLACEMENT[1], SECTIONS[-1][1]]
    body = " ".join(doc.text)
    assert "ob-placement-ppo-0123456789" in body and "94.83%" in body and "2.08%" in body
    md = render_markdown(with_runs)
    assert f"## {PLACEMENT[1]}" in md and "| inflate | fgd | 100 | 90 | 10 |" in md


def test_free_text_cluster_names_become_one_safe_file_name():
    """Cluster names are free text (`--cluster "Site A/gpu"`): report folders, policy ids and the
    publish pointer all name files with the same safe form."""
    from metapilot.ground.files import safe_name

    assert safe_name("Site A/gpu") == "Site_A_gpu" and safe_name("KTH-SP2") == "KTH-SP2" and safe_name("") == "_" and safe_name("..") == "__"
    assert safe_name("../../etc") == ".._.._etc" and "/" not in safe_name("a/../../b")


def test_recommendations_of_a_refused_controller_are_not_advice(tmp_path):
    """When the publish gate refused the controller, the report never reads its objectives as what to run."""
    from metapilot.warehouse.publish_store import promote

    con = kth_warehouse()
    try:
        insert_policy(con)
        promote(con, POLICY_ID, None, None, db=tmp_path / "w.duckdb", kind="fixed", recommendation="SAF+easy",
                message="Keep SAF+EASY: the learned controller is worse on mean bounded slowdown (2.0 vs 1.9)")
        report = build_report(con, CLUSTER, WEEK, tmp_path)
        rec = report["recommendations"]
        assert rec["status"] == "no-rows" and rec["policy_id"] == POLICY_ID
        assert "the publish gate refused" in rec["message"] and "Score the week" not in rec["message"]
        assert report["decision"]["kind"] == "fixed"

        hours = [WS + timedelta(hours=h) for h in range(168)]
        store_recommendations(con, pl.DataFrame({
            "cluster": CLUSTER, "partition": "*", "epoch_start": hours, "epoch_s": 3600, "policy_id": POLICY_ID,
            "action": [3 if h % 24 < 6 else 0 for h in range(168)],
            "objective": ["WFP3" if h % 24 < 6 else "SJF" for h in range(168)],
            "q_values": [[0.0] * 5 for _ in hours],
        }))
        report = build_report(con, CLUSTER, WEEK, tmp_path)
        rec = report["recommendations"]
        assert rec["status"] == "ok" and rec["published"] is False
        md = (tmp_path / CLUSTER / WEEK / "report.md").read_text()
        assert "for comparison only" in md and "SJF = drain the queue" in md and "WFP3 = tail first" in md
        assert "U = utilisation first" not in md  # the legend follows the objectives recommended
        from metapilot.models.reporting.plots import OBJECTIVE_COLORS, objective_label

        assert objective_label("SJF") == "SJF: drain the queue" and objective_label("X1") == "X1"
        assert len({OBJECTIVE_COLORS[k] for k in ("SJF", "SAF", "F1", "WFP3", "UNICEF", "FCFS", "LAF")}) == 7

        # a refusal that names no rule (nothing waited on the checkpoint window) keeps the current policy,
        # in the record and the pointer too: never the refused controller
        pointer = promote(con, POLICY_ID, None, None, db=tmp_path / "w.duckdb", kind="fixed", recommendation=None,
                          message="Keep the scheduler's current policy: on the checkpoint window no job waited")
        import json

        p = json.loads(pointer.read_text())
        assert p["kind"] == "fixed" and p["recommendation"] == "the scheduler's current policy" and p["policy_id"] is None
        assert build_report(con, CLUSTER, WEEK, tmp_path)["decision"]["recommendation"] == "the scheduler's current policy"

        promote(con, POLICY_ID, None, None, db=tmp_path / "w.duckdb")  # now it passes and is published
        report = build_report(con, CLUSTER, WEEK, tmp_path)
        assert report["recommendations"]["published"] is True
        assert "for comparison only" not in (tmp_path / CLUSTER / WEEK / "report.md").read_text()
    finally:
        con.close()
