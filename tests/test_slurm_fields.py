"""sacct field formats (transforms.slurm_fields), including Open XDMoD's GPU-count fixtures."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from metapilot.transforms import slurm_fields as sf

DATA = Path(__file__).resolve().parent / "data"
XDMOD = DATA / "slurm" / "xdmod-unit"


def ev(expr: pl.Expr, values: list, dtype: pl.DataType = pl.Utf8) -> list:
    """Evaluate an expression over column `x` holding `values`."""
    return pl.DataFrame({"x": values}, schema={"x": dtype}).select(expr.alias("out"))["out"].to_list()


X = pl.col("x")


def test_times_utc_and_unknowns():
    out = ev(sf.parse_time(X), ["2015-06-26T13:57:00", "Unknown", "None", "", None, "2015-13-01T00:00:00", "xyz"])
    assert out[0] == datetime(2015, 6, 26, 13, 57, tzinfo=timezone.utc)
    assert out[1:] == [None] * 6


def test_times_in_cluster_zone_become_utc():
    out = ev(sf.parse_time(X, "America/New_York"), ["2015-06-26T13:57:00", "2015-01-05T08:00:00", "2015-03-08T02:30:00"])
    assert out[0] == datetime(2015, 6, 26, 17, 57, tzinfo=timezone.utc)  # EDT, UTC-4
    assert out[1] == datetime(2015, 1, 5, 13, 0, tzinfo=timezone.utc)  # EST, UTC-5
    assert out[2] is None  # does not exist (spring forward): not guessed
    df = pl.DataFrame({"x": ["2015-06-26T13:57:00"]}).select(sf.parse_time(X, "Europe/Paris"))
    assert df.schema["x"] == pl.Datetime("us", "UTC")


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("3-00:00:00", 259200), ("2-22:03:04", 252184), ("14:00:49", 50449), ("00:05:16", 316),
        ("01:07.402", 67), ("125-00:00:00", 10800000), ("0-00:00:01", 1), ("00:00:00", 0),
        ("UNLIMITED", None), ("Partition_Limit", None), ("INVALID", None), ("", None), (None, None), ("1:2:3:4", None),
    ],
)
def test_durations(text, seconds):
    assert ev(sf.parse_duration(X), [text]) == [seconds]


def test_raw_minutes():
    assert ev(sf.parse_raw_minutes(X), ["60", "UNLIMITED", "4294967295", ""]) == [3600, None, None, None]


@pytest.mark.parametrize(
    "reqmem,cpus,nodes,mib",
    [
        ("3000Mc", 256, 32, 768000),  # per CPU
        ("48000Mn", 36, 3, 144000),  # per node
        ("1000Mc", 256, 8, 256000),
        ("0n", 12, 1, None),  # --mem=0: the whole node, amount unknown
        ("100M", 1, 1, 100), ("16G", 4, 1, 16384), ("2T", 1, 1, 2 * 1024 * 1024), ("5Gn", 1, 2, 10240),
        ("2048K", 1, 1, 2), ("30512M", 4, 1, 30512), ("1.5G", 1, 1, 1536),
        ("2147486648Mn", 12, 1, None),  # pozidriv artefact: > 1 PiB per job
        ("100Mcd", 1, 1, None), ("", 1, 1, None), ("abc", 1, 1, None),
        ("3000Mc", None, 1, None),  # per CPU without a CPU count
    ],
)
def test_reqmem(reqmem, cpus, nodes, mib):
    df = pl.DataFrame({"m": [reqmem], "c": [cpus], "n": [nodes]}, schema={"m": pl.Utf8, "c": pl.Int64, "n": pl.Int64})
    got = df.select(sf.parse_reqmem(pl.col("m"), pl.col("c"), pl.col("n")))["m"].to_list()
    assert got == [mib]


def test_sizes():
    assert ev(sf.parse_size_mib(X), ["239596K", "7714.15M", "16G", "1T", "100", "", "0.07Mn", None]) == [
        239596 / 1024, 7714.15, 16384.0, 1048576.0, 100.0, None, None, None,
    ]


def test_tres_counts_and_memory():
    tres = [
        "billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=16G,node=1", "billing=256,cpu=256,mem=3000M,node=32", "", None, "cpu=1,mem=1.5T",
    ]
    assert ev(sf.tres_count(X, "cpu"), tres) == [4, 256, None, None, 1]
    assert ev(sf.tres_count(X, "node"), tres) == [1, 32, None, None, None]
    assert ev(sf.tres_mem_mib(X), tres) == [16384, 3000, None, None, 1572864]
    assert ev(sf.tres_gpus(X), tres) == [2, 0, None, None, 0]
    assert ev(sf.tres_gpu_type(X), tres) == ["a100", None, None, None, None]


def test_tres_gpus_typed_only_are_summed_and_other_gres_ignored():
    tres = ["cpu=8,gres/gpu:h100=4,gres/gpu:a100=2", "gres/gpu:h100=8,gres/gpu=8", "cpu=8,gres/shard=32,gres/gpumem=40G"]
    assert ev(sf.tres_gpus(X), tres) == [6, 8, 0]
    assert ev(sf.tres_gpu_type(X), tres) == ["a100,h100", "h100", None]


def test_xdmod_alloc_tres_gpu_count_fixture():
    """Open XDMoD's slurm-resource-parser fixture; it says 0 for an empty AllocTRES, we say unknown."""
    cases = json.loads((XDMOD / "alloc-tres-gpu-count.json").read_text())
    got = ev(sf.tres_gpus(X), [c[0] for c in cases])
    for (tres, expected), value in zip(cases, got):
        assert (0 if tres == "" and value is None else value) == expected, tres


