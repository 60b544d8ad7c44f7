-- Daily figures of the week ($cluster, $week_start): per partition (mart_daily) and for the whole
-- cluster (partition '*', mart_daily_cluster). Utilisation = core-hours / (capacity x 24 h).
SELECT 'partition' AS scope, partition, period_start AS day_start, period_label AS day, jobs_submitted, jobs_started,
       cpu_hours, gpu_hours, capacity_cores, capacity_gpus, utilisation_cpu, utilisation_gpu, wait_mean_s, wait_max_s
FROM mart_daily
WHERE cluster = $cluster
  AND period_start >= $week_start::TIMESTAMPTZ AND period_start < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY
UNION ALL
SELECT 'cluster' AS scope, partition, period_start AS day_start, period_label AS day, jobs_submitted, jobs_started,
       cpu_hours, gpu_hours, capacity_cores, capacity_gpus, utilisation_cpu, utilisation_gpu, wait_mean_s, wait_max_s
FROM mart_daily_cluster
WHERE cluster = $cluster
  AND period_start >= $week_start::TIMESTAMPTZ AND period_start < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY
ORDER BY scope DESC, partition NULLS FIRST, day_start;
