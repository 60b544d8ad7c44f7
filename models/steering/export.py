"""A decision in the scheduler's own configuration (SPEC §12): pure text, no I/O.

What a config file can and cannot say. Slurm's multifactor priority is a weighted sum of factors
(age, fair-share, job size, partition, QOS, association, TRES) plus the admin site factor; none of
them is a requested time, an area or the F1/WFP3/UNICEF formulas, so those orderings are applied
by `metapilot steer` through the site factor, never by config. And a file can never replace the
site's own weights: the fragment writes only the weights the rule needs (age for oldest-first,
job size for small/large first) and leaves fair-share, QOS, partition and association alone.
Slurm's backfill reserves for every job it tests (up to `bf_max_job_test`, within `bf_window`,
every `bf_interval`): neither textbook EASY nor conservative, so a backfilling rule maps
approximately. A `SchedulerType` change needs a slurmctld restart, so switching objectives is the
loop's job (`steer`), not a config's.

PBS Pro sorts by `job_sort_formula` (highest value first) over job resources (`walltime`,
`ncpus`) and `eligible_time`, with `strict_ordering` in `sched_config` and the server's
`backfill_depth` (PBS Professional Administrator's Guide: "Using a Formula for Computing Job
Execution Priority", "Using Strict Ordering", "Using Backfilling"; check each term on your version).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from metapilot.models.simulator.slurm.conf import setting_lines, slurm_conf_settings

SCHEDULERS = ("slurm", "pbspro")
BF_WINDOW_MAX_MIN = 43200  # Slurm's largest bf_window (30 days)


@dataclass(frozen=True)
class ExportFile:
    """One file to write: its name, its text, and whether the mapping is exact."""

    name: str
    text: str
    exact: bool


@dataclass(frozen=True)
class SiteFacts:
    """What the warehouse says about the cluster (None: no jobs with the figure)."""

    cluster: str
    longest_timelimit_s: int | None = None
    longest_wait_s: int | None = None


# rule -> (exact?, what Slurm's config can say of it, why)
SLURM_ORDER: dict[str, tuple[str, str]] = {
    "FCFS": ("age", "oldest first is the age factor, but the site's fair-share, QOS, partition and association "
                    "weights stay: exact only where age dominates them; `steer --policy FCFS+...` applies it exactly"),
    "SJF": ("none", "shortest requested time first is no multifactor factor: applied by `steer` (site factor)"),
    "SAF": ("jobsize-small", "smallest area first: the job-size factor sees cores, not time; `steer` applies the area"),
    "LAF": ("jobsize-large", "largest area first: the job-size factor sees cores, not time; `steer` applies the area"),
    "F1": ("none", "the F1 formula (log of requested time x cores + submit time) is no multifactor factor: "
                   "applied by `steer`"),
    "WFP3": ("age", "tail first: (wait / requested time)^3 x cores; the age factor gives the wait only: `steer` "
                    "applies the formula"),
    "UNICEF": ("age", "tail first: wait / (log2(cores) x requested time); the age factor gives the wait only: "
                      "`steer` applies the formula"),
}

BACKFILL_SLURM: dict[str, tuple[str, bool, str]] = {
    "none": ("sched/builtin", True, "sched/builtin starts jobs strictly in priority order and never backfills"),
    "easy": ("sched/backfill", False, "Slurm's backfill reserves for every job it tests (up to bf_max_job_test, "
                                      "within bf_window, every bf_interval), not only the head of the queue: "
                                      "closer to conservative than to EASY"),
    "conservative": ("sched/backfill", False, "Slurm's backfill reserves for the jobs it tests, up to "
                                              "bf_max_job_test within bf_window, every bf_interval: conservative "
                                              "only when every pending job is tested (bf_max_job_test at least "
                                              "the queue length) and bf_window covers the longest time limit"),
}


class ExportNameError(ValueError):
    """A name that cannot go into a scheduler's configuration: the message says which and why."""


# what a reader of the file could take for the end of a line: C0/C1 controls (\n, \r, \x0b, \x0c,
# \x1c-\x1e, \x85), the Unicode line and paragraph separators, and invisible format characters
_BREAKING = ("Cc", "Cf", "Zl", "Zp", "Cs")


def one_line(text: object) -> str:
    """Free text (a decision's message, a cluster or policy name) for a comment line: every control,
    separator or format character written as a visible escape, so nothing it holds can end the
    comment and start a live configuration line."""
    out = []
    for ch in str(text):
        if unicodedata.category(ch) in _BREAKING:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def check_cluster_name(name: str) -> str:
    """A cluster name fit to be written into a fragment and a folder name: printable, one line, at
    most 128 characters (a newline in it would have become a live slurm.conf line)."""
    if not name or len(name) > 128 or one_line(name) != name or name != name.strip():
        raise ExportNameError(f"the cluster name {name!r} cannot be written into a configuration file: use 1 to 128 "
                              "printable characters, no newline or control character, no leading or trailing space")
    return name