def test_xdmod_gpu_gres_fixture_alloc_tres():
    """The gpu-gres shredder fixture: the GPU count comes from AllocTRES (23rd field)."""
    lines = (XDMOD / "input" / "accounting-logs-with-gpu-gres.log").read_text().splitlines()
    expected = json.loads((XDMOD / "output" / "accounting-logs-with-gpu-gres.json").read_text())
    alloc = [ln.split("|")[22] for ln in lines]
    assert ev(sf.tres_gpus(X), alloc) == expected


def test_old_style_gres():
    gres = ["gpu:2", "gpu:V100:2", "gpu:P100:2(IDX:0-1)", "hbm:0,gpu:4,bandwidth:4G", "gpu:0(IDX:N/A)", "hbm:0", "", None]
    assert ev(sf.gres_gpus(X), gres) == [2, 2, 2, 4, 0, 0, None, None]
    assert ev(sf.gres_gpu_type(X), gres) == [None, "V100", "P100", None, None, None, None, None]


def test_states():
    states = ["COMPLETED", "CANCELLED by 102216", "cancelled", "CANCELLED+", "OUT_OF_MEMORY", "TO", "FOO", "", None, "REQUEUE_HOLD"]
    assert ev(sf.normalize_state(X), states) == [
        "COMPLETED", "CANCELLED", "CANCELLED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT", "UNKNOWN", None, None, "REQUEUED",
    ]
    assert ev(sf.state_is_known(X), ["FOO", "PENDING", "CANCELLED by 1"]) == [False, True, True]


@pytest.mark.parametrize(
    "jid,parts",
    [
        ("123", ("123", None, None, None, None)),
        ("123_4", ("123", "4", None, None, None)),
        ("123_[1-3,7]", ("123", None, "1-3,7", None, None)),
        ("123_[1-5%2]", ("123", None, "1-5", None, None)),
        ("123+0", ("123", None, None, "0", None)),
        ("123.batch", ("123", None, None, None, "batch")),
        ("123.extern", ("123", None, None, None, "extern")),
        ("123.interactive", ("123", None, None, None, "interactive")),
        ("123.0", ("123", None, None, None, "0")),
        ("123_4.batch", ("123", "4", None, None, "batch")),
        ("123+1.0", ("123", None, None, "1", "0")),
        ("abc", (None,) * 5), ("123_", (None,) * 5), ("_4", (None,) * 5), ("123_[a-b]", (None,) * 5), ("", (None,) * 5),
    ],
)
def test_job_ids(jid, parts):
    row = pl.DataFrame({"x": [jid]}).select(sf.parse_job_id(X).alias("p")).unnest("p").row(0)
    assert row == parts


def test_xdmod_job_array_fixture_expansion():
    lines = (XDMOD / "input" / "accounting-logs-with-job-arrays.log").read_text().splitlines()
    expected = json.loads((XDMOD / "output" / "accounting-logs-with-job-arrays.json").read_text())
    for ln, want in zip(lines, expected):
        jid = ln.split("|")[0]
        spec = jid.split("_", 1)[1]
        if spec.startswith("["):
            assert sf.expand_array_spec(spec.strip("[]").split("%")[0]) == want
        else:
            assert [int(spec)] == want


def test_array_ranges_steps_and_bad_ranges():
    assert sf.expand_array_spec("1-9:4") == [1, 5, 9]
    assert sf.expand_array_spec("3,1-2,3") == [3, 1, 2]  # each task once
    for bad in ("5-1", "1-4000001", "0-3999999,0-3999999", "1-3:0", "x"):
        assert sf.expand_array_spec(bad) is None, bad
    tasks, bad = sf.expand_array_specs(pl.DataFrame({"line_no": [1, 2], "spec": ["1-2", "9-3"]}))
    assert tasks.to_dicts() == [{"line_no": 1, "task": 1}, {"line_no": 1, "task": 2}]
    assert bad.to_dicts() == [{"line_no": 2, "reason": "bad array index range '[9-3]'"}]
