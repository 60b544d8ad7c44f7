-- The latest cycles of a cluster ($cluster, $n).
SELECT started_at, mode, decision, objective, pending, eligible, changed, failed, seconds, slurm_seconds, status, message
FROM steer_cycles
WHERE cluster = $cluster
ORDER BY started_at DESC
LIMIT $n;
