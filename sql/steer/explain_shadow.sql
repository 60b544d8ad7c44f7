-- A dry-run's view of one job ($cluster, $job_id), newest first.
SELECT job_id, site_factor, rank, group_key, objective, shadow_at
FROM steer_shadow
WHERE cluster = $cluster AND job_id = $job_id
ORDER BY shadow_at DESC
LIMIT 1;
