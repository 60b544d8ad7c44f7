"""A site's slurm.conf as the replay needs it (issue 51): nodes, partitions, the scheduler's and the
multifactor plugin's parameters, each with Slurm 22.05's default where the file is silent.

Read from the file, as `slurmctld` reads it: `Key=Value` pairs, keys case-insensitive, `#` comments,
the last setting wins, `NodeName=`/`PartitionName=`/`NodeSet=` lines with their own pairs (a `DEFAULT`
line sets the defaults of the lines after it), host lists such as `cn[001-128,200]` or `r[1-4]n[01-36]`,
`Include` files. What the replay does not model (licences, a job's features, reservations, preemption,
QOS limits) is read past.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

INFINITE = float("inf")


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    mem_mib: float = INFINITE
    gpus: int = 0
    weight: int = 1  # slurm.conf's Weight: the lowest weight is allocated first


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]  # node names
    default: bool = False
    max_time_s: float = INFINITE
    default_time_s: float | None = None
    priority_tier: int = 1
    priority_job_factor: int = 1
    exclusive: bool = False  # OverSubscribe=EXCLUSIVE: a job gets whole nodes


@dataclass(frozen=True)
class SchedulerParams:
    """SchedulerParameters (slurm.conf(5)) with Slurm 22.05's defaults."""

    bf_interval: int = 30
    bf_max_job_test: int = 500
    bf_max_job_user: int = 0  # 0: no limit
    bf_resolution: int = 60
    bf_window_min: int = 1440
    default_queue_depth: int = 100
    sched_interval: int = 60
    # a submission is scheduled by slurmctld's background loop (once a second), at most this many seconds
    # after its last main pass; a completion calls the main scheduler at once (controller.c, proc_req.c)
    batch_sched_delay: int = 3
    sched_min_interval_us: int = 2
    backfill: bool = True  # SchedulerType=sched/backfill (False: sched/builtin)
    # seconds from a job's recorded end to its cores going to the next job: the completing time (epilog,
    # node health) and the controller's latency to the next pass (0.3-0.5 s on an idle slurmctld 22.05).
    # No slurm.conf parameter says it (CompleteWait holds every start while any job completes: not
    # this); a site measures it (`--complete-s`). Within seconds of it the order of short jobs can change.
    complete_s: float = 0.0


@dataclass(frozen=True)
class Shares:
    """The site's association tree as fair-share weighs it: each association's RawShares, which slurmdbd
    keeps, not slurm.conf (`sshare -a -l -P` prints them; `parse_shares`). `accounts`: (account, shares);
    `users`: (account, user, shares); `parents`: (account, its parent account) for the accounts below
    another (the others are root's children); `root_users`: the shares of root's own user associations
    (sacctmgr always makes root's user, with 1), `root` its (account, user) names, as the jobs name them. An
    association the tree does not name has 1 share, as sacctmgr's default Fairshare=1; one it names without
    jobs in the replay still counts among its siblings."""

    accounts: tuple[tuple[str, float], ...] = ()
    users: tuple[tuple[str, str, float], ...] = ()
    root_users: tuple[float, ...] = (1.0,)
    notes: tuple[str, ...] = ()
    root: tuple[str, str] = ("root", "root")
    parents: tuple[tuple[str, str], ...] = ()

    def names(self) -> list[str]:
        """Every account and user name the tree gives."""
        return sorted({a for a, _ in self.accounts} | {x for a, u, _ in self.users for x in (a, u)})

    def renamed(self, name: Callable[[str], str]) -> Shares:
        """The same tree with every account and user name through `name` (the warehouse's keyed hash:
        a site's tree names people as slurmdbd does, the warehouse by pseudonym)."""
        return replace(self, accounts=tuple((name(a), v) for a, v in self.accounts),
                       users=tuple((name(a), name(u), v) for a, u, v in self.users),
                       root=(name(self.root[0]), name(self.root[1])),
                       parents=tuple((name(a), name(p)) for a, p in self.parents))


@dataclass(frozen=True)
class PriorityParams:
    """priority/multifactor's settings; `multifactor` False means priority/basic (FIFO by submission)."""

    multifactor: bool = False
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_assoc: int = 0
    max_age_s: float = 7 * 86400.0
    favor_small: bool = False
    decay_half_life_s: float = 7 * 86400.0
    calc_period_s: float = 300.0
    fair_tree: bool = True  # Slurm's default since 19.05; PriorityFlags=NO_FAIR_TREE gives classic fair-share
    depth_oblivious: bool = False  # PriorityFlags=DEPTH_OBLIVIOUS (it implies NO_FAIR_TREE)
    fs_dampening: float = 1.0  # FairShareDampeningFactor (classic and depth-oblivious fair-share)
    # the epoch second of one recalculation: they fall every PriorityCalcPeriod from slurmctld's start
    # (`scontrol show config`: BOOT_TIME; restarts move them); 0: on the clock's multiples of the period
    calc_origin_s: float = 0.0
    # each QOS's Priority (name, value): slurmdbd's, not slurm.conf's (`sacctmgr show qos`; `parse_qos_priorities`)
    qos: tuple[tuple[str, int], ...] = ()
    shares: Shares = field(default_factory=Shares)


