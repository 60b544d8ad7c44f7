-- Marts, layer 3: the per-period statistics, as table macros that the mart views instantiate
-- (040_mart_daily.sql, 050_mart_weekly.sql). grain: 'day' | 'week'; by_partition: true for one row
-- per (cluster, partition, period), false for the whole cluster (partition = '*').
--
-- Definitions (Open XDMoD's Jobs realm):
--   jobs_submitted   jobs whose submit_time falls in the period (all jobs, also those that never ran;
--                    XDMoD's "Number of Jobs Submitted" only counts jobs that also ran in the period)
--   jobs_started     jobs whose start_time falls in the period
--   jobs_ended       jobs that ran and whose end_time falls in the period
--   cpu/gpu/node_hours  alloc_cpus/alloc_gpus/alloc_nodes x the part of [start, end) inside the
--                    period, over all jobs that ran in it (not only those that ended in it);
--                    jobs still running (no end_time) are left out until they end
--   capacity_*       see 025_int_period_grid.sql
--   utilisation_cpu  cpu_hours / (capacity_cores x hours in the period), a fraction (XDMoD shows %);
--   utilisation_gpu  gpu_hours / (capacity_gpus x hours); NULL when the capacity is unknown or 0
--   wait_*           over the jobs STARTED in the period, wait = start - submit (s); median and p95
--                    interpolate linearly (quantile_cont, numpy's default)
--   wait_hours_per_started_job  sum(wait of jobs started in the period) / 3600 / jobs_started
--                    (XDMoD's "Wait Hours: Per Job")
--   expansion_factor sum(wait + run) / sum(run) over the jobs ENDED in the period: the ratio of the
--                    total turnaround to the total run time of the period's finished work. (XDMoD's
--                    "User Expansion Factor" is instead a mean of per-job (wait+run)/run weighted by
--                    nodes x run time inside the period; that figure is not this column.) NULL when
--                    no job ended or the ended jobs ran 0 s in total.
-- Periods without started (ended) jobs have NULL wait statistics (expansion factor); counts and
-- hours are 0.

CREATE OR REPLACE MACRO int_period_metrics(grain, by_partition) AS TABLE
WITH submitted AS (
    SELECT cluster, mp_partition_key(by_partition, partition) AS partition,
           date_trunc(grain, submit_ts) AS period_ts,
           count(*) AS jobs_submitted
    FROM stg_jobs
    GROUP BY ALL
),
started AS (
    SELECT cluster, mp_partition_key(by_partition, partition) AS partition,
           date_trunc(grain, start_ts) AS period_ts,
           count(*) AS jobs_started,
           sum(wait_s) AS wait_sum_s,
           avg(wait_s) AS wait_mean_s,
           quantile_cont(wait_s, 0.5) AS wait_median_s,
           quantile_cont(wait_s, 0.95) AS wait_p95_s,
           max(wait_s) AS wait_max_s
    FROM stg_jobs
    WHERE is_started
    GROUP BY ALL
),
ended AS (
    SELECT cluster, mp_partition_key(by_partition, partition) AS partition,
           date_trunc(grain, end_ts) AS period_ts,
           count(*) AS jobs_ended,
           sum(wait_s + run_s) AS turnaround_sum_s,
           sum(run_s) AS run_sum_s
    FROM stg_jobs
    WHERE is_ended
    GROUP BY ALL
),
hours AS (
    SELECT cluster, mp_partition_key(by_partition, partition) AS partition,
           period_ts,
           sum(cpu_hours) AS cpu_hours,
           sum(gpu_hours) AS gpu_hours,
           sum(node_hours) AS node_hours
    FROM int_job_periods(grain)
    GROUP BY ALL
)
SELECT
    g.cluster,
    g.partition,
    g.period_ts,
    g.period_start,
    g.capacity_cores,
    g.capacity_gpus,
    coalesce(su.jobs_submitted, 0) AS jobs_submitted,
    coalesce(st.jobs_started, 0) AS jobs_started,
    coalesce(en.jobs_ended, 0) AS jobs_ended,
    coalesce(h.cpu_hours, 0.0) AS cpu_hours,
    coalesce(h.gpu_hours, 0.0) AS gpu_hours,
    coalesce(h.node_hours, 0.0) AS node_hours,
    st.wait_sum_s,
    st.wait_mean_s,
    st.wait_median_s,
    st.wait_p95_s,
    st.wait_max_s,
    en.turnaround_sum_s,
    en.run_sum_s
FROM int_period_capacity(grain, by_partition) g
LEFT JOIN submitted su
    ON su.cluster = g.cluster AND su.partition IS NOT DISTINCT FROM g.partition AND su.period_ts = g.period_ts
LEFT JOIN started st
    ON st.cluster = g.cluster AND st.partition IS NOT DISTINCT FROM g.partition AND st.period_ts = g.period_ts
LEFT JOIN ended en
    ON en.cluster = g.cluster AND en.partition IS NOT DISTINCT FROM g.partition AND en.period_ts = g.period_ts
LEFT JOIN hours h
    ON h.cluster = g.cluster AND h.partition IS NOT DISTINCT FROM g.partition AND h.period_ts = g.period_ts;

-- The mart columns (a contract: mart_daily, mart_weekly, mart_daily_cluster, mart_weekly_cluster).
CREATE OR REPLACE MACRO mart_periods(grain, by_partition) AS TABLE
SELECT
    cluster,
    partition,
    period_start,
    mp_period_label(grain, period_ts) AS period_label,
    jobs_submitted,
    jobs_started,
    jobs_ended,
    cpu_hours,
    gpu_hours,
    node_hours,
    capacity_cores,
    capacity_gpus,
    cpu_hours / (nullif(capacity_cores, 0) * mp_period_hours(grain)) AS utilisation_cpu,
    gpu_hours / (nullif(capacity_gpus, 0) * mp_period_hours(grain)) AS utilisation_gpu,
    wait_mean_s,
    wait_median_s,
    wait_p95_s,
    wait_max_s,
    wait_sum_s / 3600.0 / nullif(jobs_started, 0) AS wait_hours_per_started_job,
    turnaround_sum_s / nullif(run_sum_s, 0) AS expansion_factor
FROM int_period_metrics(grain, by_partition);

-- Wait by job-size class (sparse: only (period, class) pairs with started jobs).
CREATE OR REPLACE MACRO mart_wait_by_size(grain, by_partition) AS TABLE
SELECT
    cluster,
    mp_partition_key(by_partition, partition) AS partition,
    timezone('UTC', date_trunc(grain, start_ts)) AS period_start,
    mp_period_label(grain, date_trunc(grain, start_ts)) AS period_label,
    size_class,
    size_order,
    count(*) AS jobs_started,
    avg(wait_s) AS wait_mean_s,
    quantile_cont(wait_s, 0.5) AS wait_median_s,
    quantile_cont(wait_s, 0.95) AS wait_p95_s,
    max(wait_s) AS wait_max_s
FROM stg_jobs
WHERE is_started
GROUP BY ALL;
