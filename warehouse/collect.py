"""Pull Slurm accounting straight from `sacct`, incrementally, into the normal ingest path.

`metapilot collect --cluster C` (and the hourly deployment) runs sacct the way Open XDMoD's
`xdmod-slurm-helper` does: `--allusers --parsable2 --noheader --allocations --duplicates
--clusters C --format <the 26 fields> --starttime S --endtime E`, with `TZ=UTC` so that the times
it prints and reads are UTC. Its output is streamed to a gzip file beside the warehouse
(`collect/<cluster>/`) and that file is ingested like any other log: quarantine, line
reconciliation, keyed name hashes, the site-key check, one transaction per file.

The cursor (where the next run asks from) is derived from the data, not stored: the latest end
time loaded for the cluster, moved back to the earliest start (or submit) of its jobs not ended
yet (running, pending, suspended: their records will change). So a second run asks sacct only
from there; jobs seen again replace their earlier records (same key: cluster, job id, submit
time) and identical output is recognised by its hash; a clock that is late or replayed cannot
move the cursor, and a window that does not open after the cursor asks sacct for nothing.
Without data (or with `--since`) the start is the given time, else 1970-01-02 (XDMoD's choice:
sacct with epoch 0 and TZ=UTC returns nothing).

A job's record can reach sacct's time-window query after the window that should have held it
(slurmdbd writes it late): so a window from the cursor opens a safety margin before it (`--overlap`,
$METAPILOT_COLLECT_OVERLAP, one hour by default; issue 54). The jobs seen again merge
idempotently (same key), so the overlap costs a longer sacct query, never a duplicate.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from metapilot.transforms.sacct import XDMOD_FIELDS

from metapilot.ground.files import safe_name
from metapilot.ground.paths import beside_db, db_path, sql_text

SACCT_FLAGS: tuple[str, ...] = ("--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates")
SACCT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
EARLIEST = datetime(1970, 1, 2, tzinfo=timezone.utc)
STDERR_SHOWN = 2000  # characters of sacct's error output in a message
DEFAULT_OVERLAP = timedelta(hours=1)  # a window from the cursor starts this much before it
OVERLAP_ENV = "METAPILOT_COLLECT_OVERLAP"
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class SacctError(RuntimeError):
    """sacct could not be run or failed; nothing was loaded. The message says what sacct said."""


@dataclass
class CollectWindow:
    """What one collect asks sacct for."""

    cluster: str
    start: datetime
    end: datetime
    cursor: datetime | None  # derived from the data (None: no data for the cluster yet)
    since_given: bool
    overlap: timedelta = timedelta(0)  # how far before the cursor the window opens

    @property
    def empty(self) -> bool:
        return self.end <= self.start


def parse_time(text: str) -> datetime:
    """A time the user gives (--since/--until): ISO date or date-time, UTC unless it says."""
    t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def parse_overlap(text: str) -> timedelta:
    """A safety margin such as 90m, 2h, 1d or 3600 (seconds); ValueError says what is expected."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text or "")
    if not m:
        raise ValueError(f"an overlap is a duration such as 30m, 2h or 1d (0: none), got {text!r}")
    return timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2) or "s"])


def collect_overlap(given: str | timedelta | None = None) -> timedelta:
    """The overlap to use: the one given, else $METAPILOT_COLLECT_OVERLAP, else DEFAULT_OVERLAP."""
    if isinstance(given, timedelta):
        return given
    text = given if given is not None else os.environ.get(OVERLAP_ENV)
    return DEFAULT_OVERLAP if text is None or not text.strip() else parse_overlap(text)


