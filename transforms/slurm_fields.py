"""Polars expressions for the field formats of Slurm's `sacct` (SPEC §3).

Every function here builds an expression (or transforms a frame) so that a parser can handle
millions of lines without a Python loop over rows. Unknown or unparseable values become null,
never a sentinel: the parsers decide which nulls are worth a quarantine row or a warning.
"""

from __future__ import annotations

import polars as pl
from metapilot.transforms.canonical import SLURM_STATES, UTC_TS

SACCT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"

# 1 PiB in MiB: a job asking for more is an artefact (e.g. `2147486648Mn`), not a request.
MAX_JOB_MEM_MIB = 1024**3

# Slurm's MaxArraySize is at most 4,000,001, so a task index is at most 4,000,000; a pending
# range that claims more tasks than that is garbage and must not be expanded.
MAX_ARRAY_INDEX = 4_000_000
MAX_ARRAY_TASKS = MAX_ARRAY_INDEX + 1

_UNIT_MIB: dict[str, float] = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}

# sacct prints long state names; squeue-style short codes and a few compound Slurm states are
# mapped too so that every parser lands in canonical.SLURM_STATES.
STATE_ALIASES: dict[str, str] = {
    **{s: s for s in SLURM_STATES},
    "BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "CF": "CONFIGURING", "CG": "COMPLETING",
    "DL": "DEADLINE", "F": "FAILED", "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY", "PD": "PENDING",
    "PR": "PREEMPTED", "R": "RUNNING", "RQ": "REQUEUED", "RS": "RESIZING", "RV": "REVOKED",
    "S": "SUSPENDED", "TO": "TIMEOUT",
    "REQUEUE_FED": "REQUEUED", "REQUEUE_HOLD": "REQUEUED", "SPECIAL_EXIT": "REQUEUED",
    "RESV_DEL_HOLD": "PENDING", "STOPPED": "SUSPENDED", "SIGNALING": "COMPLETING", "STAGE_OUT": "COMPLETING",
}

# Job id: `123`, `123_4`, `123_[1-3,7%2]` (pending range), `123+1` (het component), any of them
# followed by a step `.batch`, `.extern`, `.interactive`, `.0`.
JOB_ID_PATTERN = (
    r"^(?P<base>\d+)"
    r"(?:_(?P<task>\d+)|_\[(?P<spec>[0-9][0-9,:\-]*)(?:%\d+)?\])?"
    r"(?:\+(?P<het>\d+))?"
    r"(?:\.(?P<step>[A-Za-z0-9_]+))?$"
)

_DURATION_PATTERN = r"^(?:(?:(?P<d>\d+)-)?(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+)(?:\.\d+)?$"


def null_if_blank(col: pl.Expr) -> pl.Expr:
    """Empty text is unknown: sacct prints nothing where it has nothing. (A name made of spaces
    is a name; an equality test is also many times cheaper than stripping every value.)"""
    return pl.when(col == "").then(None).otherwise(col)


def parse_naive_time(col: pl.Expr) -> pl.Expr:
    """`2015-06-26T13:57:00` as a wall-clock time without a zone (null when unparseable)."""
    return col.str.strptime(pl.Datetime("us"), SACCT_TIME_FORMAT, strict=False, cache=False)  # times barely repeat: a cache only costs


def is_utc(tz: str) -> bool:
    """Whether sacct's times are UTC: no zone to convert from, no repeated or skipped hour."""
    return tz in ("UTC", "Etc/UTC", "Z")


def parse_time(col: pl.Expr, tz: str = "UTC", ambiguous: str = "earliest") -> pl.Expr:
    """`2015-06-26T13:57:00` in the cluster's zone -> UTC timestamp; `Unknown`/`None`/'' -> null.

    sacct prints local wall-clock time; an ambiguous hour (DST fall-back) takes the earlier
    instant (`ambiguous="latest"`: the later one; the sacct parser picks with Elapsed) and a
    non-existent one (spring-forward) becomes null rather than a guess.
    """
    naive = parse_naive_time(col)
    if is_utc(tz):
        return naive.dt.replace_time_zone("UTC")
    local = naive.dt.replace_time_zone(tz, ambiguous=ambiguous, non_existent="null")
    return local.dt.convert_time_zone("UTC").cast(UTC_TS)