@dataclass(frozen=True)
class SlurmConf:
    cluster: str = "cluster"
    nodes: tuple[Node, ...] = ()
    partitions: tuple[Partition, ...] = ()
    sched: SchedulerParams = field(default_factory=SchedulerParams)
    priority: PriorityParams = field(default_factory=PriorityParams)
    notes: tuple[str, ...] = ()  # what was read past, in words

    @classmethod
    def single(cls, cpus: int, nodes: int = 1, **kw) -> SlurmConf:
        """A cluster of `nodes` identical nodes in one default partition (Slurm's defaults otherwise)."""
        names = tuple(f"n{i}" for i in range(nodes))
        return cls(nodes=tuple(Node(n, int(cpus)) for n in names),
                   partitions=(Partition("main", names, default=True),), **kw)

    @property
    def default_partition(self) -> Partition:
        for p in self.partitions:
            if p.default:
                return p
        return self.partitions[0]

    def with_sched(self, **kw) -> SlurmConf:
        return replace(self, sched=replace(self.sched, **kw))

    def with_priority(self, **kw) -> SlurmConf:
        return replace(self, priority=replace(self.priority, **kw))

    def with_qos(self, qos: Mapping[str, int] | tuple[tuple[str, int], ...]) -> SlurmConf:
        """The conf with the site's QOS priorities (name -> priority; `parse_qos_priorities`)."""
        return self.with_priority(qos=tuple(sorted(dict(qos).items())))

    def with_shares(self, shares: Shares) -> SlurmConf:
        """The conf with the site's association tree (`parse_shares`); its notes join the conf's."""
        return replace(self, priority=replace(self.priority, shares=shares), notes=self.notes + shares.notes)

    def qos_unweighed(self) -> str | None:
        """What the replay assumes where PriorityWeightQOS weighs and no QOS priorities were given, in
        words (None: nothing)."""
        pr = self.priority
        if not (pr.multifactor and pr.weight_qos > 0) or pr.qos:
            return None
        return (f"PriorityWeightQOS is {pr.weight_qos}, but QOS priorities live in slurmdbd, not slurm.conf: every "
                "job's QOS factor is 0; give them with --qos-priority (`sacctmgr -nP show qos format=name,priority`)")


# --- parsing ---------------------------------------------------------------------------------------------

_LAST_GROUP = re.compile(r"(.*)\[([^\[\]]*)\](.*)")  # greedy: the last bracket group
_ITEMS = re.compile(r"(?:[^,\[\s]|\[[^\]]*\])+")  # a host list's items: split by commas (or spaces) outside brackets


