"""Checks of command-line options made before any work starts (issue 37): a bad value is refused
naming the option and what it accepts, not found out after a replay, nor answered "no jobs"."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path



class OptionError(ValueError):
    """A command-line option's value that cannot work: the message names the option and what it accepts."""

    def __init__(self, message: str, param_hint: str) -> None:
        super().__init__(f"{param_hint}: {message}")


def time_option(value: str | None, option: str) -> datetime | None:
    """An ISO date or date-time option (naive means UTC), refused with the option's name."""
    from metapilot.transforms.windows import parse_utc

    try:
        return parse_utc(value)
    except ValueError:
        raise OptionError(f"{value!r} is not a date or date-time: give an ISO one such as 2024-05-01 or "
                                 "2024-05-01T10:00", param_hint=option) from None


def window_options(start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    """`--from`/`--to` as times, refused when the window is empty (`--to` not after `--from`)."""
    w_from, w_to = time_option(start, "--from"), time_option(end, "--to")
    if w_from is not None and w_to is not None and w_to <= w_from:
        raise OptionError(f"--to {end} is not after --from {start}: the window would be empty "
                                 "(--to is the end, exclusive)", param_hint="--to")
    return w_from, w_to


OUT_SUFFIXES = (".parquet", ".csv")


def out_file_option(path: str | None, option: str) -> str | None:
    """An output file whose suffix says its format (.parquet or .csv), refused otherwise rather than
    writing one format under the other's name."""
    if path is None:
        return None
    if Path(path).suffix.lower() not in OUT_SUFFIXES:
        raise OptionError(f"{path}: name a .parquet or .csv file (the suffix chooses the format)", param_hint=option)
    if not Path(path).resolve().parent.is_dir():
        raise OptionError(f"{path}: the folder {Path(path).resolve().parent} does not exist", param_hint=option)
    return path


def timezone_option(tz: str) -> str:
    """A time zone name the logs' local times can be read in (IANA, e.g. Europe/Stockholm)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if tz in ("UTC", "Z"):
        return tz
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise OptionError(f"{tz!r} is not a time zone: give an IANA name such as Europe/Stockholm or "
                                 "America/New_York (the zone sacct or PBS printed local times in)", param_hint="--timezone") from None
    return tz


QOS_PRIORITY_HELP = ("The site's QOS priorities, which slurmdbd keeps (slurm.conf cannot give them): a file of "
                     "`sacctmgr -nP show qos format=name,priority` output, or name=priority,... (e.g. normal=0,high=100).")


SHARES_HELP = ("The site's association tree with each account's and user's fair-share shares, which slurmdbd keeps "
               "(slurm.conf cannot give them): a file of `sshare -a -l -P` output (or `sacctmgr -P show assoc "
               "format=account,user,fairshare`). Without it every association has 1 share, sacctmgr's default.")


def shares_option(value: str | None) -> str | None:
    """`--shares` checked: a readable file of the association tree (`parse_shares`), as an absolute path."""
    if value is None:
        return None
    from pathlib import Path

    from metapilot.models.simulator.slurm.conf import read_shares

    path = Path(value)
    if not path.is_file():
        raise OptionError(f"no file at {value}: save the tree with `sshare -a -l -P > shares.txt`", param_hint="--shares")
    try:
        read_shares(path)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise OptionError(f"{value}: {e}", param_hint="--shares") from None
    return str(path.resolve())


COMPLETE_S_HELP = ("Seconds from a job's end to its cores going to the next job on the site's Slurm: the completing "
                   "time (epilog) and the controller's latency to its next pass (default 0; an idle slurmctld 22.05 "
                   "takes 0.3-0.5 s; slurm.conf does not say it).")


def complete_s_option(value: float | None) -> float | None:
    """`--complete-s` checked: a finite number of seconds, 0 or more."""
    import math

    if value is not None and not (math.isfinite(value) and value >= 0):
        raise OptionError(f"--complete-s takes seconds, 0 or more, got {value:g}", param_hint="--complete-s")
    return value


def qos_priority_option(value: str | None) -> dict[str, int] | None:
    """`--qos-priority` read (a file or name=priority,...), refused with what it accepts."""
    if value is None:
        return None
    from metapilot.models.simulator.slurm.conf import read_qos_priorities

    try:
        return dict(read_qos_priorities(value))
    except (ValueError, OSError) as e:
        raise OptionError(str(e), param_hint="--qos-priority") from None