def parse_duration(col: pl.Expr) -> pl.Expr:
    """`[D-][HH:]MM:SS[.frac]` -> whole seconds (fraction dropped, as Open XDMoD does).

    `UNLIMITED`, `Partition_Limit`, `INVALID`, '' and anything else unparseable -> null.
    """
    g = col.str.extract_groups(_DURATION_PATTERN)
    part = lambda name: g.struct.field(name).cast(pl.Int64, strict=False)  # noqa: E731
    return (
        part("d").fill_null(0) * 86400 + part("h").fill_null(0) * 3600 + part("m") * 60 + part("s")
    ).alias("duration_s")


def parse_int(col: pl.Expr) -> pl.Expr:
    """Plain integer fields (NCPUS, NNodes, ReqCPUS, ...); anything else (padding included:
    parsable output has none) -> null."""
    return col.cast(pl.Int64, strict=False)


def parse_raw_minutes(col: pl.Expr) -> pl.Expr:
    """TimelimitRaw is minutes; `UNLIMITED`, NO_VAL/INFINITE (>= 2**32 - 2) -> null."""
    m = parse_int(col)
    return pl.when(m < 4294967294).then(m * 60).otherwise(None)


def _unit_factor(unit: pl.Expr) -> pl.Expr:
    return unit.str.to_uppercase().replace_strict(_UNIT_MIB, default=None, return_dtype=pl.Float64)


def parse_size_mib(col: pl.Expr) -> pl.Expr:
    """`16G`, `8000M`, `1.5T`, `512K`, bare numbers (MiB) -> MiB as a float; else null."""
    g = col.str.strip_chars().str.extract_groups(r"^(?P<v>\d+(?:\.\d+)?)(?P<u>[KMGTPkmgtp]?)$")
    return g.struct.field("v").cast(pl.Float64, strict=False) * _unit_factor(g.struct.field("u"))


def _sane_mib(mib: pl.Expr) -> pl.Expr:
    """Round to whole MiB; 0 means "all of the node's memory" (a sentinel) and > 1 PiB is an
    artefact: both are unknown."""
    return pl.when((mib > 0) & (mib <= MAX_JOB_MEM_MIB)).then(mib.round(0)).otherwise(None).cast(pl.Int64)


def reqmem_per(col: pl.Expr) -> pl.Expr:
    """The old-style ReqMem suffix: `c` (per CPU), `n` (per node), or null (a job total)."""
    last = col.str.strip_chars().str.tail(1)
    return pl.when(last.is_in(["c", "n"])).then(last).otherwise(None)


def reqmem_base_mib(col: pl.Expr) -> pl.Expr:
    """ReqMem without its `c`/`n` suffix, in MiB (float); null when it is not `<number>[KMGTP]`.

    String slicing, not a regex: ReqMem is read on every job line.
    """
    s = col.str.strip_chars()
    s = pl.when(s.str.tail(1).is_in(["c", "n"])).then(s.str.head(-1)).otherwise(s)
    unit = s.str.tail(1).str.to_uppercase()
    has_unit = unit.is_in(["K", "M", "G", "T", "P"])
    number = pl.when(has_unit).then(s.str.head(-1)).otherwise(s)
    ok = number.str.contains(r"^\d+(?:\.\d+)?$")
    factor = pl.when(has_unit).then(_unit_factor(unit)).otherwise(1.0)
    return pl.when(ok).then(number.cast(pl.Float64, strict=False) * factor)


def reqmem_total(base_mib: pl.Expr, per: pl.Expr, cpus: pl.Expr, nodes: pl.Expr) -> pl.Expr:
    """Total MiB for the job from reqmem_base_mib/reqmem_per (see parse_reqmem)."""
    total = (
        pl.when(per == "c").then(base_mib * cpus.cast(pl.Float64))
        .when(per == "n").then(base_mib * nodes.cast(pl.Float64))
        .otherwise(base_mib)
    )
    return _sane_mib(total)