def _range_values(ranges: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7']: each range padded to the width of its first number. A range
    that is not `N` or `N-M` with N <= M is an error, as in hostlist.c (`Invalid range`)."""
    out: list[str] = []
    for r in ranges.split(","):
        a, dash, b = r.strip().partition("-")
        if not a.isdigit() or (dash and not (b.isdigit() and int(a) <= int(b))):
            raise ValueError(f"invalid range `{r.strip()}`")
        out.extend([a] if not dash else [f"{i:0{len(a)}d}" for i in range(int(a), int(b) + 1)])
    return out


def _expand_prefix(prefix: str, last: list[str], tail: str) -> list[str]:
    """The names of one host list item whose last bracket group gave `last`: the groups before it are
    walked as slurmctld's hostlist.c walks them (its `_push_range_list`), the one nearest the last group
    outermost and the last group innermost, so that nodes come in Slurm's own order."""
    m = _LAST_GROUP.fullmatch(prefix)
    if not m:
        return [f"{prefix}{v}{tail}" for v in last]
    head, ranges, between = m.groups()
    return [name for v in _range_values(ranges) for name in _expand_prefix(f"{head}{v}{between}", last, tail)]


def expand_hostlist(text: str) -> list[str]:
    """'cn[01-03,7],gpu1' -> ['cn01', 'cn02', 'cn03', 'cn7', 'gpu1'], and 'r[1-2]n[1-2]' -> ['r1n1', 'r1n2',
    'r2n1', 'r2n2'] (Slurm's host list syntax: items split by commas outside brackets, any number of
    bracket groups per name, zero padding kept; `scontrol show hostnames` gives the same names in the
    same order)."""
    out: list[str] = []
    if re.search(r"[\[\]]", re.sub(r"\[[^\[\]]*\]", "", text)):
        raise ValueError(f"invalid host list {text!r} in slurm.conf (a bracket not closed, or not opened): fix it")
    for item in _ITEMS.findall(text):
        try:
            m = _LAST_GROUP.fullmatch(item)
            if not m:
                out.append(item)
                continue
            head, ranges, tail = m.groups()
            out.extend(_expand_prefix(head, _range_values(ranges), tail))
        except ValueError as e:  # scontrol: "Invalid hostlist"; slurmctld does not start on such a line
            raise ValueError(f"invalid host list {item!r} in slurm.conf ({e}): `scontrol show hostnames '{item}'` "
                             "says the same; fix it") from None
    return out


def parse_time_s(text: str) -> float:
    """Slurm's time strings ('minutes', 'min:sec', 'h:m:s', 'd-h', 'd-h:m', 'd-h:m:s'; UNLIMITED / INFINITE)
    -> seconds."""
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE", "-1"):
        return INFINITE
    days = 0
    if "-" in t:
        d, t = t.split("-", 1)
        days = int(d)
        parts = [int(x) for x in t.split(":")]
        h, m, s = (parts + [0, 0])[:3]
        return days * 86400.0 + h * 3600 + m * 60 + s
    parts = [int(x) for x in t.split(":")]
    if len(parts) == 1:
        return parts[0] * 60.0
    if len(parts) == 2:
        return parts[0] * 60.0 + parts[1]
    return parts[0] * 3600.0 + parts[1] * 60 + parts[2]


def _pairs(line: str) -> list[tuple[str, str]]:
    """`Key=Value` pairs as slurmctld's parser takes them: a value is one word or a double-quoted string."""
    return [(k.lower(), q if v == "" else v) for k, q, v in re.findall(r'(\w+)\s*=\s*(?:"([^"]*)"|(\S+))', line)]


def setting_lines(raw: Iterable[str]) -> list[str]:
    """slurm.conf's text as slurmctld's parser reads it, one setting line each: comments dropped, and a
    line that ends in a backslash joined with the next (checked on slurmctld 22.05: a `PartitionName=`
    line continued so took the MaxTime of the next; a comment ending in one continues nothing)."""
    out: list[str] = []
    held = ""
    for line in raw:
        line = line.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            held += line[:-1]  # joined as it stands: `bf_interval=5,\` + `bf_window=60` is one value (scontrol)
            continue
        out.append((held + line).strip())
        held = ""
    if held.strip():
        out.append(held.strip())
    return out


def _lines(path: Path, seen: set[Path], home: Path, cluster: list[str]) -> list[str]:
    """The file's setting lines, `Include` files in place, as slurmctld reads them (slurm.conf(5), INCLUDE
    MODIFIERS): a relative name is looked for in slurm.conf's own folder (`home`), `%c` is the ClusterName
    given so far (`cluster`), and a file that is not there is an error, not a silent gap in the nodes."""
    path = path.resolve()
    if path in seen:
        return []
    seen.add(path)
    out = []
    for line in setting_lines(path.read_text(errors="replace").splitlines()):
        m = re.match(r"include\s+(\S+)", line, re.IGNORECASE)
        if m:
            name = m.group(1)
            if "%c" in name and not cluster:
                raise ValueError(f"Include {name}: %c is the cluster's name, and no ClusterName= comes before it")
            inc = Path(name.replace("%c", cluster[-1] if cluster else ""))
            inc = inc if inc.is_absolute() else home / inc
            if inc.is_dir():
                raise ValueError(f"Include {name}: {inc} is a folder: slurm.conf includes files, one a line")
            if not inc.is_file():
                raise ValueError(f"Include {name}: {inc} is not there; copy the files slurm.conf includes beside it "
                                 "(a relative name is read from slurm.conf's folder), as slurmctld would need them")
            out.extend(_lines(inc, seen, home, cluster))
            continue
        named = re.match(r"clustername\s*=\s*(\S+)", line, re.IGNORECASE)
        if named:
            cluster.append(named.group(1))
        if line:
            out.append(line)
    return out


def slurm_conf_lines(path: str | Path) -> list[str]:
    """A slurm.conf's setting lines as slurmctld reads them: comments dropped, `Include` files in place
    (a setting in an included file counts where the Include stands; the last one wins)."""
    return _lines(Path(path), set(), Path(path).resolve().parent, [])


TABLE_KEYS = ("nodename", "nodeset", "partitionname", "downnodes", "frontendname")  # lines of several pairs


def slurm_conf_settings(lines: list[str]) -> dict[str, str]:
    """The plain settings of slurm.conf's lines (`slurm_conf_lines`), keys lower-cased: everything but the
    node, node-set, partition (and down-node, front-end) lines; a later line of a name replaces an earlier
    one, as in slurmctld. A plain line holds one setting: slurmctld 22.05 refuses a second (checked:
    `Parse error in file ... line N`), so the read does too rather than take the rest as the first's value."""
    settings: dict[str, str] = {}
    for line in lines:
        pairs = _pairs(line) if line and not line.lower().startswith("include") else []
        if not pairs or pairs[0][0] in TABLE_KEYS:
            continue
        if len(pairs) > 1:
            raise ValueError(f"`{line}` holds {len(pairs)} settings; slurmctld reads one a line (\"Parse error in "
                             "file\"): put each on its own line")
        settings[pairs[0][0]] = line.split("=", 1)[1].strip()
    return settings


def read_slurm_conf(path: str | Path, qos: Mapping[str, int] | None = None) -> SlurmConf:
    """Read a slurm.conf (and the files it includes); `qos`: the site's QOS priorities, which slurmdbd
    keeps, not slurm.conf (`read_qos_priorities`)."""
    conf = parse_slurm_conf_lines(slurm_conf_lines(path))
    return conf.with_qos(qos) if qos else conf


def _number(spec: Mapping[str, str], key: str, default, line: str = "", kind: type = int):
    """A number of a slurm.conf line (`spec`: its lower-cased keys), or `default` where it is not given; a
    value that is not a number is an error naming it, as slurmctld refuses such a line."""
    text = spec.get(key)
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError:
        where = f" (in `{line}`)" if line else ""
        raise ValueError(f"{key}={text} is not a {'whole ' if kind is int else ''}number{where}: fix it "
                         "(slurmctld refuses such a line)") from None


def _time(spec: Mapping[str, str], key: str, default: float | None, line: str = "") -> float | None:
    """A time of a slurm.conf line (`parse_time_s`), or `default`; a malformed one is an error naming it."""
    if key not in spec:
        return default
    try:
        return parse_time_s(spec[key])
    except ValueError:
        where = f" (in `{line}`)" if line else ""
        raise ValueError(f"{key}={spec[key]} is not a Slurm time{where}: give minutes, min:sec, h:m:s, "
                         "d-h, d-h:m, d-h:m:s or UNLIMITED") from None


def _dampening(text: str) -> float:
    """FairShareDampeningFactor: a whole number from 1 (slurm.conf(5): 1 to 9999)."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if not 1 <= v <= 9999:
        raise ValueError(f"FairShareDampeningFactor={text}: slurm.conf(5) allows a whole number from 1 to 9999")
    return float(v)


def parse_slurm_conf(text: str) -> SlurmConf:
    """Parse a slurm.conf's text (`Include` lines are read past: use `read_slurm_conf` for those)."""
    return parse_slurm_conf_lines(setting_lines(text.splitlines()))


def _nodeset(spec: Mapping[str, str], nodes: Mapping[str, Node], features: Mapping[str, set[str]]) -> set[str]:
    """A NodeSet's nodes: those its Nodes= lists and those with its Feature= (the union where both are given)."""
    named = set(expand_hostlist(spec["nodes"])) if "nodes" in spec else set()
    feature = spec.get("feature", spec.get("features"))
    return named | ({n for n in nodes if feature in features.get(n, set())} if feature else set())


def _partition_nodes(text: str, all_nodes: tuple[str, ...], sets: Mapping[str, set[str]]) -> tuple[tuple[str, ...],
                                                                                                       list[str]]:
    """A partition's Nodes= (host lists, NodeSet names, ALL) as the defined nodes in the node table's order,
    each once (slurmctld keeps a partition's nodes as a bitmap over that table), and the names it does not
    define."""
    members: set[str] = set()
    for item in _ITEMS.findall(text):
        if item.upper() == "ALL":
            members.update(all_nodes)
        else:
            members.update(sets[item] if item in sets else expand_hostlist(item))
    defined = set(all_nodes)
    return tuple(n for n in all_nodes if n in members), sorted(members - defined)


def _selection_notes(select: str, settings: Mapping[str, str], parts: list[dict]) -> list[str]:
    """What of slurm.conf's node selection the replay does not follow, in words: it allocates as
    select/cons_tres does (`nodes.pick`), whole nodes under select/linear or OverSubscribe=EXCLUSIVE."""
    notes = []
    if not select:
        notes.append("no SelectType=: Slurm 22.05's default is select/linear (whole nodes to every job); the replay "
                     "allocates cores as select/cons_tres does, as nearly every site sets it; add "
                     "SelectType=select/linear to replay whole nodes")
    elif select == "select/linear":
        notes.append("SelectType=select/linear: every job gets whole nodes, chosen as select/cons_tres chooses "
                     "whole nodes")
    elif select not in ("select/cons_tres", "select/cons_res"):
        notes.append(f"SelectType={select}: the replay allocates as select/cons_tres does")
    lln = [p["name"] for p in parts if p.get("lln", "NO").upper() == "YES"]
    if "cr_lln" in settings.get("selecttypeparameters", "").lower():
        notes.append("SelectTypeParameters CR_LLN (least loaded node first) read past: the replay chooses nodes as "
                     "the default best fit does")
    elif lln:
        notes.append(f"LLN=YES (least loaded node first) on {', '.join(lln)} read past: the replay chooses nodes "
                     "as the default best fit does")
    topology = settings.get("topologyplugin", "topology/none").lower()
    if topology != "topology/none":
        notes.append(f"TopologyPlugin={topology} read past: the replay chooses nodes without the switches")
    oversubscribed = [p["name"] for p in parts
                      if p.get("oversubscribe", p.get("shared", "NO")).upper().split(":")[0] in ("YES", "FORCE")]
    if oversubscribed:
        notes.append(f"OverSubscribe=YES/FORCE on {', '.join(oversubscribed)} read past: the replay gives each CPU "
                     "to one job at a time")
    return notes


# PriorityFlags the replay follows (FAIR_TREE's two alternatives), or that change no start order in it
_FLAGS_FOLLOWED = {"NO_FAIR_TREE", "DEPTH_OBLIVIOUS", "CALCULATE_RUNNING", "ACCRUE_ALWAYS"}


def _priority_notes(settings: Mapping[str, str], flags: set[str]) -> list[str]:
    """What of the multifactor plugin's settings the replay does not follow, in words."""
    notes = []
    other = sorted(flags - _FLAGS_FOLLOWED)
    if other:
        notes.append(f"PriorityFlags {','.join(other)} read past: priorities are computed without them")
    if settings.get("priorityweighttres", "").strip():
        notes.append("PriorityWeightTRES read past: no TRES factor in the replay's priorities")
    reset = settings.get("priorityusageresetperiod", "NONE").strip().upper()
    if reset != "NONE":
        notes.append(f"PriorityUsageResetPeriod={reset} read past: usage only decays (PriorityDecayHalfLife)")
    return notes


_SCHED_INT = {"bf_interval", "bf_max_job_test", "bf_max_job_user", "bf_resolution", "default_queue_depth",
              "sched_interval", "batch_sched_delay"}


def parse_slurm_conf_lines(lines: list[str]) -> SlurmConf:
    settings = slurm_conf_settings(lines)
    nodes: dict[str, Node] = {}
    parts: list[dict] = []
    node_default: dict[str, str] = {}
    features: dict[str, set[str]] = {}
    nodesets: dict[str, dict[str, str]] = {}
    part_default: dict[str, str] = {}
    notes: list[str] = []
    for line in lines:
        if not line or line.lower().startswith("include"):
            continue
        pairs = _pairs(line)
        if not pairs:
            continue
        key, value = pairs[0]
        if key == "nodename":
            spec = {**node_default, **dict(pairs[1:])}
            if value.upper() == "DEFAULT":
                node_default = spec
                continue
            cpus = _number(spec, "cpus" if "cpus" in spec else "procs", None, line)
            if cpus is None:  # slurm.conf(5): Boards x sockets x CoresPerSocket x ThreadsPerCore
                sockets = _number(spec, "sockets", None, line) if "sockets" in spec else \
                    _number(spec, "boards", 1, line) * _number(spec, "socketsperboard", 1, line)
                cpus = sockets * _number(spec, "corespersocket", 1, line) * _number(spec, "threadspercore", 1, line)
            mem = _number(spec, "realmemory", INFINITE, line, float)
            node_weight = _number(spec, "weight", 1, line)
            gpus = sum(int(g.rsplit(":", 1)[-1]) for g in spec.get("gres", "").split(",")
                       if g.startswith("gpu") and g.rsplit(":", 1)[-1].isdigit())
            have = {f.strip() for f in spec.get("features", spec.get("feature", "")).split(",") if f.strip()}
            for name in expand_hostlist(value):
                if name in nodes:  # slurmctld 22.05: "fatal: Duplicated NodeName ... in the config file" (checked)
                    raise ValueError(f"node {name} is defined on two NodeName= lines (the second: `{line}`); "
                                     "slurmctld refuses such a slurm.conf (Duplicated NodeName): keep one")
                nodes[name] = Node(name, cpus, mem, gpus, node_weight)
                features[name] = have
        elif key == "nodeset":
            nodesets[value] = dict(pairs[1:])
        elif key == "partitionname":
            spec = {**part_default, **dict(pairs[1:])}
            if value.upper() == "DEFAULT":
                part_default = spec
                continue
            if any(p["name"] == value for p in parts):  # slurmctld 22.05: "fatal: ... duplicate entry for partition"
                raise ValueError(f"partition {value} is named on two PartitionName= lines; slurmctld refuses such a "
                                 "slurm.conf (duplicate entry for partition): keep one")
            parts.append({"name": value, "line": line, **spec})
    all_nodes = tuple(nodes)
    sets = {name: _nodeset(spec, nodes, features) for name, spec in nodesets.items()}
    select = settings.get("selecttype", "").lower()
    linear = select == "select/linear"  # whole nodes to every job
    notes.extend(_selection_notes(select, settings, parts))
    partitions = []
    for p in parts:
        names, unknown = _partition_nodes(p.get("nodes", ""), all_nodes, sets)  # no Nodes=: none (Nodes=(null))
        if not names:
            notes.append(f"partition {p['name']} has no nodes: its jobs cannot run in the replay")
        if unknown:  # slurmctld 22.05: "fatal: Invalid node names in partition" (checked)
            raise ValueError(f"partition {p['name']} names nodes slurm.conf does not define: "
                             f"{', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}; slurmctld refuses such a "
                             "slurm.conf (Invalid node names in partition): define them, or leave them out")
        over = p.get("oversubscribe", p.get("shared", "NO")).upper()
        legacy = _number(p, "priority", 1, p["line"])  # Priority= sets both (slurm.conf(5): for compatibility)
        partitions.append(Partition(
            name=p["name"], nodes=names, default=p.get("default", "NO").upper() == "YES",
            max_time_s=_time(p, "maxtime", INFINITE, p["line"]),
            default_time_s=_time(p, "defaulttime", None, p["line"]),
            priority_tier=_number(p, "prioritytier", legacy, p["line"]),
            priority_job_factor=_number(p, "priorityjobfactor", legacy, p["line"]),
            exclusive=linear or over.startswith("EXCLUSIVE")))
    sched = SchedulerParams(backfill=settings.get("schedulertype", "sched/backfill").lower() == "sched/backfill")
    kw = {}
    for item in settings.get("schedulerparameters", "").split(","):
        k, _, v = item.strip().partition("=")
        k = k.lower()
        if k in _SCHED_INT and v.lstrip("-").isdigit():
            kw[k] = int(v)
        elif k == "bf_window" and v.isdigit():
            kw["bf_window_min"] = int(v)
        elif k == "sched_min_interval" and v.isdigit():
            kw["sched_min_interval_us"] = int(v)
        elif k in _SCHED_INT | {"bf_window", "sched_min_interval"}:  # slurmctld: "Invalid SchedulerParameters"
            notes.append(f"SchedulerParameters {k}={v} is not a whole number: Slurm's default taken, as slurmctld does")
        elif k:
            notes.append(f"SchedulerParameters {k} read past")
    sched = replace(sched, **kw)
    flags = {f.strip().upper() for f in settings.get("priorityflags", "").split(",") if f.strip()}

    def weight(name: str) -> int:
        return _number(settings, f"priorityweight{name}", 0)

    prio = PriorityParams(
        multifactor=settings.get("prioritytype", "priority/basic").lower() == "priority/multifactor",
        weight_age=weight("age"), weight_fairshare=weight("fairshare"), weight_job_size=weight("jobsize"),
        weight_partition=weight("partition"), weight_qos=weight("qos"), weight_assoc=weight("assoc"),
        max_age_s=_time(settings, "prioritymaxage", 7 * 86400.0),
        favor_small=settings.get("priorityfavorsmall", "NO").upper() == "YES",
        decay_half_life_s=_time(settings, "prioritydecayhalflife", 7 * 86400.0),
        calc_period_s=_time(settings, "prioritycalcperiod", 300.0),
        fair_tree=not ({"NO_FAIR_TREE", "DEPTH_OBLIVIOUS"} & flags), depth_oblivious="DEPTH_OBLIVIOUS" in flags,
        fs_dampening=_dampening(settings.get("fairsharedampeningfactor", "1")))
    if prio.multifactor:
        notes.extend(_priority_notes(settings, flags))
    if not nodes:
        raise ValueError("slurm.conf names no nodes (no NodeName= line): the replay needs the nodes and their CPUs")
    if not partitions:
        partitions = [Partition("default", all_nodes, default=True)]
        notes.append("no PartitionName= line: one partition over every node")
    return SlurmConf(cluster=settings.get("clustername", "cluster"), nodes=tuple(nodes.values()),
                     partitions=tuple(partitions), sched=sched, priority=prio, notes=tuple(notes))


def conf_from_capacity(rows) -> SlurmConf:
    """Slurm's defaults on the warehouse's capacity rows (`partition, nodes, cores, gpus, mem_mib`), for a
    site that gives no slurm.conf: each partition its own nodes (cores / nodes each); where the node
    count is unknown, one node holding every core (a pool of cores, said in the notes)."""
    records = rows.to_dicts() if hasattr(rows, "to_dicts") else [dict(r) for r in rows]
    nodes: list[Node] = []
    parts: list[Partition] = []
    notes: list[str] = []
    for rec in records:
        name = rec.get("partition") or "*"
        cores = int(rec["cores"])
        count = int(rec["nodes"]) if rec.get("nodes") else 0
        if count <= 0 or cores % count:
            notes.append(f"partition {name!r}: node count unknown" + (f" ({count} nodes do not divide {cores} cores)"
                                                                       if count > 0 else "")
                         + f"; replayed as one node of {cores} cores")
            count = 1
        per = cores // count
        mem = rec.get("mem_mib")
        gpus = int(rec.get("gpus") or 0)
        names = tuple(f"{name}-{k}" for k in range(count))
        nodes.extend(Node(nm, per, float(mem) / count if mem else INFINITE, gpus // count) for nm in names)
        parts.append(Partition(name, names))
    # jobs of a partition without a row of its own run in the whole-cluster row ('*'), as in `Capacity`
    whole = next((k for k, p in enumerate(parts) if p.name == "*"), 0)
    parts[whole] = replace(parts[whole], default=True)
    # priority/multifactor with Slurm's default weights (all 0): every job's priority is equal
    return SlurmConf(nodes=tuple(nodes), partitions=tuple(parts), priority=PriorityParams(multifactor=True),
                     notes=tuple(notes))


def parse_qos_priorities(text: str) -> tuple[tuple[str, int], ...]:
    """Each QOS's Priority, from what `sacctmgr -nP show qos format=name,priority` prints (`name|priority`
    lines; a `Name|Priority` header and blank lines are passed over) or from `name=priority,...`. QOS
    priorities live in slurmdbd, so slurm.conf cannot give them."""
    text = text.strip()
    if not text:
        raise ValueError("no QOS priorities given: `sacctmgr -nP show qos format=name,priority` prints them")
    items = text.splitlines() if "|" in text else text.replace("\n", ",").split(",")
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in items)):
        name, sep, value = item.partition("|" if "|" in item else "=")
        name, value = name.strip(), value.strip().rstrip("|")
        if name.lower() == "name" and value.lower() == "priority":
            continue  # sacctmgr's header (without -n)
        if not sep or not name or not re.fullmatch(r"\d+", value):
            raise ValueError(f"QOS priorities: {item!r} is not name|priority or name=priority (a whole number); "
                             "`sacctmgr -nP show qos format=name,priority` prints them")
        if out.get(name, int(value)) != int(value):
            raise ValueError(f"QOS priorities: {name} is given twice, as {out[name]} and {value}: give each QOS once")
        out[name] = int(value)
    return tuple(sorted(out.items()))


def read_qos_priorities(arg: str) -> tuple[tuple[str, int], ...]:
    """`parse_qos_priorities` of the file `arg` names, or of `arg` itself (`normal=0,high=100`)."""
    path = Path(arg)
    return parse_qos_priorities(path.read_text() if "=" not in arg and path.is_file() else arg)


SHARES_HINT = "`sshare -a -l -P` prints them (or `sacctmgr -P show assoc format=account,user,fairshare`)"


ONE_CLUSTER_HINT = ("give the tree of one cluster (`sacctmgr -P show assoc cluster=NAME format=account,user,fairshare,"
                    "parentname`, or `sshare` on the cluster)")


def _shares_said(old: float, new: float) -> str:
    return f"as {old:g} and {new:g}"


def _once(kept: dict, key, value, what: str, said: Callable[[Any, Any], str] = _shares_said) -> None:
    """Keep `value` under `key`, refusing a second, different one: sacctmgr lists an association once for each
    cluster slurmdbd serves, so a tree read without `cluster=` can hold one cluster's shares (or parents) over
    another's."""
    if kept.get(key, value) != value:
        raise ValueError(f"{what} is given twice, {said(kept[key], value)}: {ONE_CLUSTER_HINT}")
    kept[key] = value


def parse_shares(text: str) -> Shares:
    """The association tree from `sshare -a -l -P` (or `sshare -a -P`: `Account|User|RawShares|...`, an
    account's name indented one space a level, so its parent is the account above it one level up) or
    `sacctmgr -P show assoc format=account,user,fairshare[,parentname]` (`Account|User|Share[|Par Name]`).
    root's own line is passed over, root's user kept as root's; `parent` shares (the association takes its
    parent's) are replayed as one share, as the notes say."""
    rows = [ln.split("|") for ln in text.splitlines() if ln.strip()]
    if not rows:
        raise ValueError(f"no associations given: {SHARES_HINT}")
    head = [c.strip().lower() for c in rows[0]]
    share_col = next((head.index(c) for c in ("rawshares", "share", "fairshare") if c in head), None)
    parent_col = next((head.index(c) for c in ("par name", "parentname") if c in head), None)
    if "account" in head and "user" in head and share_col is not None:
        acct_col, user_col, rows = head.index("account"), head.index("user"), rows[1:]
    else:
        acct_col, user_col, share_col = 0, 1, 2
    accounts: dict[str, float] = {}
    users: dict[tuple[str, str], float] = {}
    under: dict[str, str] = {}  # every account's parent, root too
    above: dict[int, str] = {}  # the last account seen at each indentation
    root_users: list[float] = []
    parent = []
    for r in rows:
        if len(r) <= max(acct_col, user_col, share_col):
            raise ValueError(f"{'|'.join(r)!r} is not Account|User|RawShares: {SHARES_HINT}")
        raw_acct, user, value = r[acct_col], r[user_col].strip(), r[share_col].strip()
        acct = raw_acct.strip()
        depth = len(raw_acct) - len(raw_acct.lstrip(" "))
        if acct == "root" and not user:
            above[depth] = acct
            continue  # root itself: no shares of its own
        if value.lower() == "parent":
            parent.append(f"{acct}/{user}" if user else acct)
            share = 1.0
        else:
            try:
                share = float(value)
            except ValueError:
                raise ValueError(f"{'|'.join(r)!r}: {value!r} is not a number of shares: {SHARES_HINT}") from None
            if share < 0 or share != share:
                raise ValueError(f"{'|'.join(r)!r}: shares are 0 or more")
        if acct == "root":
            root_users.append(share)
        elif user:
            _once(users, (acct, user), share, f"user {user} in account {acct}")
        else:
            _once(accounts, acct, share, f"account {acct}")
            up = r[parent_col].strip() if parent_col is not None and len(r) > parent_col else above.get(depth - 1, "")
            _once(under, acct, up or "root", f"account {acct}", lambda old, new: f"under {old} and under {new}")
            above[depth] = acct
    if not accounts and not users:
        raise ValueError(f"no account or user association in the tree given: {SHARES_HINT}")
    parents = {acct: up for acct, up in under.items() if up != "root"}
    loop = _first_loop(parents)
    if loop:
        raise ValueError(f"the accounts {' -> '.join(loop)} are each other's parents: {SHARES_HINT}")
    notes = [f"Fairshare=parent replayed as 1 share: {', '.join(parent[:5])}{' ...' if len(parent) > 5 else ''}"] \
        if parent else []
    return Shares(tuple(sorted(accounts.items())), tuple(sorted((a, u, v) for (a, u), v in users.items())),
                  tuple(root_users), tuple(notes), parents=tuple(sorted(parents.items())))


def _first_loop(parents: Mapping[str, str]) -> list[str]:
    for start in parents:
        seen, k = [start], parents[start]
        while k in parents:
            if k in seen:
                return seen[seen.index(k):] + [k]
            seen.append(k)
            k = parents[k]
    return []


def read_shares(path: str | Path) -> Shares:
    """`parse_shares` of a file."""
    return parse_shares(Path(path).read_text())


def site_shares(path: str | Path | None, con, cluster: str, key: bytes | None) -> Shares:
    """The tree in the file `path` (None: every association with one share), named as the warehouse names
    the cluster's jobs (keyed hashes unless the names were kept: `jobs_store.stored_name`), root's too."""
    from metapilot.warehouse.jobs_store import stored_name

    shares = read_shares(path) if path is not None else Shares()
    name, jobs = stored_name(con, cluster, shares.names() + ["root"], key)
    if jobs == 0 and path is not None:
        shares = replace(shares, notes=shares.notes + (
            f"no job of cluster {cluster!r} ran as an account or user of {Path(path).name}: its shares weigh "
            "nobody's jobs (is it this cluster's tree, and the warehouse's site key?)",))
    return shares.renamed(name)


_MF_KEYS = {"age": "weight_age", "fairshare": "weight_fairshare", "jobsize": "weight_job_size",
            "partition": "weight_partition", "qos": "weight_qos", "assoc": "weight_assoc"}


def multifactor_rule(rule: str, conf: SlurmConf) -> SlurmConf | None:
    """`MULTIFACTOR(age=1000,fairshare=10000,maxage=7-0,favorsmall=yes,decay=7-0,calc=5)` -> the conf with
    priority/multifactor and those settings (the rest from the conf); plain `multifactor` -> the conf as
    it is; None for any other rule. Weights are Slurm's PriorityWeight* names without the prefix."""
    m = re.fullmatch(r"\s*multifactor\s*(?:\((.*)\))?\s*", rule, re.IGNORECASE)
    if not m:
        return None
    if m.group(1) is None:
        return conf
    kw: dict = {"multifactor": True}
    for item in filter(None, (x.strip() for x in m.group(1).split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep:
            raise ValueError(f"MULTIFACTOR({m.group(1)}): {item!r} is not name=value")
        if key in _MF_KEYS:
            kw[_MF_KEYS[key]] = int(value)
        elif key == "maxage":
            kw["max_age_s"] = parse_time_s(value)
        elif key == "decay":
            kw["decay_half_life_s"] = parse_time_s(value)
        elif key == "calc":
            kw["calc_period_s"] = parse_time_s(value)
        elif key == "favorsmall":
            kw["favor_small"] = value.strip().lower() in ("yes", "1", "true")
        else:
            raise ValueError(f"MULTIFACTOR: unknown setting {key!r}: one of "
                             f"{', '.join([*_MF_KEYS, 'maxage', 'decay', 'calc', 'favorsmall'])}")
    return conf.with_priority(**kw)
