"""Hand-built scenarios whose start times are worked out on paper (SPEC §6 semantics).

Notation in comments: jN = job N (index = submit order), [a, b) = running interval,
pe = planned end (start + requested time), cap = pool capacity.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest
from metapilot.models.simulator import RULE_PAIRS, Capacity, Engine, simulate
from metapilot.transforms.workload import Workload


def workload(*jobs: tuple, partitions: tuple = (None,)) -> Workload:
    """jobs: (submit, run, req, cores[, gpus[, mem[, partition index]]])."""
    cols = list(zip(*[j + (0, 0, 0)[len(j) - 4:] if len(j) < 7 else j for j in jobs], strict=True))
    return Workload.from_arrays(
        submit=cols[0], run=cols[1], req_time=cols[2], cores=cols[3], gpus=cols[4], mem=cols[5],
        partition=cols[6], partitions=partitions,
    )


def starts(w: Workload, cap: Capacity, policy: str, backfill: str) -> list[float]:
    return simulate(w, cap, policy, backfill).start.tolist()


CAP10 = Capacity.single(10)


def test_no_backfill_blocks_behind_the_head_easy_does_not() -> None:
    w = workload((0, 10, 10, 6), (1, 5, 5, 6), (2, 2, 2, 2))
    # none: j1 does not fit (4 free) and blocks j2; both start when j0 ends at 10.
    assert starts(w, CAP10, "FCFS", "none") == [0, 10, 10]
    # EASY: head j1, shadow 10; j2 ends (planned) at 4 <= 10: backfilled at 2.
    assert starts(w, CAP10, "FCFS", "easy") == [0, 10, 2]
    # conservative: j1 reserved at 10 (4 free before); j2 fits [2, 4) beside j0.
    assert starts(w, CAP10, "FCFS", "conservative") == [0, 10, 2]


def test_easy_extra_resources() -> None:
    w = workload(
        (0, 100, 100, 6),  # j0 [0, 100)
        (1, 50, 50, 8),    # j1 head: shadow 100, 10 free then, extra 2
        (2, 500, 500, 2),  # runs past the shadow on the extra 2 cores: backfilled at 2, extra -> 0
        (3, 500, 500, 2),  # fits now (2 free) but runs past the shadow and no extra is left
        (4, 50, 50, 2),    # ends (54) before the shadow: backfilled at 4
    )
    assert starts(w, CAP10, "FCFS", "easy") == [0, 100, 2, 150, 4]
    # none: at 100 j1 (8) and j2 (2) start; j3 waits for j1's end at 150, j4 behind it.
    assert starts(w, CAP10, "FCFS", "none") == [0, 100, 100, 150, 150]


def test_easy_job_ending_exactly_at_the_shadow_time_is_backfilled() -> None:
    w = workload(
        (0, 100, 100, 6),  # j0 [0, 100)
        (1, 10, 10, 10),   # j1 head: shadow 100, extra 0
        (50, 50, 50, 2),   # pe 100 == shadow: allowed (ends by the shadow time)
        (60, 41, 41, 2),   # pe 101 > shadow, extra 0: not backfilled
    )
    # At 100, j0 and j2 both end; j1 starts at 100, j3 after it at 110.
    assert starts(w, CAP10, "FCFS", "easy") == [0, 100, 50, 110]


def test_submissions_before_completions_at_the_same_instant() -> None:
    w = workload(
        (0, 10, 10, 5),    # j0 [0, 10), pe 10
        (0, 10, 20, 5),    # j1 [0, 10), pe 20: its completion at 10 releases [10, 20)
        (5, 100, 100, 10), # j2 head from 5: shadow 20 (j1's pe), extra 0
        (10, 5, 5, 5),     # submitted at 10, handled before the completions at 10
    )
    # Submission step at 10: j0 (pe 10) holds nothing, j1 still holds 5: free 5; head j2 does
    # not fit; j3 ends at 15 <= shadow 20: backfilled at 10. Completions of j0, j1 follow; j2
    # then waits for j3 (pe 15) and starts at 15. (Completions first would start j2 at 10.)
    assert starts(w, CAP10, "FCFS", "easy") == [0, 0, 15, 10]


def test_completions_at_the_same_instant_in_start_order() -> None:
    w = workload(
        (0, 5, 5, 6),       # j0 [0, 5)
        (0, 10, 50, 6),     # j1: waits for j0, starts 5, ends 15, pe 55
        (1, 14, 14, 4),     # j2: head j1 shadow 5, extra 4: backfilled at 1, ends 15 (pe 15)
        (6, 100, 100, 10),  # j3 head from 6
        (7, 30, 30, 4),     # j4 waits: nothing free
    )
    # At 15, j2 (started 1) completes before j1 (started 5), though j1 has the lower index.
    # After j2: free 4 (j2 pe 15 held nothing); head j3 shadow 55 (j1's pe), extra 0; j4 ends
    # at 45 <= 55: backfilled at 15. After j1: free 6, head j3 waits for j4 (pe 45).
    # (In job-index order j1 would complete first, free 10, and j3 would start at 15.)
    assert starts(w, CAP10, "FCFS", "easy") == [0, 5, 1, 45, 15]


def test_planned_end_at_now_holds_nothing_before_its_completion_is_handled() -> None:
    w = workload(
        (0, 10, 10, 10),   # j0 [0, 10), pe 10
        (1, 50, 50, 10),   # j1 (req 50) waits for j0
        (10, 1, 100, 1),   # j2 (req 100) submitted at 10
        (10, 5, 5, 10),    # j3 (req 5) submitted at 10, after j2
    )
    # SJF, no backfill. At 10 the two submissions come before j0's completion. At j2's step
    # j0 (pe 10) already holds nothing: free 10, SJF order j1, j2: j1 starts at 10 (j2 does
    # not fit beside it). j3 then goes first and waits for j1 (60), j2 for j3 (65). Had j0 held its cores until its completion event,
    # j3 (submitted meanwhile, req 5 < 50) would have started first at 10 and j1 at 15.
    assert starts(w, CAP10, "SJF", "none") == [0, 10, 65, 60]


def test_conservative_reservations_move_forward_after_early_ends() -> None:
    w = workload(
        (0, 10, 100, 10),  # j0 [0, 10), reserved to 100
        (1, 20, 20, 5),    # j1 reserved at 100
        (2, 20, 50, 5),    # j2 reserved at 100 beside j1
        (3, 10, 10, 10),   # j3: [100,120) 0 free, [120,150) 5 free: reserved at 150
    )
    # At 10 j0 ends early: j1 -> 10, j2 -> 10, j3 -> 60 (j2 planned to 60).
    # At 30 j1 ends on time (nothing to move: j3 needs 10, j2 holds 5 until 60), then j2 ends
    # early: its [30, 60) is released and j3 moves to 30.
    assert starts(w, CAP10, "FCFS", "conservative") == [0, 10, 10, 30]


def test_conservative_backfills_into_a_hole_without_delaying_reservations() -> None:
    w = workload(
        (0, 100, 100, 6),  # j0 [0, 100)
        (1, 50, 50, 10),   # j1 reserved at 100
        (2, 99, 99, 4),    # fits [2, 101)? no: overlaps j1 at 100 with 4 + 10 > 10 -> after j1: 150
        (3, 97, 97, 4),    # fits [3, 100): starts now
    )
    assert starts(w, CAP10, "FCFS", "conservative") == [0, 100, 150, 3]
    # EASY allows j2 neither (pe 101 > shadow 100, extra 0) but does start j3.
    assert starts(w, CAP10, "FCFS", "easy") == [0, 100, 150, 3]


def test_conservative_reservation_due_at_submission_starts_then() -> None:
    w = workload((0, 5, 5, 4), (0, 5, 5, 4), (0, 5, 5, 4))
    # Two fit at 0; the third is reserved at 5.
    assert starts(w, CAP10, "FCFS", "conservative") == [0, 0, 5]


def test_multi_resource_job_fits_only_when_all_three_fit() -> None:
    cap = Capacity.from_rows([{"partition": "*", "cores": 10, "gpus": 2, "mem_mib": 100}])
    w = workload(
        (0, 10, 10, 2, 2, 10),   # j0 takes both GPUs
        (1, 10, 10, 2, 1, 10),   # j1: cores and memory free, no GPU until 10
        (2, 10, 10, 2, 0, 50),   # j2: CPU job
        (3, 10, 10, 2, 0, 60),   # j3: memory: 10 + 50 + 60 > 100 while j2 runs
    )
    # none: j1 blocks j2 and j3 until 10; then j1 and j2 start, j3 (60 MiB) waits for them.
    assert starts(w, cap, "FCFS", "none") == [0, 10, 10, 20]
    # EASY: head j1, shadow 10, extra (8 cores, 1 GPU, 90 MiB); j2 runs past 10 within the
    # extra: backfilled at 2. j3 does not fit now (10 + 50 + 60 MiB > 100). At 10 j1 starts;
    # j3 waits for j2's 50 MiB (planned end 12). Conservative: same slots.
    assert starts(w, cap, "FCFS", "easy") == [0, 10, 2, 12]
    assert starts(w, cap, "FCFS", "conservative") == [0, 10, 2, 12]


def test_a_job_that_can_never_fit_is_reported_not_replayed() -> None:
    w = workload((0, 10, 10, 20), (1, 10, 10, 5), (2, 10, 10, 1, 1))  # j2 wants a GPU: none
    for policy, backfill in RULE_PAIRS:
        r = simulate(w, CAP10, policy, backfill)
        assert r.cannot_fit.tolist() == [0, 2]
        assert r.counters["cannot_fit"] == 2
        assert math.isnan(r.start[0]) and r.start[1] == 1
    assert simulate(w, CAP10).cannot_fit_ids == ["0", "2"]


def test_partitions_pool_their_own_resources_and_fall_back_to_the_whole_cluster() -> None:
    cap = Capacity.from_rows([{"partition": "a", "cores": 4, "gpus": 0}, {"partition": "*", "cores": 10}])
    parts = ("a", "b", None)
    w = workload(
        (0, 10, 10, 4, 0, 0, 0),  # a: fills a
        (1, 10, 10, 4, 0, 0, 0),  # a: waits for j0
        (2, 10, 10, 8, 0, 0, 1),  # b -> '*'
        (3, 10, 10, 2, 0, 0, 2),  # no partition -> '*'
        (4, 10, 10, 6, 0, 0, 0),  # a: can never fit 4 cores
        partitions=parts,
    )
    r = simulate(w, cap, "FCFS", "none")
    assert r.start[:4].tolist() == [0, 10, 2, 3]
    assert r.pool.tolist() == [0, 0, 1, 1, -1]
    assert r.cannot_fit.tolist() == [4]
    # A partition with no row and no '*' row cannot fit anywhere.
    only_a = Capacity.from_rows([{"partition": "a", "cores": 4}])
    assert simulate(w, only_a).cannot_fit.tolist() == [2, 3, 4]


def test_wfp3_order_depends_on_the_current_wait() -> None:
    w = workload(
        (0, 100, 100, 10),  # j0 [0, 100)
        (10, 10, 1000, 5),  # j1: waits 90 at t=100: (90/1000)^3 * 5 = 0.0036
        (50, 10, 100, 5),   # j2: waits 50 at t=100: (50/100)^3 * 5 = 0.625 -> first
        (60, 10, 10, 10),   # j3: waits 40: (40/10)^3 * 10 = 640 -> first of all
    )
    # At 100: j3 first (10 cores, until 110); at 110 j2 ((60/100)^3*5 = 1.08) before j1
    # ((100/1000)^3*5 = 0.005): j2 and j1 both fit (5 + 5) and start at 110.
    assert starts(w, CAP10, "WFP3", "none") == [0, 110, 110, 100]
    # FCFS would run j1, j2 at 100 and j3 at 110.
    assert starts(w, CAP10, "FCFS", "none") == [0, 100, 100, 110]


@pytest.mark.parametrize("policy", ["SJF", "SAF", "LAF", "F1", "UNICEF"])
def test_static_and_dynamic_rules_order_the_queue(policy: str) -> None:
    w = workload(
        (0, 100, 100, 10),   # j0 blocks everything until 100
        (1, 10, 300, 2),     # long, small
        (2, 10, 50, 8),      # short, big
    )
    # At 100 one of j1/j2 is first; both fit (2 + 8 = 10) and start at 100 whatever the order.
    assert starts(w, CAP10, policy, "none") == [0, 100, 100]
    big = workload((0, 100, 100, 10), (1, 10, 300, 6), (2, 10, 50, 8))
    s = starts(big, CAP10, policy, "none")
    first = {"SJF": 2, "SAF": 2, "LAF": 1, "F1": 1, "UNICEF": 2}[policy]
    # F1: log10(300)*6 + 870*log10(2) = 276.8 < log10(50)*8 + 870*log10(3) = 428.7 -> j1.
    # UNICEF at 100: j1 -99/(log2 6 * 300) = -0.128, j2 -98/(3 * 50) = -0.653 -> j2 first.
    assert s[first] == 100 and s[3 - first] == 110


def test_fit_first_puts_jobs_that_fit_now_before_the_head() -> None:
    w = workload(
        (0, 100, 100, 6),   # j0 [0, 100)
        (1, 50, 200, 8),    # j1: LAF first (area 1600 > 800), does not fit: EASY head, shadow 100, extra 2
        (2, 200, 200, 4),   # j2 fits now (4 free) but runs past the shadow on more than the extra
    )
    # LAF + EASY: j2 may not delay j1; j1 runs at 100, j2 after it at 150.
    assert starts(w, CAP10, "LAF", "easy") == [0, 100, 150]
    # Fit-first (the U objective): j2 fits the free cores when the step begins, so it goes
    # first and starts at 2; j1 then waits for j2's planned end, 202.
    r = simulate(w, CAP10, "LAF", "easy", fit_first=True)
    assert r.start.tolist() == [0, 202, 2]
    # Switching the flag per slice: fit-first only from t = 50 on -> same as plain up to then.
    eng = Engine(w, CAP10, "LAF", "easy")
    eng.advance(50)
    eng.advance(1000, fit_first=True)
    assert eng.start.tolist() == [0, 100, 150]


def test_gym_accessors_report_queue_running_and_utilisation() -> None:
    w = workload((0, 100, 100, 6), (10, 50, 50, 8), (20, 30, 30, 4))
    eng = Engine(w, CAP10, "FCFS", "none")
    eng.advance(30)
    assert eng.now == 30
    assert eng.running().tolist() == [0] and eng.queued().tolist() == [1, 2]
    view = eng.queue_view()
    assert view["wait"].tolist() == [20, 10] and view["cores"].tolist() == [8, 4]
    assert eng.used()[0].tolist() == [6, 0, 0]
    assert eng.running_view()["planned_end"].tolist() == [100]
    integral, seconds = eng.take_utilisation()
    assert seconds == 30 and integral[0, 0] == 6 * 30
    eng.advance(200)
    integral, seconds = eng.take_utilisation()
    # j0 [0,100) 6 cores, j1 [100,150) 8, j2 [150,180) 4 -> 6*70 + 8*50 + 4*30 over [30, 200)
    assert seconds == 170 and integral[0, 0] == 6 * 70 + 8 * 50 + 4 * 30
    assert eng.done


def test_metrics_from_a_small_schedule() -> None:
    w = workload((0, 100, 100, 10), (0, 5, 5, 10))
    w = Workload(**{**w.__dict__, "window_start": datetime(2024, 1, 1, tzinfo=UTC)})
    r = simulate(w, CAP10, "FCFS", "none")
    m = r.metrics().row(0, named=True)
    assert m["jobs"] == 2 and m["mean_wait"] == 50 and m["max_wait"] == 100
    # bsld: j0 max(1, 100/100) = 1; j1 (100 + 5) / max(5, 10) = 10.5
    assert m["mean_bsld"] == pytest.approx(5.75)
    assert m["util_cores"] == pytest.approx((10 * 100 + 10 * 5) / (10 * 105))
    assert m["util_gpus"] is None and m["util_mem"] is None
    assert m["makespan"] == 105
    wk = r.weekly()
    assert wk["week"].to_list() == ["2024-W01"] and wk["jobs"].to_list() == [2]
    assert wk["util_cores"][0] == pytest.approx(m["util_cores"])
    assert np.isclose(wk["mean_wait"][0], 50)


def test_an_empty_workload_replays_to_nothing() -> None:
    w = Workload.from_arrays(submit=[], run=[])
    for policy, backfill in RULE_PAIRS[::5]:
        r = simulate(w, CAP10, policy, backfill)
        assert r.start.size == 0 and r.events == 0
    assert r.metrics()["jobs"].to_list() == [0]
