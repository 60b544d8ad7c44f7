-- What the loop did to one job ($cluster, $job_id): every setting, newest first, with its cycle.
SELECT s.job_id, s.site_factor, s.rank, s.group_key, s.objective, s.set_at, s.released_at, c.decision, c.guard_h,
       c.mode, (SELECT count(*) FROM steered_jobs g
                WHERE g.cycle_id = s.cycle_id AND g.group_key IS NOT DISTINCT FROM s.group_key) AS group_size
FROM steered_jobs s
LEFT JOIN steer_cycles c ON c.cycle_id = s.cycle_id AND c.cluster = s.cluster
WHERE s.cluster = $cluster AND s.job_id = $job_id
ORDER BY s.set_at DESC;
