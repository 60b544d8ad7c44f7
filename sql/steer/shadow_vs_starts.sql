-- Each dry-run cycle's ranking ($cluster, since $since) beside when the jobs really started (jobs, loaded by
-- collect): the job id as squeue showed it, or the array's id for the whole array.
SELECT s.cycle_id, s.shadow_at, s.group_key, s.job_id, s.rank, s.objective,
       min(j.start_time) AS start_time
FROM steer_shadow s
LEFT JOIN jobs j ON j.cluster = s.cluster
               AND (j.job_id = s.job_id OR j.array_job_id = s.job_id)
               AND j.start_time >= s.shadow_at
WHERE s.cluster = $cluster AND s.shadow_at >= $since
GROUP BY ALL
ORDER BY s.cycle_id, s.group_key, s.rank;
