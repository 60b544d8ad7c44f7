"""The replay against the real reference trace (KTH-SP2, SPEC §6): job-by-job equality with the
pyss schedules, the published figures, and step-by-step advancing equal to one full run."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from metapilot.models.simulator import Capacity, Engine, simulate
from metapilot.transforms.workload import Workload, normalise
from test_workload import (  # the tiny SWF reader
    KTH_NORMALISED,
    REFERENCE,
    read_swf_frame,
)

KTH_CAP = Capacity.single(100)


@pytest.fixture(scope="module")
def kth() -> Workload:
    """Normalised KTH-SP2; window start = first submit (F1's s counts from there)."""
    df, _ = read_swf_frame(KTH_NORMALISED)
    return normalise(df)


@pytest.mark.parametrize(
    ("mode", "mean_wait", "max_wait", "mean_bsld"),
    [
        ("none", 354_175.95, None, None),
        ("easy", 6_892.86, 262_194, 92.7193),
        ("conservative", 7_343.79, 249_058, 88.9357),
    ],
)
def test_fcfs_matches_pyss_job_by_job(kth: Workload, mode: str, mean_wait: float, max_wait, mean_bsld) -> None:
    ref = pl.read_csv(REFERENCE / f"KTH-SP2.fcfs-{mode}.starts.csv.gz")
    r = simulate(kth, KTH_CAP, "FCFS", mode)
    assert kth.job_ids.tolist() == ref["job_id"].cast(pl.Utf8).to_list()
    ref_wait = (ref["start"] - ref["submit"]).to_numpy()
    same = r.wait == ref_wait
    if not same.all():
        first = int(np.flatnonzero(~same)[0])
        pytest.fail(f"{mode}: {same.mean():.4%} identical; first divergence job {kth.job_ids[first]} "
                    f"(index {first}): wait {r.wait[first]} vs {ref_wait[first]}")
    m = r.metrics().row(0, named=True)
    assert m["jobs"] == 28_467 and m["cannot_fit"] == 0
    assert m["mean_wait"] == pytest.approx(mean_wait, abs=0.01)
    if max_wait is not None:
        assert m["max_wait"] == max_wait
        assert m["mean_bsld"] == pytest.approx(mean_bsld, abs=1e-4)
    assert m["util_cores"] == pytest.approx(0.699, abs=0.001)


@pytest.mark.parametrize(
    ("policy", "mean_wait", "max_wait"),
    [("SJF", 4_611, 681_785), ("WFP3", 5_210, 368_727), ("F1", 6_381, 2_649_678), ("LAF", 8_963, 814_928)],
)
def test_spec_figures_for_other_rules_with_easy(kth: Workload, policy: str, mean_wait: int, max_wait: int) -> None:
    r = simulate(kth, KTH_CAP, policy, "easy")
    assert round(float(r.wait.mean())) == mean_wait
    assert r.wait.max() == max_wait


@pytest.mark.parametrize(
    ("policy", "backfill"), [("FCFS", "none"), ("FCFS", "easy"), ("FCFS", "conservative"), ("WFP3", "easy"),
                             ("UNICEF", "none"), ("SJF", "conservative")],
)
def test_advancing_in_hour_slices_equals_one_run(kth: Workload, policy: str, backfill: str) -> None:
    w = kth.head(6_000)
    full = simulate(w, KTH_CAP, policy, backfill)
    eng = Engine(w, KTH_CAP, policy, backfill)
    t = 0.0
    used = 0.0
    while not eng.done:
        t += 3600.0
        eng.advance(t)
        integral, seconds = eng.take_utilisation()
        assert seconds == 3600.0
        used += integral[0, 0]
    assert np.array_equal(eng.start, full.start) and np.array_equal(eng.end, full.end)
    assert used == pytest.approx(float((w.cores * w.run).sum()))


def test_switching_rules_between_slices_keeps_a_valid_schedule(kth: Workload) -> None:
    """Objective switching: a different rule/mode each slice; every job still runs exactly once,
    never before its submission, never over capacity."""
    w = kth.head(4_000)
    eng = Engine(w, KTH_CAP, "FCFS", "easy")
    menu = [("FCFS", "easy"), ("LAF", "easy"), ("WFP3", "none"), ("SJF", "conservative"), ("UNICEF", "easy")]
    t, k = 0.0, 0
    while not eng.done:
        t += 3600.0
        policy, backfill = menu[k % len(menu)]
        eng.advance(t, policy, backfill)
        k += 1
    start, end = eng.start, eng.end
    assert not np.isnan(start).any() and np.all(start >= w.submit) and np.allclose(end - start, w.run)
    times = np.concatenate([start, end])
    delta = np.concatenate([w.cores, -w.cores])
    order = np.lexsort((delta, times))  # at equal times, releases first
    assert np.cumsum(delta[order]).max() <= 100


def test_pools_are_independent(kth: Workload) -> None:
    """Two partitions replayed together equal each replayed alone."""
    w = kth.head(5_000)
    part = (np.arange(len(w)) % 3 == 0).astype(np.int64)
    w2 = Workload(**{**w.__dict__, "partition": part, "partitions": ("p0", "p1"), "report": None})
    cap = Capacity.from_rows([{"partition": "p0", "cores": 100}, {"partition": "p1", "cores": 60}])
    for backfill in ("none", "easy", "conservative"):
        both = simulate(w2, cap, "WFP3", backfill)
        for p, cores in ((0, 100), (1, 60)):
            alone = simulate(w2.select(part == p), Capacity.single(cores), "WFP3", backfill)
            assert np.array_equal(both.start[part == p], alone.start, equal_nan=True), (backfill, p)


@pytest.mark.parametrize(("policy", "backfill"), [("FCFS", "easy"), ("WFP3", "easy"), ("SJF", "conservative"),
                                                  ("F1", "none")])
def test_a_snapshot_continued_equals_the_uninterrupted_run(kth: Workload, policy: str, backfill: str) -> None:
    """SPEC §7: copy the engine at epoch boundaries, continue the copy, same schedule job for job;
    the original is not disturbed by what the copy does (it runs another rule meanwhile)."""
    w = kth.head(4_000)
    full = simulate(w, KTH_CAP, policy, backfill)
    eng = Engine(w, KTH_CAP, policy, backfill)
    for k, t in enumerate((3600.0 * 24 * 3, 3600.0 * 24 * 9, 3600.0 * 24 * 20)):
        eng.advance(t)
        snap = eng.copy()
        other = eng.copy()
        other.advance(t + 86_400.0, "LAF", "none")  # a fork wandering off must not touch the others
        snap.run()
        assert np.array_equal(snap.start, full.start, equal_nan=True), k
        assert np.array_equal(snap.end, full.end, equal_nan=True), k
    eng.run()
    assert np.array_equal(eng.start, full.start) and np.array_equal(eng.end, full.end)


def test_the_planning_view_holds_only_queued_and_running_jobs(kth: Workload) -> None:
    """The planner's snapshot: the running jobs keep their starts, nothing new arrives, requested
    times act as run times; with exact estimates it continues exactly as the real run does for
    the jobs it holds, when no job arrives meanwhile."""
    w = kth.head(3_000)
    eng = Engine(w, KTH_CAP, "FCFS", "easy")
    eng.advance(3600.0 * 24 * 5)
    view, idx = eng.planning_view()
    st = eng.state
    assert set(idx.tolist()) == set(np.flatnonzero((st.status == 1) | (st.status == 2)).tolist())
    assert np.array_equal(view.start[: (st.status == 2).sum()], eng.start[idx[: (st.status == 2).sum()]])
    assert view.now == eng.now and not view.done
    view.run()
    assert view.done
    started_late = view.start[(st.status == 2).sum():]
    assert (started_late >= eng.now).all()  # queued jobs start after the snapshot instant
    ends = view.start + view.jobs.req
    assert np.allclose(view.end, ends)  # requested time as run time
    # exact estimates, no arrivals: the view equals the real continuation of those jobs
    exact = normalise(pl.DataFrame({"job_id": [str(i) for i in range(6)],
                                    "submit_time": [0, 0, 0, 10, 10, 12], "run_s": [100, 50, 30, 40, 80, 10],
                                    "timelimit_s": [100, 50, 30, 40, 80, 10], "req_cpus": [60, 50, 40, 30, 20, 90]},
                                   ).with_columns(pl.from_epoch("submit_time")))
    e2 = Engine(exact, KTH_CAP, "SJF", "easy")
    e2.advance(15.0)
    v2, i2 = e2.planning_view()
    v2.advance(np.inf, "SJF", "easy")
    e2.run()
    keep = np.isin(np.arange(len(exact)), i2)
    assert np.array_equal(v2.start, e2.start[i2]) and np.isnan(e2.start[~keep]).sum() == 0


def test_an_epoch_step_adds_up_what_the_python_reading_does(kth: Workload) -> None:
    """`EpochReplay.advance` (one compiled call: `epoch_step`) gives the schedule, the events and the
    epoch sums of `Engine.advance`, `take_utilisation` and the waiting summed in numpy, epoch after
    epoch, objectives switching (rules, backfilling modes, fit-first), on two pools."""
    from metapilot.models.simulator.epoch_replay import EpochReplay

    w = kth.head(6_000)
    part = (np.arange(len(w)) % 3 == 0).astype(np.int64)
    w = Workload(**{**w.__dict__, "partition": part, "partitions": ("p0", "p1"), "report": None})
    cap = Capacity.from_rows([{"partition": "p0", "cores": 70}, {"partition": "p1", "cores": 40}])
    rp = EpochReplay(w, cap)
    ref = Engine(w, cap, *rp.settings[rp._start][:2], fit_first=rp.settings[rp._start][2])
    rp.reset()
    ref.take_utilisation()
    rng = np.random.default_rng(3)
    submit = ref.jobs.submit
    arrivals = rp.arrival_idx
    for k in range(2_000):
        a = int(rng.integers(len(rp.settings))) if k % 5 == 0 else a if k else 0
        t0, t1 = k * 3600.0, (k + 1) * 3600.0
        queued0 = ref.queued()
        queued0 = queued0[submit[queued0] < t0]
        events = ref.advance(t1, *rp.settings[a])
        integral, _ = ref.take_utilisation()
        start = ref.start
        new = arrivals[(submit[arrivals] >= t0) & (submit[arrivals] < t1)]
        end0 = np.where(start[queued0] <= t1, start[queued0], t1)
        end1 = np.where(start[new] <= t1, start[new], t1)
        started = np.r_[queued0[start[queued0] <= t1], new[start[new] <= t1]]
        want = [*integral.sum(axis=0), (end0 - t0).sum() + np.maximum(end1 - submit[new], 0).sum(),
                max(0.0, float((start[started] - submit[started]).max(initial=0.0)))]
        before = rp.events
        got = rp.advance(a)
        assert rp.events - before == events
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-6)
        assert np.array_equal(rp.engine.start, ref.start, equal_nan=True)