def _minutes(seconds: int | None) -> int | None:
    return None if seconds is None else max(1, -(-int(seconds) // 60))


def _days_hours(seconds: int) -> str:
    d, rest = divmod(int(seconds), 86400)
    return f"{d}-{rest // 3600:02d}"


def merge_scheduler_parameters(site_line: str | None, ours: dict[str, str]) -> str:
    """The site's SchedulerParameters with ours set (one line in slurm.conf: a second would replace
    the first, so ours are merged in, never written alone over the site's)."""
    items: list[tuple[str, str | None]] = []
    for part in (site_line or "").split(","):
        part = part.strip()
        if part:
            k, sep, v = part.partition("=")
            items.append((k.strip(), v.strip() if sep else None))
    keys = [k for k, _ in items]
    for k, v in ours.items():
        if k in keys:
            items[keys.index(k)] = (k, v)
        else:
            items.append((k, v))
    return ",".join(k if v is None else f"{k}={v}" for k, v in items)


GUARD_AGE_WEIGHT = 1_000_000  # the age factor under a tail guard: above any rule's own weight once saturated
GUARD_PBS_WEIGHT = 1e9  # eligible_time / guard in the PBS formula: past the guard it outweighs the rule's terms


def slurm_fragment(rule: str, backfill: str, facts: SiteFacts, *, decision: str, site_conf: str | None = None,
                   age_weight: int = 10000, size_weight: int = 1000, guard_h: float | None = None) -> ExportFile:
    """The Slurm fragment (to `Include` at the end of slurm.conf) for a fixed rule, with the walk
    forward's tail guard (`guard_h`) said as Slurm can: an age factor that saturates at the guard."""
    kind, why_order = SLURM_ORDER[rule]
    sched, bf_exact, why_bf = BACKFILL_SLURM[backfill]
    lines = [f"# MetaPilot: {one_line(decision)}", f"# cluster {one_line(facts.cluster)}; rule {rule}+{backfill.upper()}",
             "# Include this at the END of slurm.conf (`Include /etc/slurm/metapilot.conf`): a later line of the",
             "# same name replaces an earlier one. It sets only what the rule needs; the site's fair-share, QOS,",
             "# partition and association weights are left as they are (never zeroed).",
             "# SchedulerType takes effect only after a slurmctld restart: switch objectives with `metapilot steer`."]
    order_exact = False
    body = [f"SchedulerType={sched}", "PriorityType=priority/multifactor"]
    if kind == "age":
        body.append(f"PriorityWeightAge={int(age_weight)}")
        if facts.longest_wait_s:
            body.append(f"PriorityMaxAge={_days_hours(max(facts.longest_wait_s, 86400))}")
    elif kind.startswith("jobsize"):
        body.append(f"PriorityWeightJobSize={int(size_weight)}")
        body.append(f"PriorityFavorSmall={'YES' if kind == 'jobsize-small' else 'NO'}")
    notes = [f"# order: {why_order}", f"# backfilling: {why_bf}"]
    if guard_h and kind != "age":  # under FCFS the guard changes nothing: it is oldest first already
        body += [f"PriorityWeightAge={GUARD_AGE_WEIGHT}", f"PriorityMaxAge={_days_hours(int(guard_h * 3600))}"]
        notes.append(f"# tail guard ({guard_h:g} h: oldest first once a job has waited that long): APPROXIMATE. Slurm "
                     "cannot switch order on a job's wait; a heavy age factor that saturates at the guard "
                     "(PriorityMaxAge) weighs a job's age up to it and ranks a job past it above the rule's order, "
                     "but also blends age into the rule's order before it. `metapilot steer` applies it exactly")
    if sched == "sched/backfill":
        ours: dict[str, str] = {}
        window = _minutes(facts.longest_timelimit_s)
        if window is None:
            notes.append("# bf_window: no time limits in the warehouse for this cluster; set bf_window (minutes) to at "
                         "least your longest time limit, or backfill cannot see the end of the longest jobs")
        elif window > BF_WINDOW_MAX_MIN:
            ours["bf_window"] = str(BF_WINDOW_MAX_MIN)
            notes.append(f"# bf_window: the longest time limit is {window} min, beyond Slurm's largest bf_window "
                         f"({BF_WINDOW_MAX_MIN}): backfill cannot see when such jobs end, and may start a job that "
                         "delays a reserved one")
        else:
            ours["bf_window"] = str(window)
            notes.append(f"# bf_window={window}: the longest time limit in the warehouse ({window} min), so backfill "
                         "sees the end of every running job")
        if backfill == "conservative":
            ours["bf_max_job_test"] = "10000"
        if ours:
            site_line = None if site_conf is None else slurm_conf_settings(
                setting_lines(site_conf.splitlines())).get("schedulerparameters")
            merged = merge_scheduler_parameters(site_line, ours)
            if one_line(merged) != merged:
                raise ExportNameError("the site's SchedulerParameters line holds a control character: fix slurm.conf "
                                      "(or export without --site-conf)")
            if site_conf is None:
                notes.append("# SchedulerParameters is one line: merge these options into your own line (or export "
                             "with --site-conf /etc/slurm/slurm.conf to get the merged line written here)")
                body.append(f"#SchedulerParameters=<yours>,{merged}")
            else:
                body.append(f"SchedulerParameters={merged}")
    exact = order_exact and bf_exact and not (guard_h and kind != "age")
    verdict = ("# mapping: EXACT" if exact else
               "# mapping: APPROXIMATE (why: below); `metapilot steer` applies the order exactly, through the site factor")
    return ExportFile(f"metapilot-{rule}+{backfill}.slurm.conf", "\n".join(lines + [verdict] + notes + body) + "\n", exact)


# rule -> (formula or None, exact?, why)
PBS_FORMULA: dict[str, tuple[str | None, bool, str]] = {
    "FCFS": ("eligible_time", True, "oldest first: the time a job has been eligible to run (its submit order while "
                                    "no hold or limit stopped its clock)"),
    "SJF": ("-walltime", True, "shortest requested walltime first"),
    "SAF": ("-(walltime * ncpus)", True, "smallest area (requested walltime x cores) first"),
    "LAF": ("walltime * ncpus", True, "largest area first"),
    "WFP3": ("(eligible_time / walltime) ** 3 * ncpus", True,
             "tail first: (wait / requested time)^3 x cores, the wait read as eligible_time"),
    "UNICEF": ("eligible_time / (walltime * ncpus ** 0.5)", False,
               "UNICEF divides by log2(cores); the formula has no logarithm, so cores^0.5 stands in (the same order "
               "for jobs of equal size, not across sizes)"),
    "F1": (None, False, "F1 needs each job's submit time since a window start, which no formula term gives; "
                        "SAF (smallest area first) is the closest rule it can say"),
}

BACKFILL_PBS: dict[str, tuple[str, bool, str]] = {
    "none": ("0", True, "strict ordering with backfill_depth 0: the top job waits and nothing starts around it"),
    "easy": ("1", True, "strict ordering with backfill_depth 1: the top job gets a reservation, the rest backfill "
                        "around it (EASY)"),
    "conservative": ("1000", False, "strict ordering with backfill_depth 1000: a reservation for each of the first "
                                    "1000 jobs, conservative up to that depth"),
}


def pbspro_fragment(rule: str, backfill: str, facts: SiteFacts, *, decision: str,
                    guard_h: float | None = None) -> ExportFile:
    """qmgr commands and the sched_config lines for a fixed rule on PBS Pro, with the walk forward's
    tail guard (`guard_h`) as an eligible_time term of the sort formula."""
    formula, f_exact, why = PBS_FORMULA[rule]
    depth, b_exact, why_bf = BACKFILL_PBS[backfill]
    if formula is None:
        formula, why = PBS_FORMULA["SAF"][0], f"NOT EXPRESSIBLE: {why}; written: SAF's formula"
    guarded = bool(guard_h) and rule != "FCFS"
    if guarded:
        formula = f"({formula}) + {GUARD_PBS_WEIGHT:g} * (eligible_time / {int(guard_h * 3600)}) ** 8"
        why += (f"; tail guard {guard_h:g} h (oldest first once a job has waited that long): APPROXIMATE, a steep "
                "eligible_time term that outweighs the rule's terms once a job nears the guard (a formula cannot "
                "switch order at an instant); `metapilot steer` applies it exactly on Slurm")
    exact = f_exact and b_exact and not guarded
    text = "\n".join([
        f"# MetaPilot: {one_line(decision)}", f"# cluster {one_line(facts.cluster)}; rule {rule}+{backfill.upper()}",
        "# mapping: " + ("EXACT" if exact else "APPROXIMATE (why: below)"),
        f"# order: {why}", f"# backfilling: {why_bf}",
        "# Terms: walltime (requested, s), ncpus, eligible_time (s); operators + - * / **. Check each against the PBS",
        "# Professional Administrator's Guide of your version. Only the sort formula and backfill depth change;",
        "# fair share, queue and job priorities keep their own settings (job_sort_formula replaces the",
        "# scheduler's sort order: keep fair-share terms by adding them to the formula).",
        "#",
        "# 1. as root, qmgr:",
        f'qmgr -c "set server job_sort_formula = \'{formula}\'"',
        f'qmgr -c "set server backfill_depth = {depth}"',
        "# 2. in $PBS_HOME/sched_priv/sched_config (then HUP the scheduler):",
        "#    strict_ordering: True ALL",
    ]) + "\n"
    return ExportFile(f"metapilot-{rule}+{backfill}.pbspro.txt", text, exact)


def controller_note(scheduler: str, policy_id: str, menu: list[str]) -> str:
    """A learned controller switches objectives every epoch: no config file can follow it."""
    return (f"# MetaPilot: the published controller {one_line(policy_id)} (objectives {one_line(', '.join(menu))}) "
            "switches objective "
            f"every epoch; {scheduler} configuration cannot follow it. Run `metapilot steer --policy published` "
            "(Slurm) after `metapilot approve`; the files below set only the backfilling its objectives share.\n")
