"""How `pipeline` splits a history into training, checkpoint and held-out windows (SPEC §7)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metapilot.transforms.windows import split_history, week_floor

T0 = datetime(2012, 2, 1, 13, 30, tzinfo=timezone.utc)  # a Wednesday


def weeks_between(first: datetime, last: datetime) -> list[datetime]:
    w, out = week_floor(first), []
    while w <= last:
        out.append(w)
        w += timedelta(weeks=1)
    return out


@settings(max_examples=60, deadline=None)
@given(days=st.integers(min_value=42, max_value=2000), hours=st.integers(min_value=0, max_value=23))
def test_a_log_without_gaps_splits_as_the_calendar_does(days, hours):
    first, last = T0, T0 + timedelta(days=days, hours=hours)
    assert split_history(first, last, busy_weeks=weeks_between(first, last)) == split_history(first, last)


def test_a_gap_of_months_leaves_no_window_without_jobs():
    # jobs for 40 weeks, none for a year (an outage, a break in the accounting), then 30 weeks more
    busy = [week_floor(T0) + timedelta(weeks=k) for k in (*range(40), *range(92, 122))]
    first, last = T0, busy[-1] + timedelta(days=4)
    calendar = split_history(first, last)
    split = split_history(first, last, busy_weeks=busy)

    def has_jobs(window):
        return any(window[0] <= w < window[1] for w in busy)

    assert not has_jobs(calendar[1])  # the split by the calendar puts the checkpoint weeks in the gap
    assert all(has_jobs(w) for w in split)
    assert split[0][0] == calendar[0][0] and split[2][1] == last
    assert split[0][1] == split[1][0] and split[1][1] == split[2][0]
    # from the first whole week on: 68 weeks and 4 days with jobs; 60% of that (41.1 weeks) trains,
    # up to 75% (51.4) chooses the checkpoint; boundaries fall on week starts
    assert sum(split[0][0] <= w < split[0][1] for w in busy) == 41
    assert sum(split[1][0] <= w < split[1][1] for w in busy) == 10


def test_six_weeks_with_jobs_are_needed_whatever_the_span():
    busy = [week_floor(T0) + timedelta(weeks=k) for k in (0, 1, 2, 30, 31)]
    with pytest.raises(ValueError, match="six weeks with jobs"):
        split_history(T0, busy[-1] + timedelta(days=3), busy_weeks=busy)
    with pytest.raises(ValueError, match="at least six weeks"):
        split_history(T0, T0 + timedelta(days=30))


def test_one_job_with_a_clock_years_late_leaves_the_split_of_the_rest():
    """A single submit five years after the log (a bad clock) made the calendar split train on years
    without jobs, and `pipeline` failed to tune on them; over the weeks with jobs it moves a boundary
    by at most a week."""
    weeks = [week_floor(T0) + timedelta(weeks=k) for k in range(48)]
    last = weeks[-1] + timedelta(days=3)
    stray = week_floor(last + timedelta(days=5 * 365))
    clean = split_history(T0, last, busy_weeks=weeks)
    late = split_history(T0, stray + timedelta(hours=5), busy_weeks=[*weeks, stray])
    assert abs(late[0][1] - clean[0][1]) <= timedelta(weeks=1) and abs(late[1][1] - clean[1][1]) <= timedelta(weeks=1)
    assert split_history(T0, stray + timedelta(hours=5))[1][0] > last  # by the calendar: the checkpoint weeks are empty


def test_week_numbers_agree_with_the_busy_weeks_query(mem_con):
    """`week_number` (the benchmarks' arrays) and sql/jobs/busy_weeks.sql (the warehouse) number
    weeks alike, and `week_start` gives each one's Monday."""
    from metapilot.ground.paths import sql_text
    from metapilot.transforms.windows import week_number, week_start

    times = [datetime(1970, 1, 5, tzinfo=timezone.utc), datetime(1996, 10, 6, 23, 59, 59, tzinfo=timezone.utc),
             datetime(1996, 10, 7, tzinfo=timezone.utc), T0, datetime(2015, 3, 9, 12, tzinfo=timezone.utc)]
    mem_con.execute("CREATE TEMP TABLE jobs AS SELECT 'c' AS cluster, unnest($t)::TIMESTAMPTZ AS submit_time",
                    {"t": times})
    weeks = [w for (w,) in mem_con.execute(sql_text("jobs/busy_weeks.sql"), {"cluster": "c"}).fetchall()]
    assert weeks == sorted({week_number(t.timestamp()) for t in times})
    assert [week_start(w) for w in weeks] == sorted({week_floor(t) for t in times})