def parse_reqmem(col: pl.Expr, cpus: pl.Expr, nodes: pl.Expr) -> pl.Expr:
    """ReqMem -> total MiB for the job.

    Old style `3000Mc` is per CPU (x cpus), `48000Mn` per node (x nodes); new style (Slurm >= 21.08,
    no suffix: `16G`, `100M`) is already the job's total. `0n`/`0` ("whole node") and absurd
    values (> 1 PiB per job, e.g. `2147486648Mn`) -> null.
    """
    return reqmem_total(reqmem_base_mib(col), reqmem_per(col), cpus, nodes)


def tres_count(col: pl.Expr, key: str) -> pl.Expr:
    """Integer value of `key=` in a TRES string (`cpu`, `node`, `billing`, ...)."""
    return col.str.extract(rf"(?:^|,){key}=(\d+)(?:,|$)", 1).cast(pl.Int64, strict=False)


def tres_mem_mib(col: pl.Expr) -> pl.Expr:
    """`mem=16G` in a TRES string -> MiB (absurd or zero -> null)."""
    g = col.str.extract_groups(r"(?:^|,)mem=(?P<v>\d+(?:\.\d+)?)(?P<u>[KMGTPkmgtp]?)(?:,|$)")
    return _sane_mib(g.struct.field("v").cast(pl.Float64, strict=False) * _unit_factor(g.struct.field("u")))


def tres_gpus(col: pl.Expr) -> pl.Expr:
    """GPUs in a TRES string.

    The untyped `gres/gpu=N` is Slurm's total and wins; without it, typed entries
    (`gres/gpu:a100=2`) are summed. Open XDMoD takes the first of either kind
    (alloc-tres-gpu-count.json); the two rules agree on every fixture and differ only on
    several typed entries without a total, where summing counts every GPU. A non-empty TRES
    string without GPUs means 0; an empty one means unknown.
    """
    untyped = col.str.extract(r"(?:^|,)gres/gpu=(\d+)(?:,|$)", 1).cast(pl.Int64, strict=False)
    typed = (
        col.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=\d+")
        .list.eval(pl.element().str.extract(r"=(\d+)$", 1).cast(pl.Int64, strict=False))
        .list.sum()
    )
    has_typed = col.str.contains("gres/gpu:", literal=True)
    known = null_if_blank(col).is_not_null()
    return (
        pl.when(untyped.is_not_null()).then(untyped)
        .when(has_typed).then(typed)
        .when(known).then(pl.lit(0, pl.Int64))
        .otherwise(None)
    )


def tres_gpu_type(col: pl.Expr) -> pl.Expr:
    """GPU model(s) named in typed TRES entries (`gres/gpu:a100=2` -> `a100`), sorted, comma-joined."""
    types = col.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=").list.eval(
        pl.element().str.extract(r"gres/gpu:([^=,]+)=", 1)
    )
    joined = types.list.unique().list.sort().list.join(",")
    return pl.when(joined == "").then(None).otherwise(joined)


_GRES_GPU = r"(?:^|,)(?:gres/)?gpu(?::(?P<t>[^:,(=]+))?[:=](?P<n>\d+)"


def gres_gpus(col: pl.Expr) -> pl.Expr:
    """GPUs in an old-style GRES string (`gpu:2`, `gpu:V100:2(IDX:0-1)`, `hbm:0,gpu:4`): summed."""
    counts = col.str.extract_all(_GRES_GPU).list.eval(
        pl.element().str.extract(r"[:=](\d+)$", 1).cast(pl.Int64, strict=False)
    )
    known = null_if_blank(col).is_not_null()
    return pl.when(known).then(counts.list.sum()).otherwise(None)


def gres_gpu_type(col: pl.Expr) -> pl.Expr:
    """GPU model(s) in an old-style GRES string (`gpu:V100:2` -> `V100`)."""
    types = col.str.extract_all(_GRES_GPU).list.eval(
        pl.element().str.extract(r"gpu:([^:,(=]+):\d+$", 1)
    ).list.drop_nulls()
    joined = types.list.unique().list.sort().list.join(",")
    return pl.when(joined == "").then(None).otherwise(joined)


