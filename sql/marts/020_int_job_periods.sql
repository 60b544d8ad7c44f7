-- Marts, layer 2 (intermediate): job x period overlaps.
--
-- Every job with a run interval [start_time, end_time) gets one row per UTC day (ISO week) that the
-- interval touches, with the part of the interval inside that period (overlap_s) and the
-- resource-hours it gives: a job running across midnight splits its hours between the two days,
-- exactly (Open XDMoD's published CPU hours per day for its reference log agree to their 4
-- decimals: tests/test_marts.py). The rows are generated with
-- range(period of start, end, step) + unnest: a job gives as many rows as periods it spans, never
-- one per second. Jobs without an end (still running) or that never started give no rows.
--
-- `grain` is 'day' or 'week' everywhere in the marts.

CREATE OR REPLACE MACRO mp_period_step(grain) AS
    CASE grain WHEN 'day' THEN INTERVAL 1 DAY WHEN 'week' THEN INTERVAL 7 DAY END;

CREATE OR REPLACE MACRO mp_period_hours(grain) AS
    CASE grain WHEN 'day' THEN 24.0 WHEN 'week' THEN 168.0 END;

-- Label of a period given as a naive UTC timestamp: '2016-12-31' for a day, ISO '2016-W52' for a week.
CREATE OR REPLACE MACRO mp_period_label(grain, period_ts) AS
    CASE grain WHEN 'day' THEN strftime(period_ts, '%Y-%m-%d') ELSE strftime(period_ts, '%G-W%V') END;

CREATE OR REPLACE MACRO int_job_periods(grain) AS TABLE
SELECT
    cluster,
    partition,
    job_id,
    submit_time,
    size_class,
    size_order,
    alloc_cpus,
    alloc_nodes,
    alloc_gpus,
    period_ts,                                   -- naive UTC period start
    timezone('UTC', period_ts) AS period_start,  -- the same as TIMESTAMPTZ
    overlap_s,
    alloc_cpus * overlap_s / 3600.0 AS cpu_hours,
    alloc_gpus * overlap_s / 3600.0 AS gpu_hours,
    alloc_nodes * overlap_s / 3600.0 AS node_hours
FROM (
    SELECT
        *,
        greatest(
            0,
            epoch_us(least(end_ts, period_ts + mp_period_step(grain)))
                - epoch_us(greatest(start_ts, period_ts))
        ) / 1e6 AS overlap_s
    FROM (
        SELECT
            *,
            unnest(range(date_trunc(grain, start_ts), end_ts, mp_period_step(grain))) AS period_ts
        FROM stg_jobs
        WHERE is_ended
    )
);

CREATE OR REPLACE VIEW int_job_days AS SELECT * FROM int_job_periods('day');

CREATE OR REPLACE VIEW int_job_weeks AS SELECT * FROM int_job_periods('week');
