"""Where the real Slurm puts a job among several nodes, against the replay's node choice (`nodes.pick`,
issue 51): a cluster of its own from scripts/slurm.sh, four nodes of 8 CPUs (one slurmd each) in `debug`
and, over the same nodes, `whole` with OverSubscribe=EXCLUSIVE.

Each case pins long-running blockers to chosen nodes (`-w`), so that the free CPUs are known, then
submits one job and reads the nodes and CPUs Slurm gave it (`scontrol show job -d`); `pick` given the
same free CPUs must choose the same. The cases are those where cons_tres's sets of consecutive nodes
decide otherwise than the tightest node or the nodes with the most free CPUs would.
"""

from __future__ import annotations

import re

import pytest
from slurm_fixtures import start_cluster, stop_cluster, wait_until

from metapilot.models.simulator.slurm.conf import expand_hostlist
from test_slurm_replay import choose

NODES, CPUS = 4, 8


@pytest.fixture(scope="module")
def cluster():
    c, _ = start_cluster({"METAPILOT_SLURM_NODES": str(NODES), "METAPILOT_SLURM_CPUS": str(CPUS),
                          "METAPILOT_SLURM_CONF_EXTRA": f"PartitionName=whole Nodes=n[1-{NODES}] "
                                                        "OverSubscribe=EXCLUSIVE State=UP"})
    try:
        yield c
    finally:
        res = stop_cluster(c)
        assert res.returncode == 0, res.stderr[-2000:]


def _running(c, job: str) -> bool:
    return c.run("squeue", "-h", "-j", job, "-o", "%t", check=False).stdout.strip() == "R"


def _placed(c, job: str) -> list[tuple[int, int]]:
    """[(node number, CPUs)] of a running job, in node order."""
    text = c.run("scontrol", "show", "job", "-d", job).stdout
    out = []
    for nodes, ids in re.findall(r"\bNodes=(\S+)\s+CPU_IDs=(\S+)", text):  # nodes with the same CPUs: one line
        n = 0
        for part in ids.split(","):
            lo, _, hi = part.partition("-")
            n += int(hi or lo) - int(lo) + 1
        out += [(int(node[1:]), n) for node in expand_hostlist(nodes)]
    return sorted(out)


def _place(c, used: list[int], *opts: str) -> list[tuple[int, int]]:
    """Blockers holding `used[i]` CPUs of node i+1, then one job with `opts`: where Slurm put it."""
    c.cancel_all()
    blockers = [c.sbatch("-p", "debug", "-w", f"n{i + 1}", "-N", "1", "-n", str(k), "-t", "5", wrap="sleep 300")
                for i, k in enumerate(used) if k]
    wait_until(lambda: all(_running(c, b) for b in blockers), 60, "the blockers to run")
    job = c.sbatch(*opts, "-t", "1", wrap="sleep 60")
    wait_until(lambda: _running(c, job), 60, f"job {job} to run")
    try:
        return _placed(c, job)
    finally:
        c.cancel_all()


@pytest.mark.parametrize("used, cpus, one_node", [
    ([2, 4, 8, 3], 4, True),    # sets {1, 2} (10 free) and {4} (5): the tightest set, not node 2 (exactly 4)
    ([2, 4, 8, 5], 4, True),    # {4} (3) is too small: node 2 of {1, 2}
    ([2, 2, 8, 0], 10, False),  # {1, 2} holds 10: its nodes in index order, not node 4 (the most free)
    ([3, 8, 1, 8], 12, False),  # no set holds 12: the largest, {3} (7), then {1} (5)
])
def test_slurm_places_a_job_where_the_replay_does(cluster, used, cpus, one_node):
    free = [CPUS - k for k in used]
    got = _place(cluster, used, "-p", "debug", "-n", str(cpus), *(["-N", "1"] if one_node else []))
    assert got == sorted(choose(free, cpus, 1 if one_node else 0, CPUS))


def test_slurm_gives_a_whole_node_job_the_tightest_run_of_idle_nodes(cluster):
    got = _place(cluster, [0, 1, 0, 0], "-p", "whole", "-N", "2", "-n", "2")
    assert [n for n, _ in got] == [3, 4] == sorted(n for n, _ in choose([8, 7, 8, 8], 2, 2, CPUS, exclusive=True))


@pytest.mark.parametrize("used, cpus, one_node, weight", [
    ([0, 0, 0, 0], 4, True, [10, 10, 1, 1]),   # the lightest nodes first: node 3, not node 1
    ([0, 0, 6, 6], 4, False, [5, 5, 1, 1]),    # {3, 4} weighs less though no node of it holds the job alone
    ([0, 0, 6, 6], 4, False, [1, 1, 1, 1]),    # the same free CPUs at equal weights: node 1, the tightest
    ([0, 4, 0, 4], 8, True, [2, 1, 2, 2]),     # node 2 weighs least but cannot hold 8: node 1 of the rest
])
def test_slurm_allocates_the_lowest_node_weight_first_as_the_replay_does(cluster, used, cpus, one_node, weight):
    """Node weights (slurm.conf's Weight, set here with `scontrol update`): the replay's node choice
    takes them as `_eval_nodes` does."""
    try:
        for i, w in enumerate(weight):
            cluster.run("scontrol", "update", f"NodeName=n{i + 1}", f"Weight={w}")
        free = [CPUS - k for k in used]
        got = _place(cluster, used, "-p", "debug", "-n", str(cpus), *(["-N", "1"] if one_node else []))
        assert got == sorted(choose(free, cpus, 1 if one_node else 0, CPUS, weight=weight))
    finally:
        cluster.run("scontrol", "update", f"NodeName=n[1-{NODES}]", "Weight=1")
