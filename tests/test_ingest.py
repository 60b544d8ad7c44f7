"""The loader end to end on real samples: accounting, idempotency, replacement, atomicity, privacy."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "logs"
from metapilot.warehouse.ingest import (
    IngestOptions,
    infer_missing_capacity,
    ingest_file,
    ingest_paths,
)

POZIDRIV = SAMPLES / "slurm" / "pozidriv.log.gz"
KTH = SAMPLES / "swf" / "KTH-SP2-1996-2.1-cln.swf.gz"
DATA = Path(__file__).resolve().parent / "data"
SGE_LINE = (DATA / "sge" / "apel" / "sge-test-parse-line.accounting").read_text().splitlines()[1]
LSF_LINE = (DATA / "lsf" / "xdmod-unit" / "truncated-record.log").read_text().splitlines()[0]
GL26 = DATA / "lsf" / "hpc-cost-simulator" / "issues-gl-26" / "lsb.acct.issue-gl-26"


def counts(con) -> tuple[int, int, int]:
    return tuple(con.execute("SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM quarantine), "
                             "(SELECT count(*) FROM ingest_files WHERE outcome = 'loaded')").fetchone())


def check_reconciles(con, rep) -> None:
    assert rep.reconciles, rep
    row = con.execute("SELECT lines_read, rows_loaded, rows_merged, rows_quarantined, lines_skipped, jobs_written "
                      "FROM ingest_files WHERE sha256 = ?", [rep.sha256]).fetchone()
    assert row[0] == row[1] + row[2] + row[3] + row[4]
    assert row[5] == con.execute("SELECT count(*) FROM jobs WHERE source_file_id = ?", [rep.sha256]).fetchone()[0]
    assert row[3] == con.execute("SELECT count(*) FROM quarantine WHERE file_sha256 = ?", [rep.sha256]).fetchone()[0]


@pytest.mark.parametrize("path", sorted(p for p in SAMPLES.rglob("*") if p.is_file() and p.name != "README.md"), ids=lambda p: p.name)
def test_every_bundled_sample_loads_and_reconciles(mem_con, site_key, path):
    rep = ingest_file(mem_con, path, IngestOptions(), site_key)
    assert rep.outcome == "loaded", rep.message
    assert rep.jobs_written > 0
    check_reconciles(mem_con, rep)


def test_swf_counts_and_header_capacity(mem_con, site_key):
    rep = ingest_file(mem_con, KTH, IngestOptions(), site_key)
    assert rep.jobs_written == 28476 and rep.cluster == "KTH-SP2"
    cap = mem_con.execute("SELECT partition, cores, nodes, source FROM capacity WHERE cluster = 'KTH-SP2'").fetchall()
    assert cap == [("*", 100, 100, "swf-header")]


def test_same_file_twice_changes_nothing(mem_con, site_key):
    first = ingest_file(mem_con, POZIDRIV, IngestOptions(), site_key)
    before = counts(mem_con)
    second = ingest_file(mem_con, POZIDRIV, IngestOptions(), site_key)
    assert first.outcome == "loaded" and second.outcome == "skipped"
    assert counts(mem_con) == before
    assert before[0] == 11704


def _pozidriv_lines(n: int) -> list[str]:
    with gzip.open(POZIDRIV, "rt") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def test_running_record_replaced_by_completed(mem_con, site_key, tmp_path):
    line = _pozidriv_lines(1)[0].split("|")
    running = line.copy()
    running[13], running[14], running[16] = "Unknown", "1-00:00:00", "RUNNING"
    (tmp_path / "day1.log").write_text("|".join(running) + "\n")
    (tmp_path / "day2.log").write_text("|".join(line) + "\n")
    r1 = ingest_file(mem_con, tmp_path / "day1.log", IngestOptions(), site_key)
    assert mem_con.execute("SELECT state FROM jobs").fetchall() == [("RUNNING",)]
    r2 = ingest_file(mem_con, tmp_path / "day2.log", IngestOptions(), site_key)
    assert r1.outcome == r2.outcome == "loaded"
    assert mem_con.execute("SELECT job_id, state, end_time IS NOT NULL FROM jobs").fetchall() == [(line[0], "COMPLETED", True)]
    # and the stale RUNNING record, ingested again later, does not undo it
    (tmp_path / "day1-again.log").write_text("|".join(running) + "\n# re-export\n")
    ingest_file(mem_con, tmp_path / "day1-again.log", IngestOptions(), site_key)
    assert mem_con.execute("SELECT state FROM jobs").fetchall() == [("COMPLETED",)]


def test_duplicate_lines_within_a_file_are_merged(mem_con, site_key, tmp_path):
    lines = _pozidriv_lines(3)
    (tmp_path / "dup.log").write_text("\n".join(lines + [lines[1]]) + "\n")
    rep = ingest_file(mem_con, tmp_path / "dup.log", IngestOptions(), site_key)
    assert (rep.lines_read, rep.rows_loaded, rep.rows_merged, rep.jobs_written) == (4, 3, 1, 3)
    check_reconciles(mem_con, rep)


def test_a_line_repeated_chunks_later_is_merged(mem_con, site_key, tmp_path):
    # the repeat meets its first reading only when staging folds every chunk's key hashes, range by range
    lines = _pozidriv_lines(400)
    (tmp_path / "dup.log").write_text("\n".join(lines + [lines[0], lines[-1]]) + "\n")
    rep = ingest_file(mem_con, tmp_path / "dup.log", IngestOptions(chunk_bytes=8 * 1024), site_key)
    assert (rep.lines_read, rep.rows_loaded, rep.rows_merged, rep.jobs_written) == (402, 400, 2, 400)
    check_reconciles(mem_con, rep)


def test_truncated_gzip_leaves_warehouse_unchanged(mem_con, site_key, tmp_path):
    ingest_file(mem_con, KTH, IngestOptions(), site_key)
    before = counts(mem_con)
    data = POZIDRIV.read_bytes()
    bad = tmp_path / "pozidriv-truncated.log.gz"
    bad.write_bytes(data[: len(data) * 2 // 3])
    rep = ingest_file(mem_con, bad, IngestOptions(chunk_bytes=64 * 1024), site_key)
    assert rep.outcome == "failed"
    assert "ends unexpectedly" in rep.message and "after line" in rep.message
    assert counts(mem_con) == before
    assert mem_con.execute("SELECT outcome FROM ingest_files WHERE sha256 = ?", [rep.sha256]).fetchone() == ("failed",)


def test_crash_midway_rolls_back(mem_con, site_key, monkeypatch):
    import metapilot.warehouse.ingest_stage as stage

    real = stage.check_jobs
    calls = {"n": 0}

    def flaky(df, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("disk on fire")
        return real(df, **kw)

    monkeypatch.setattr(stage, "check_jobs", flaky)
    rep = ingest_file(mem_con, POZIDRIV, IngestOptions(chunk_bytes=256 * 1024), site_key)
    assert rep.outcome == "failed" and "disk on fire" in rep.message and "after line" in rep.message
    assert counts(mem_con) == (0, 0, 0)
    monkeypatch.setattr(stage, "check_jobs", real)
    assert ingest_file(mem_con, POZIDRIV, IngestOptions(), site_key).outcome == "loaded"


def test_names_are_keyed_hashes_unless_kept(mem_con, site_key, tmp_path):
    lines = _pozidriv_lines(5)
    users = {ln.split("|")[8] for ln in lines}
    (tmp_path / "a.log").write_text("\n".join(lines) + "\n")
    ingest_file(mem_con, tmp_path / "a.log", IngestOptions(), site_key)
    stored = {r[0] for r in mem_con.execute("SELECT user_id FROM jobs").fetchall()}
    assert stored.isdisjoint(users) and len(stored) == len(users)
    raw = "SELECT count(*) FROM jobs WHERE user_id IN (SELECT unnest(?))"
    assert mem_con.execute(raw, [list(users)]).fetchone()[0] == 0
    # a log names its own cluster (--cluster never renames it: issue 37)
    (tmp_path / "b.log").write_text("\n".join(ln.replace("|pozidriv|", "|named|", 1) for ln in lines) + "\n\n")
    ingest_file(mem_con, tmp_path / "b.log", IngestOptions(keep_names=True), site_key)
    assert {r[0] for r in mem_con.execute("SELECT user_id FROM jobs WHERE cluster = 'named'").fetchall()} == users


def test_unrecognised_file_is_refused_with_advice(mem_con, site_key, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("hello\nthis is not a log\n")
    rep = ingest_file(mem_con, f, IngestOptions(), site_key)
    assert rep.outcome == "failed" and "--format" in rep.message
    assert counts(mem_con) == (0, 0, 0)


def test_directories_globs_and_missing_paths(mem_con, site_key, tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy(POZIDRIV, d / "a.log.gz")
    shutil.copy(KTH, d / "kth.swf.gz")
    reps = list(ingest_paths(mem_con, [str(d), str(tmp_path / "*.nothing"), str(tmp_path / "missing.log")], IngestOptions(), site_key))
    assert [r.outcome for r in reps] == ["loaded", "loaded", "failed", "failed"]
    assert "no such file" in reps[-1].message


def test_inferred_capacity_is_marked(mem_con, site_key):
    ingest_file(mem_con, POZIDRIV, IngestOptions(), site_key)
    warnings = infer_missing_capacity(mem_con)
    assert warnings and "inferred" in warnings[0]
    src, cores = mem_con.execute("SELECT source, cores FROM capacity WHERE cluster = 'pozidriv'").fetchone()
    assert src == "inferred-peak" and cores > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=3000), template=st.sampled_from(["sacct", "swf", "pbs", "sge", "lsf", "raw"]))
def test_garbage_never_crashes_and_every_line_is_accounted(tmp_path_factory, site_key, blob, template):
    from metapilot.warehouse.db import connect_memory

    con = connect_memory()
    prefix = {
        "sacct": _pozidriv_lines(2)[1] + "\n",
        "swf": "; MaxProcs: 100\n; UnixStartTime: 843480031\n    1 0 10 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1\n",
        "pbs": "12/21/2009 15:27:00;E;6.edge;user=u group=g queue=q ctime=1261424924 qtime=1261424924 etime=1261424924 start=1261425023 end=1261427220 Exit_status=0 Resource_List.nodes=1:ppn=8\n",
        "sge": SGE_LINE + "\n",
        "lsf": LSF_LINE + "\n",
        "raw": "",
    }[template]
    f = tmp_path_factory.mktemp("g") / "garbage.log"
    f.write_bytes(prefix.encode() + blob)
    rep = ingest_file(con, f, IngestOptions(), site_key)
    if rep.outcome == "loaded":
        check_reconciles(con, rep)
    else:
        assert rep.message and counts(con) == (0, 0, 0)
    con.close()


@pytest.mark.parametrize("path", sorted(p for d in ("sge", "lsf") for p in (DATA / d).rglob("*")
                                        if p.is_file() and "LICENSE" not in p.name and p.suffix not in (".json", ".csv", ".md")),
                         ids=lambda p: p.name)
def test_real_sge_and_lsf_files_load_and_reconcile(mem_con, site_key, path):
    rep = ingest_file(mem_con, path, IngestOptions(), site_key)
    assert rep.outcome == "loaded" and rep.format in ("sge", "uge", "lsf"), rep.message
    assert rep.jobs_written > 0
    check_reconciles(mem_con, rep)
    assert rep.data_checks["success"] and rep.data_checks["failed_rows"] == 0


def test_latin1_log_warns_then_loads_again_with_encoding(mem_con, site_key):
    """A line that is not UTF-8 is quarantined and, above 1% of the file, warned about in the report
    and in ingest_files; ingesting the same file with --encoding replaces that load."""
    first = ingest_file(mem_con, GL26, IngestOptions(), site_key)
    assert first.outcome == "loaded" and first.rows_quarantined == 1 and first.jobs_written == 5
    assert len(first.warnings) == 1 and "(3.6%) were quarantined" in first.warnings[0]
    assert "--encoding latin-1" in first.warnings[0]
    msg, = mem_con.execute("SELECT message FROM ingest_files WHERE sha256 = ?", [first.sha256]).fetchone()
    assert "--encoding latin-1" in msg
    reason, = mem_con.execute("SELECT reason FROM quarantine").fetchone()
    assert reason.startswith("line is not valid utf-8 text") and "--encoding" in reason
    again = ingest_file(mem_con, GL26, IngestOptions(), site_key)
    assert again.outcome == "skipped"
    latin = ingest_file(mem_con, GL26, IngestOptions(encoding="latin-1"), site_key)
    assert latin.outcome == "loaded" and (latin.jobs_written, latin.rows_quarantined) == (5, 1)
    check_reconciles(mem_con, latin)
    reasons = [r[0] for r in mem_con.execute("SELECT reason FROM quarantine").fetchall()]
    assert len(reasons) == 1 and "event time is not an epoch" in reasons[0]  # decoded, then judged as a record
    assert "not valid" not in latin.warnings[0]
    assert mem_con.execute("SELECT count(*), count(DISTINCT job_id) FROM jobs").fetchone() == (5, 5)
    assert ingest_file(mem_con, GL26, IngestOptions(encoding="latin-1"), site_key).outcome == "skipped"


def test_unknown_encoding_is_refused(mem_con, site_key):
    rep = ingest_file(mem_con, GL26, IngestOptions(encoding="utf-16"), site_key)
    assert rep.outcome == "failed" and "ASCII" in rep.message
    rep = ingest_file(mem_con, GL26, IngestOptions(encoding="no-such-codec"), site_key)
    assert rep.outcome == "failed" and "unknown encoding" in rep.message
