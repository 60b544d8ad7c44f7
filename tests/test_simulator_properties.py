"""Properties of the replay on random small workloads (hypothesis).

Times and sizes are small integers so that simultaneous events are common. Besides invariants,
the compiled engine is checked against `oracle`, a slow pure-Python reading of SPEC §6 written
independently of the engine's data structures (profile recomputed from scratch, brute-force
earliest start).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metapilot.models.simulator import RULE_PAIRS, Capacity, Engine, simulate
from metapilot.models.simulator.policies import POLICIES, policy_code, score
from metapilot.transforms.workload import Workload

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def cases(draw, max_jobs: int = 14) -> tuple[Workload, Capacity]:
    cores = draw(st.integers(2, 8))
    gpus = draw(st.sampled_from([0, 0, 2]))
    mem = draw(st.sampled_from([None, 100]))
    n = draw(st.integers(1, max_jobs))
    rows = []
    for _ in range(n):
        run = draw(st.sampled_from([1, 2, 3, 5, 8, 10]))
        rows.append((
            draw(st.integers(0, 20)), run, run + draw(st.sampled_from([0, 0, 0, 2, 5])),
            draw(st.integers(1, cores)), draw(st.integers(0, gpus)),
            0 if mem is None else draw(st.sampled_from([0, 10, 40, 70])),
        ))
    cols = list(zip(*rows, strict=True))
    w = Workload.from_arrays(submit=cols[0], run=cols[1], req_time=cols[2], cores=cols[3], gpus=cols[4], mem=cols[5])
    cap = Capacity.from_rows([{"partition": "*", "cores": cores, "gpus": gpus, "mem_mib": mem}])
    return w, cap


# --------------------------------------------------------------------------- the oracle


def oracle(w: Workload, cap: Capacity, policy: str, backfill: str, fit_first: bool = False) -> np.ndarray:
    """Start times by a direct, slow reading of SPEC §6 (one pool). `fit_first`: jobs that fit
    the resources free at the start of the step go first."""
    code = policy_code(policy)
    n = len(w)
    need = np.stack([w.cores, w.gpus, w.mem], axis=1)
    capv = cap.matrix[0]
    start = np.full(n, math.nan)
    end = np.full(n, math.nan)
    seq: dict[int, int] = {}
    running: set[int] = set()
    queue: list[int] = []
    res: dict[int, float] = {}
    nxt = 0

    def pe(j: int) -> float:
        return start[j] + w.req_time[j]

    def fits(j: int, free: np.ndarray) -> bool:
        return bool(np.all(need[j] <= free))

    def ordered(now: float, free: np.ndarray) -> list[int]:
        def key(j: int) -> tuple:
            miss = fit_first and not fits(j, free)
            return (miss, score(code, w.submit[j], w.req_time[j], w.cores[j], now), j)

        return sorted(queue, key=key)

    def begin(j: int, now: float) -> None:
        queue.remove(j)
        start[j] = now
        seq[j] = len(seq)
        running.add(j)

    def holdings(skip: int = -1) -> list[tuple[float, float, np.ndarray]]:
        out = [(start[j], pe(j), need[j]) for j in running]
        out += [(res[j], res[j] + w.req_time[j], need[j]) for j in queue if j != skip]
        return out

    def free_at(t: float, hold) -> np.ndarray:
        return capv - sum((h[2] for h in hold if h[0] <= t < h[1]), np.zeros(3))

    def earliest(j: int, now: float) -> float:
        hold = holdings(skip=j)
        for c in sorted({now} | {h[1] for h in hold if h[1] > now}):
            points = {c} | {h[0] for h in hold if c < h[0] < c + w.req_time[j]}
            if all(fits(j, free_at(p, hold)) for p in points):
                return c
        raise AssertionError("no slot")

    def list_step(now: float) -> None:
        free = capv - sum((need[j] for j in running if pe(j) > now), np.zeros(3))
        order = ordered(now, free)
        head = None
        for k, j in enumerate(order):
            if not fits(j, free):
                head, rest = j, order[k + 1:]
                break
            begin(j, now)
            free = free - need[j]
        if backfill != "easy" or head is None:
            return
        for shadow in sorted({pe(j) for j in running if pe(j) > now}):
            avail = capv - sum((need[j] for j in running if pe(j) > shadow), np.zeros(3))
            if fits(head, avail):
                extra = avail - need[head]
                break
        for j in rest:
            if not fits(j, free):
                continue
            if now + w.req_time[j] <= shadow:
                pass
            elif fits(j, extra):
                extra = extra - need[j]
            else:
                continue
            begin(j, now)
            free = free - need[j]

    while True:
        t_sub = w.submit[nxt] if nxt < n else math.inf
        done = [(start[j] + w.run[j], seq[j], j) for j in running]
        t_comp = min(done)[0] if done else math.inf
        t_res = min((res[j] for j in queue), default=math.inf) if backfill == "conservative" else math.inf
        now = min(t_sub, t_comp, t_res)
        if now == math.inf:
            return start
        if t_sub == now:
            j = nxt
            nxt += 1
            queue.append(j)
            if backfill == "conservative":
                res[j] = earliest(j, now)
            else:
                list_step(now)
        elif t_comp == now:
            j = min(done)[2]
            running.remove(j)
            end[j] = now
            if backfill == "conservative":
                for k in ordered(now, free_at(now, holdings())):
                    if res[k] > now:
                        new = earliest(k, now)
                        assert new <= res[k], "a reservation moved later"
                        res[k] = new
            else:
                list_step(now)
        else:
            for j in sorted(j for j in queue if res[j] == now):
                begin(j, now)


# --------------------------------------------------------------------------- properties


def check_valid(w: Workload, cap: Capacity, start: np.ndarray, end: np.ndarray) -> None:
    """Every job runs once for its run time, not before submission, never over capacity."""
    assert not np.isnan(start).any()
    assert np.all(start >= w.submit)
    assert np.array_equal(end, start + w.run)
    need = np.stack([w.cores, w.gpus, w.mem], axis=1)
    times = np.concatenate([start, end])
    delta = np.concatenate([need, -need])
    order = np.lexsort((delta[:, 0], times))
    used = np.cumsum(delta[order], axis=0)
    # after all releases at an instant; sort puts releases (negative) first, so check all prefixes
    assert np.all(used <= cap.matrix[0] + 1e-9)


@settings(SETTINGS, max_examples=150)
@given(cases())
def test_engine_equals_oracle_for_all_21_baselines(case) -> None:
    w, cap = case
    for policy, backfill in RULE_PAIRS:
        r = simulate(w, cap, policy, backfill)
        expected = oracle(w, cap, policy, backfill)
        assert np.array_equal(r.start, expected), (policy, backfill, r.start.tolist(), expected.tolist())
        check_valid(w, cap, r.start, r.end)


@SETTINGS
@given(cases(), st.sampled_from(RULE_PAIRS))
def test_engine_equals_oracle_with_fit_first(case, baseline) -> None:
    w, cap = case
    policy, backfill = baseline
    r = simulate(w, cap, policy, backfill, fit_first=True)
    assert np.array_equal(r.start, oracle(w, cap, policy, backfill, fit_first=True))
    check_valid(w, cap, r.start, r.end)


@SETTINGS
@given(cases(max_jobs=30))
def test_no_backfill_fcfs_starts_in_submit_order(case) -> None:
    w, cap = case
    r = simulate(w, cap, "FCFS", "none")
    assert np.all(np.diff(r.start) >= 0)
    eng = Engine(w, cap, "FCFS", "none")
    eng.run()
    assert np.all(np.diff(eng.state.order) > 0)  # and in that order, even at equal times


def _shadow(w: Workload, cap: Capacity, start: np.ndarray, running: list[int], head: int, now: float) -> float:
    need = np.stack([w.cores, w.gpus, w.mem], axis=1)
    pe = {j: start[j] + w.req_time[j] for j in running}
    for t in sorted({p for p in pe.values() if p > now} | {now}):
        free = cap.matrix[0] - sum((need[j] for j in running if pe[j] > t), np.zeros(3))
        if np.all(need[head] <= free):
            return t
    raise AssertionError("head never fits")


@SETTINGS
@given(cases(max_jobs=25), st.sampled_from(POLICIES))
def test_easy_backfilled_jobs_never_delay_the_head(case, policy: str) -> None:
    """After each instant with a single event: the head's shadow time is the same with or
    without the jobs backfilled at that step; under FCFS the head then starts by that time."""
    w, cap = case
    final = simulate(w, cap, policy, "easy")
    code = policy_code(policy)
    eng = Engine(w, cap, policy, "easy")
    for t in np.unique(np.concatenate([w.submit, final.start, final.end])):
        eng.advance(t)
        queued = eng.queued().tolist()
        if not queued:
            continue
        key = lambda j: (score(code, w.submit[j], w.req_time[j], w.cores[j], t), j)  # noqa: E731
        head = min(queued, key=key)
        running = eng.running().tolist()
        shadow = _shadow(w, cap, eng.start, running, head, t)
        if policy == "FCFS":
            assert final.start[head] <= shadow
        events = int(np.sum(w.submit == t) + np.sum(final.end == t))
        if events == 1:
            backfilled = [j for j in running if eng.start[j] == t and key(j) > key(head)]
            without = [j for j in running if j not in backfilled]
            assert _shadow(w, cap, eng.start, without, head, t) == shadow


@SETTINGS
@given(cases(max_jobs=25), st.sampled_from(POLICIES))
def test_conservative_never_delays_a_reservation(case, policy: str) -> None:
    w, cap = case
    final = simulate(w, cap, policy, "conservative")
    eng = Engine(w, cap, policy, "conservative")
    best = np.full(len(w), math.inf)
    for t in np.unique(np.concatenate([w.submit, final.start, final.end])):
        eng.advance(t)
        q = eng.queued()
        res = eng.state.res[q]
        assert np.all(res <= best[q])  # reservations only ever move earlier
        assert np.all(res > t)  # what falls due at t has started
        best[q] = res
    assert np.all(final.start <= np.where(np.isinf(best), final.start, best))


@SETTINGS
@given(cases(max_jobs=25), st.sampled_from(RULE_PAIRS), st.lists(st.integers(1, 15), min_size=1, max_size=8))
def test_advancing_in_random_slices_equals_one_run(case, baseline, slices: list[int]) -> None:
    w, cap = case
    policy, backfill = baseline
    full = simulate(w, cap, policy, backfill)
    eng = Engine(w, cap, policy, backfill)
    t, k = 0.0, 0
    while not eng.done:
        t += slices[k % len(slices)]
        k += 1
        eng.advance(t)
    assert np.array_equal(eng.start, full.start)
