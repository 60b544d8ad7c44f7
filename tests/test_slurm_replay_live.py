"""The replay of what Slurm does (`replay_slurm`, issue 51) against the real one-node Slurm of
scripts/slurm.sh: a small crafted workload's start order, job for job, is the one the replay gives from
the same slurm.conf, the real submit times and the real run times.

The workload (sizes in 64ths of the node, so that it holds on any CPU count): a blocker holds the whole
node while the others are submitted, then
- its end lets the high tier go first: H1 (3/4 of the node, three minutes) starts; H2 (1/2) does not fit
  beside it, and
  the main scheduler stops there for the node, so D1 (debug, 1/4, one minute) starts by backfill only;
- when D1 ends, D3 and D5 (one minute each) backfill before H2's reservation, but D2 (three minutes)
  does not: it would fit beside H2 at its reserved start (textbook EASY starts it here), yet Slurm's
  backfill reserves whole nodes for H2, and D2 would overlap that reservation;
- when H1 ends, H2, H3 (high) and D2 start; D4 (the whole node) waits until the node is empty.
Slurm decides in whole seconds and in passes (main scheduler on events and every sched_interval,
backfill every bf_interval): jobs the replay starts at the same second may really start a second or
two apart, so the order is compared as waves: jobs the replay starts in different seconds must start
in that order, and jobs it starts together must start within 2 s of each other.
"""

from __future__ import annotations

import os
import time

import polars as pl
import pytest
from slurm_fixtures import slurm, slurm_session, wait_until  # noqa: F401

from metapilot.models.simulator.slurm import read_slurm_conf, replay_slurm

# name, partition, size in 64ths of the node, time limit (minutes), sleep (s); submitted in this order
BLOCKER = ("B", "debug", 64, 2, 15)
BURST = (
    ("H1", "high", 48, 3, 14),
    ("H2", "high", 32, 1, 4),
    ("D1", "debug", 16, 1, 5),
    ("D2", "debug", 8, 3, 4),
    ("D3", "debug", 8, 1, 4),
    ("D4", "debug", 64, 1, 3),
    ("H3", "high", 16, 3, 4),
    ("D5", "debug", 4, 1, 3),
)
TIE_S = 2.0  # jobs the replay starts together really start within this many seconds of each other


def _node_cpus(conf) -> int:
    assert len(conf.nodes) == 1, "scripts/slurm.sh starts a one-node cluster"
    return conf.nodes[0].cpus


def _state(slurm, job: str) -> str:
    return slurm.run("squeue", "-h", "-j", job, "-o", "%t", check=False).stdout.strip()


def _accounting(slurm, ids: list[str]) -> dict[str, dict]:
    """job -> submit, start, end (epoch s), partition, cpus, state, from sacct."""
    env = {**slurm.env, "SLURM_TIME_FORMAT": "%s"}
    import subprocess

    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o",
                          "JobID,Submit,Start,End,Partition,AllocCPUS,State"], env=env, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    rows = {}
    for ln in out.splitlines():
        f = ln.split("|")
        if len(f) == 7 and f[0] in ids and f[2].isdigit() and f[3].isdigit():
            rows[f[0]] = {"submit": int(f[1]), "start": int(f[2]), "end": int(f[3]), "partition": f[4],
                          "cpus": int(f[5]), "state": f[6]}
    return rows


def test_start_order_matches_the_replay(slurm):
    conf = read_slurm_conf(slurm.conf)
    total = _node_cpus(conf)
    cpus = {name: max(1, size * total // 64) for name, _, size, _, _ in (BLOCKER, *BURST)}
    spec = {name: (part, limit, sleep) for name, part, _, limit, sleep in (BLOCKER, *BURST)}

    def submit(name: str) -> str:
        part, limit, sleep = spec[name]
        return slurm.sbatch("-p", part, "-N", "1", "-n", str(cpus[name]), "-t", str(limit), "-J", f"r51{name}",
                            wrap=f"sleep {sleep}")

    ids = {"B": submit("B")}
    wait_until(lambda: _state(slurm, ids["B"]) == "R", 60, "the blocker to run")
    time.sleep(1.5)  # the burst in a later second than the blocker's start (the replay sees whole seconds)
    for name, *_ in BURST:
        ids[name] = submit(name)
    blocker_left = _state(slurm, ids["B"]) == "R"
    wait_until(lambda: not slurm.run("squeue", "-h", "-o", "%i", check=False).stdout.strip(), 100, "every job to end")
    name_of = {v: k for k, v in ids.items()}
    wait_until(lambda: len(_accounting(slurm, list(ids.values()))) == len(ids), 30, "sacct to record every job")
    acct = _accounting(slurm, list(ids.values()))
    assert all(r["state"] == "COMPLETED" for r in acct.values()), acct
    assert blocker_left, "the burst took longer to submit than the blocker ran: the machine is too slow for this test"

    # on Slurm's own clock (epoch seconds): backfill rounds its reservations to bf_resolution on it
    jobs = pl.DataFrame({
        "job_id": list(acct), "submit": [float(r["submit"]) for r in acct.values()],
        "run": [float(r["end"] - r["start"]) for r in acct.values()],
        "time_limit": [60.0 * spec[name_of[j]][1] for j in acct], "cpus": [r["cpus"] for r in acct.values()],
        "nodes": [1] * len(acct), "partition": [r["partition"] for r in acct.values()],
        "user": [str(os.getuid())] * len(acct), "qos": ["normal"] * len(acct)})
    out = replay_slurm(jobs, conf, rule="multifactor")
    pred = {j: s for j, s in zip(out["job_id"], out["start"])}
    real = {j: float(r["start"]) for j, r in acct.items()}

    def show() -> str:
        rows = sorted(acct, key=lambda j: (pred[j], real[j]))
        t0 = min(real.values())
        return "\n".join(f"{name_of[j]:>3} ({j}): submit {acct[j]['submit'] - t0:4.0f}  replay {pred[j] - t0:4.0f}  "
                         f"real {real[j] - t0:4.0f}" for j in rows)

    for a in acct:
        for b in acct:
            if pred[a] < pred[b]:
                assert real[a] < real[b], f"{name_of[a]} before {name_of[b]} in the replay, not in Slurm:\n{show()}"
            elif pred[a] == pred[b]:
                assert abs(real[a] - real[b]) <= TIE_S, \
                    f"{name_of[a]} and {name_of[b]} start together in the replay, not in Slurm:\n{show()}"
    # what the workload is there to show, on the real Slurm: the high tier first, the main scheduler
    # stopping at H2, and no backfill of D2 into H2's whole-node reservation
    r = {name: real[ids[name]] for name in ids}
    assert r["H1"] < r["H2"] and r["H1"] <= r["D1"] < r["D3"], show()
    assert r["D3"] < r["D2"] and r["D5"] < r["D2"] and r["D2"] >= r["H2"] - TIE_S, show()
    assert r["D4"] == max(r.values()), show()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
