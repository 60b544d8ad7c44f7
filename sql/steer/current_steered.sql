-- The jobs whose site factor the loop set and has not released ($cluster): the latest value per job.
SELECT job_id, site_factor, rank, group_key, objective, cycle_id, set_at
FROM steered_jobs
WHERE cluster = $cluster AND released_at IS NULL
QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY set_at DESC) = 1;
