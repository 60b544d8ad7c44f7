-- Week at a glance ($cluster, $week_start = the ISO week's Monday 00:00 UTC): per partition
-- (scope 'partition', from mart_weekly) and for the whole cluster (scope 'cluster', partition '*',
-- from mart_weekly_cluster), the week's jobs, hours, utilisation and waits (030_mart_periods.sql
-- defines them: waits are over the jobs STARTED in the week), next to the four weeks before:
--   prev_weeks         how many of the four weeks are in the data (fewer at the start of a log)
--   prev_jobs_submitted, prev_cpu_hours, prev_gpu_hours, prev_utilisation_cpu/gpu: averages per week
--   prev_wait_mean_s   the mean wait of all jobs started in the four weeks (pooled: sum of waits / jobs)
--   prev_wait_p95_s    the average of the four weekly p95 waits (weeks with started jobs)
--   prev_wait_max_s    the longest wait of any job started in the four weeks
WITH w AS (
    SELECT 'partition' AS scope, * FROM mart_weekly WHERE cluster = $cluster
    UNION ALL BY NAME
    SELECT 'cluster' AS scope, * FROM mart_weekly_cluster WHERE cluster = $cluster
),
cur AS (
    SELECT * FROM w WHERE period_start = $week_start::TIMESTAMPTZ
),
prev AS (
    SELECT
        scope,
        partition,
        count(*) AS prev_weeks,
        avg(jobs_submitted) AS prev_jobs_submitted,
        avg(cpu_hours) AS prev_cpu_hours,
        avg(gpu_hours) AS prev_gpu_hours,
        avg(utilisation_cpu) AS prev_utilisation_cpu,
        avg(utilisation_gpu) AS prev_utilisation_gpu,
        sum(wait_hours_per_started_job * jobs_started) * 3600.0 / nullif(sum(jobs_started), 0) AS prev_wait_mean_s,
        avg(wait_p95_s) AS prev_wait_p95_s,
        max(wait_max_s) AS prev_wait_max_s
    FROM w
    WHERE period_start >= $week_start::TIMESTAMPTZ - INTERVAL 28 DAY
      AND period_start < $week_start::TIMESTAMPTZ
    GROUP BY ALL
)
SELECT
    cur.scope,
    cur.partition,
    cur.period_label AS week,
    cur.jobs_submitted,
    cur.jobs_started,
    cur.jobs_ended,
    cur.cpu_hours,
    cur.gpu_hours,
    cur.capacity_cores,
    cur.capacity_gpus,
    cur.utilisation_cpu,
    cur.utilisation_gpu,
    cur.wait_mean_s,
    cur.wait_median_s,
    cur.wait_p95_s,
    cur.wait_max_s,
    coalesce(prev.prev_weeks, 0) AS prev_weeks,
    prev.prev_jobs_submitted,
    prev.prev_cpu_hours,
    prev.prev_gpu_hours,
    prev.prev_utilisation_cpu,
    prev.prev_utilisation_gpu,
    prev.prev_wait_mean_s,
    prev.prev_wait_p95_s,
    prev.prev_wait_max_s
FROM cur
LEFT JOIN prev ON prev.scope = cur.scope AND prev.partition IS NOT DISTINCT FROM cur.partition
ORDER BY cur.scope = 'cluster', cur.partition NULLS FIRST;
