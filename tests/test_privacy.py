"""SPEC §8 privacy: no raw user, account, group or job name anywhere in the warehouse by default
(quarantined lines included), the site key guarded by its fingerprint, and identity fields of
quarantined lines replaced by the same keyed hashes as in `jobs`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from metapilot.transforms.privacy import LineRedactor, keyed_hash
from metapilot.warehouse.ingest import IngestOptions, ingest_file

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "logs"
POZIDRIV = SAMPLES / "slurm" / "pozidriv.log.gz"
SACCT_JSON = SAMPLES / "slurm" / "sacct_1.json"

USER, ACCOUNT, GROUP, JOBNAME = "quokkauser", "wombatproj", "aardvarkgrp", "kiwijobname"
SECOND_USER = "numbatuser"
NAMES = (USER, ACCOUNT, GROUP, JOBNAME, SECOND_USER)


def _pozidriv(n: int) -> list[list[str]]:
    with gzip.open(POZIDRIV, "rt") as f:
        return [next(f).rstrip("\n").split("|") for _ in range(n)]


def _named(cells: list[str], user: str = USER) -> list[str]:
    c = cells.copy()
    # XDMoD layout: 5 account, 6 group, 8 user, 25 jobname
    c[5], c[6], c[8], c[25] = ACCOUNT, GROUP, user, f"{JOBNAME}_{user}"
    return c


def write_logs(folder: Path) -> list[Path]:
    """Logs in four formats whose good, malformed, unvalidated and non-UTF-8 lines name the users."""
    rows = _pozidriv(24)  # mostly good lines: the format is told from the content
    good = [_named(r) for r in rows[:20]]
    bad_submit = _named(rows[20], SECOND_USER)
    bad_submit[10] = "not-a-time"
    short = _named(rows[21])[:20]  # wrong field count: the layout cannot be read
    end_before_start = _named(rows[22], SECOND_USER)  # fails the data-check suite
    end_before_start[12], end_before_start[13] = "2016-12-22T07:03:30", "2016-12-21T07:03:30"
    sacct = folder / "named.sacct"
    text = "\n".join("|".join(c) for c in [*good, bad_submit, short, end_before_start]) + "\n"
    sacct.write_bytes(text.encode() + f"977{USER}|\xff\xfe|{ACCOUNT}|{GROUP}\n".encode("latin-1"))

    pbs = folder / "named.pbs"
    pbs.write_text("".join(
        f"12/21/2009 15:27:00;E;{i}.edge;user={USER} group={GROUP} account={ACCOUNT} jobname={JOBNAME} queue=ccr "
        f"ctime=1261424924 qtime=1261424924 etime=1261424924 start=1261425023 owner={USER}@edge end=1261427220 "
        "Exit_status=0 Resource_List.nodes=1:ppn=8\n" for i in range(100, 112)) +
        f"12/21/2009 15:28:00;E;7.edge;user={SECOND_USER} group={GROUP} jobname={JOBNAME} queue=ccr start=1261425023 "
        "end=1261427220 Exit_status=0\n"  # no ctime/qtime: quarantined (no submit time)
        f"garbage line from {USER} in {ACCOUNT}\n"
        f"13/45/2009 99:99:99;E;8.edge;user={USER} group={GROUP}\n"
    )

    doc = json.loads(SACCT_JSON.read_text())
    job = doc["jobs"][0]
    for j in doc["jobs"]:
        j.update(user=USER, account=ACCOUNT, group=GROUP, name=JOBNAME)
        j["association"]["user"], j["association"]["account"] = USER, ACCOUNT
    bad = json.loads(json.dumps(job))
    bad.update(user=SECOND_USER, working_directory=f"/home/{SECOND_USER}/run")
    bad["time"]["submission"] = 0
    doc["jobs"].append(bad)
    sj = folder / "named.json"
    sj.write_text(json.dumps(doc))

    swf = folder / "named.swf"
    swf.write_text("; MaxProcs: 100\n; UnixStartTime: 843480031\n"
                   + "".join(f"    {i} 0 10 100 4 -1 -1 4 200 -1 1 17 3 -1 1 -1 -1 -1\n" for i in range(1, 12))
                   + f"    12 5 10 100 4 -1 -1 4 200 -1 1 {USER} 3 -1 1 -1 -1 -1\n")
    return [sacct, pbs, sj, swf]


def text_cells(con) -> list[tuple[str, str]]:
    """(table, column) of every text column of every table in the warehouse."""
    return con.execute(
        "SELECT c.table_name, c.column_name FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE t.table_type = 'BASE TABLE' AND c.data_type = 'VARCHAR' ORDER BY 1, 2").fetchall()


def occurrences(con, names=NAMES) -> dict[str, int]:
    found = {}
    for table, column in text_cells(con):
        for name in names:
            n = con.execute(f'SELECT count(*) FROM "{table}" WHERE contains("{column}", ?)', [name]).fetchone()[0]
            if n:
                found[f"{table}.{column} ~ {name}"] = n
    return found


@pytest.fixture
def named_logs(tmp_path) -> list[Path]:
    d = tmp_path / "logs"
    d.mkdir()
    return write_logs(d)


def test_no_raw_name_in_any_text_column_of_any_table(mem_con, site_key, named_logs):
    reps = [ingest_file(mem_con, f, IngestOptions(cluster="named"), site_key) for f in named_logs]
    assert [r.outcome for r in reps] == ["loaded"] * 4, [r.message for r in reps]
    # the logs did reach the quarantine, and their lines are there (identities hashed)
    q = mem_con.execute("SELECT count(*) FROM quarantine").fetchone()[0]
    assert q >= 9 and sum(r.rows_quarantined for r in reps) == q
    assert len(text_cells(mem_con)) > 20  # the scan covers jobs, quarantine, ingest_files, ...
    assert occurrences(mem_con) == {}
    # the same hash as in jobs, so a quarantined line can still be matched to its user
    user_id = keyed_hash(USER, site_key)
    assert mem_con.execute("SELECT count(*) FROM jobs WHERE user_id = ?", [user_id]).fetchone()[0] >= 3
    assert mem_con.execute("SELECT count(*) FROM quarantine WHERE contains(raw, ?)", [user_id]).fetchone()[0] >= 3


def test_the_scan_sees_names_when_they_are_kept(mem_con, site_key, named_logs):
    """--keep-names stores raw names (the operator's choice): the same scan finds them."""
    for f in named_logs:
        ingest_file(mem_con, f, IngestOptions(cluster="named", keep_names=True), site_key)
    found = occurrences(mem_con)
    assert any(k.startswith("quarantine.raw") for k in found) and any(k.startswith("jobs.user_id") for k in found)


def test_quarantined_sacct_line_keeps_its_shape():
    """Identity columns become hashes; times, states and sizes stay readable for the operator."""
    key = bytes(range(32))
    head = ["|".join(_named(r)) for r in _pozidriv(20)]
    cells = _named(_pozidriv(1)[0])
    cells[10] = "not-a-time"
    red, found = LineRedactor("sacct", key, head=head).redact("|".join(cells))
    out = red.split("|")
    assert len(out) == len(cells) and {USER, ACCOUNT, GROUP} <= found
    assert out[8] == keyed_hash(USER, key) and out[5] == keyed_hash(ACCOUNT, key)
    assert out[10] == "not-a-time" and out[16] == cells[16] and out[12] == cells[12] and out[0] == cells[0]


def test_pbs_line_keeps_resources_and_hashes_names():
    key = bytes(range(32))
    red, _ = LineRedactor("pbs", key).redact(
        f"12/21/2009 15:27:00;E;6.edge;user={USER} group={GROUP} queue=ccr Resource_List.walltime=04:00:00 "
        f"Output_Path=edge:/home/{USER}/out")
    assert USER not in red and GROUP not in red
    assert "queue=ccr" in red and "Resource_List.walltime=04:00:00" in red and red.startswith("12/21/2009 15:27:00;E;6.edge;")
    assert f"user={keyed_hash(USER, key)}" in red


def test_pseudonymise_with_a_name_cache_gives_the_plain_hmac_of_every_name(site_key):
    """The chunk-to-chunk cache (issue 14: hashes found by a join, not a Python loop) changes no
    hash: every id is HMAC-SHA256 of its name, nulls stay null, also past the cache's bound."""
    import polars as pl
    from metapilot.transforms.privacy import NameCache, pseudonymise

    cache = NameCache(max_names=3)
    chunks = [pl.DataFrame({"user_name": ["ann", None, "bob", "ann"], "job_name": ["x", "y", "x", "zé"]}),
              pl.DataFrame({"user_name": ["bob", "cy", None, None], "job_name": ["y", "w", "x", "x"]})]
    for df in chunks:
        out = pseudonymise(df, site_key, cache=cache)
        assert out.equals(pseudonymise(df, site_key))  # the plain path: no cache at all
        for raw, col in (("user_name", "user_id"), ("job_name", "job_name")):
            want = [None if v is None else keyed_hash(v, site_key) for v in df[raw].to_list()]
            assert out[col].to_list() == want
        assert out["account_id"].null_count() == out.height