def state_word(col: pl.Expr) -> pl.Expr:
    """`CANCELLED by 123` -> `CANCELLED`; upper-cased first word, trailing `+` (truncation) dropped."""
    return col.str.strip_chars().str.extract(r"^([A-Za-z_]+)", 1).str.to_uppercase()


def normalize_state(col: pl.Expr) -> pl.Expr:
    """Map a sacct state to canonical.SLURM_STATES; an unrecognised word -> `UNKNOWN`; blank -> null."""
    word = state_word(col)
    mapped = word.replace_strict(STATE_ALIASES, default="UNKNOWN", return_dtype=pl.Utf8)
    return pl.when(word.is_null()).then(None).otherwise(mapped)


def state_is_known(col: pl.Expr) -> pl.Expr:
    """True where the state word is one Slurm defines (or an alias of one)."""
    return state_word(col).is_in(list(STATE_ALIASES))


def parse_job_id(col: pl.Expr) -> pl.Expr:
    """Job id -> struct(base, task, spec, het, step); all null when the id is malformed."""
    return col.str.strip_chars().str.extract_groups(JOB_ID_PATTERN)


def expand_array_specs(specs: pl.DataFrame, key: str = "line_no", spec: str = "spec") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Expand pending array ranges (`1-3,7`, `1-9:2`) into one row per task.

    Returns (tasks: key + `task` Int64, bad: key + `reason`). A range that runs backwards, has a
    zero step, an index above Slurm's maximum or more tasks than Slurm allows is bad; nothing of
    a bad spec is expanded, so garbage cannot blow up memory.
    """
    parts = (
        specs.select(pl.col(key), pl.col(spec).str.split(",").alias("part"))
        .explode("part")
        .with_columns(pl.col("part").str.extract_groups(r"^(?P<lo>\d+)(?:-(?P<hi>\d+)(?::(?P<st>\d+))?)?$").alias("g"))
        .select(
            pl.col(key),
            pl.col("g").struct.field("lo").cast(pl.Int64, strict=False).alias("lo"),
            pl.col("g").struct.field("hi").cast(pl.Int64, strict=False).alias("hi"),
            pl.col("g").struct.field("st").cast(pl.Int64, strict=False).alias("st"),
            pl.col("g").struct.field("lo").is_null().alias("malformed"),
        )
        .with_columns(pl.col("hi").fill_null(pl.col("lo")), pl.col("st").fill_null(1))
    )
    parts = parts.with_columns(
        (
            pl.col("malformed") | (pl.col("hi") < pl.col("lo")) | (pl.col("st") < 1) | (pl.col("hi") > MAX_ARRAY_INDEX)
        ).alias("bad"),
        ((pl.col("hi") - pl.col("lo")) // pl.col("st").clip(lower_bound=1) + 1).alias("n"),
    )
    per_key = parts.group_by(key).agg(pl.col("bad").any(), pl.col("n").sum())
    bad_keys = per_key.filter(pl.col("bad") | (pl.col("n") > MAX_ARRAY_TASKS)).select(key)
    bad = bad_keys.join(specs.select(key, spec), on=key, how="left").select(
        pl.col(key), pl.format("bad array index range '[{}]'", pl.col(spec).str.slice(0, 60)).alias("reason")
    )
    good = parts.join(bad_keys, on=key, how="anti")
    tasks = (
        good.select(pl.col(key), pl.int_ranges(pl.col("lo"), pl.col("hi") + 1, pl.col("st")).alias("task"))
        .explode("task")
        .unique(subset=[key, "task"], maintain_order=True)
        .with_columns(pl.col("task").cast(pl.Int64))
    )
    return tasks, bad


def expand_array_spec(spec: str) -> list[int] | None:
    """Python twin of expand_array_specs for one spec (used by the JSON parser); None if bad."""
    tasks, bad = expand_array_specs(pl.DataFrame({"line_no": [0], "spec": [spec]}))
    if bad.height:
        return None
    return tasks["task"].to_list()