def sacct_time(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime(SACCT_TIME_FORMAT)


CURSOR_VIEW = "ddl/050_collect_cursor.sql"


def collect_cursor(con, cluster: str) -> datetime | None:
    """The cluster's cursor from the data (the `collect_cursor` view; see the module docstring);
    None without data. A warehouse opened read-only before the view existed gets its query."""
    has_view = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'collect_cursor'").fetchall()[0][0]
    if has_view:
        rows = con.execute("SELECT cursor FROM main.collect_cursor WHERE cluster = ?", [cluster]).fetchall()
    else:
        view = sql_text(CURSOR_VIEW)
        select = view[view.index("SELECT"):].rstrip().rstrip(";")
        rows = con.execute(f"SELECT cursor FROM ({select}) WHERE cluster = ?", [cluster]).fetchall()
    cur = rows[0][0] if rows else None
    if cur is None:
        return None
    return cur.astimezone(timezone.utc) if cur.tzinfo else cur.replace(tzinfo=timezone.utc)


def plan_window(db: str | Path | None, cluster: str, since: datetime | None = None,
                until: datetime | None = None, now: datetime | None = None,
                overlap: timedelta | None = None) -> CollectWindow:
    """The window to ask sacct for: [since, or the cursor less `overlap` (`collect_overlap`), or
    1970-01-02; until, or now)."""
    cursor = None
    if db_path(db).exists():
        from metapilot.warehouse.db import connect

        con = connect(db, read_only=True)
        try:
            cursor = collect_cursor(con, cluster)
        finally:
            con.close()
    end = (until or now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(microsecond=0)
    margin = collect_overlap(overlap) if since is None and cursor is not None else timedelta(0)
    start = since or (max(cursor - margin, EARLIEST) if cursor is not None else EARLIEST)
    return CollectWindow(cluster, start.astimezone(timezone.utc).replace(microsecond=0), end, cursor, since is not None,
                         margin)


def sacct_args(sacct: str, cluster: str, start: datetime, end: datetime) -> list[str]:
    """The sacct command line (Open XDMoD's helper's flags and its 26 fields)."""
    return [sacct, *SACCT_FLAGS, "--clusters", cluster, "--format", ",".join(XDMOD_FIELDS),
            "--starttime", sacct_time(start), "--endtime", sacct_time(end)]


def find_sacct(sacct: str | None = None) -> str:
    """The sacct executable: the one given, else the first `sacct` on PATH."""
    if sacct:
        p = Path(sacct)
        if not p.exists():
            raise SacctError(f"sacct not found at {sacct}: check --sacct; nothing was collected")
        if not os.access(p, os.X_OK):
            raise SacctError(f"{sacct} is not executable: check --sacct; nothing was collected")
        return str(p)
    found = shutil.which("sacct")
    if not found:
        raise SacctError("sacct is not on PATH: run collect where Slurm's client tools are installed, or pass "
                         "--sacct /path/to/sacct; nothing was collected")
    return found


def collected_path(db: str | Path | None, window: CollectWindow) -> Path:
    """Where a collect's output is kept: `collect/<cluster>/sacct-<cluster>-<start>-<end>.log.gz`."""
    safe = safe_name(window.cluster)
    stamp = f"{window.start.strftime('%Y%m%dT%H%M%SZ')}-{window.end.strftime('%Y%m%dT%H%M%SZ')}"
    return beside_db(db, "collect") / safe / f"sacct-{safe}-{stamp}.log.gz"


def run_sacct(args: list[str], out: Path, timeout_s: float | None = None) -> tuple[int, str]:
    """Run sacct, streaming its output to the gzip file `out` (written whole or not at all).

    Returns (lines, stderr text). Raises SacctError when sacct cannot start, exits non-zero,
    or is killed: the partial output is removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    part = out.with_name(out.name + ".part")
    lines = 0
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, env=env)
        except OSError as e:
            raise SacctError(f"could not run {args[0]}: {e.strerror or e}; nothing was collected") from None
        try:
            with open(part, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                assert proc.stdout is not None
                for block in iter(lambda: proc.stdout.read(1 << 20), b""):
                    gz.write(block)
                    lines += block.count(b"\n")
            rc = proc.wait(timeout=timeout_s)
        except BaseException:
            proc.kill()
            proc.wait()
            part.unlink(missing_ok=True)
            raise
        err.seek(0)
        stderr = err.read().decode("utf-8", errors="replace").strip()
    if rc != 0:
        part.unlink(missing_ok=True)
        said = stderr[:STDERR_SHOWN] or "(nothing on stderr)"
        what = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        raise SacctError(f"sacct {what}: {said}; nothing was loaded, the warehouse is as it was")
    os.replace(part, out)
    return lines, stderr


def window_after(window: CollectWindow, lines: int) -> str:
    """One line for people: what was asked and what came back."""
    whence = "--since" if window.since_given else f"cursor less {_said(window.overlap)}" if window.cursor else "no data yet"
    return f"{window.cluster}: sacct {sacct_time(window.start)} .. {sacct_time(window.end)} UTC ({whence}): {lines:,} lines"


def _said(overlap: timedelta) -> str:
    s = int(overlap.total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s and s % n == 0:
            return f"{s // n}{unit} overlap"
    return f"{s}s overlap"


__all__ = [
    "EARLIEST",
    "DEFAULT_OVERLAP",
    "CollectWindow",
    "SacctError",
    "collect_cursor",
    "collect_overlap",
    "parse_overlap",
    "collected_path",
    "find_sacct",
    "parse_time",
    "plan_window",
    "run_sacct",
    "sacct_args",
]


def exclude_job_names(given: list[str] | None = None) -> list[str]:
    """Job-name prefixes collect leaves out (`--exclude-job-name`, else the comma-separated
    $METAPILOT_COLLECT_EXCLUDE_JOB_NAMES; none by default): e.g. `metapilot-dask`, MetaPilot's own
    Dask workers (issue 52), which are the site's work too but not its users' demand."""
    if given:
        return [p for p in given if p]
    return [p.strip() for p in os.environ.get("METAPILOT_COLLECT_EXCLUDE_JOB_NAMES", "").split(",") if p.strip()]


def drop_job_names(path: Path, prefixes: list[str]) -> int:
    """Remove from the collected gzip file every line whose job name (the last field) starts with
    one of `prefixes`, before it is ingested; returns how many lines were removed."""
    if not prefixes:
        return 0
    keep = tuple(p.encode() for p in prefixes)
    cut = len(XDMOD_FIELDS) - 1  # jobname is last: a name holding "|" stays whole
    part, dropped = path.with_name(path.name + ".part"), 0
    with gzip.open(path, "rb") as src, open(part, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
        for line in src:
            fields = line.rstrip(b"\r\n").split(b"|", cut)
            if len(fields) > cut and fields[cut].startswith(keep):
                dropped += 1
                continue
            dst.write(line)
    os.replace(part, path)
    return dropped
