-- Wait of the jobs started in the week ($cluster, $week_start), by XDMoD job-size class (allocated
-- cores), whole cluster: mart_wait_by_size_weekly_cluster (classes without started jobs have no row).
SELECT size_class, size_order, jobs_started, wait_mean_s, wait_median_s, wait_p95_s, wait_max_s
FROM mart_wait_by_size_weekly_cluster
WHERE cluster = $cluster AND period_start = $week_start::TIMESTAMPTZ
ORDER BY size_order;
