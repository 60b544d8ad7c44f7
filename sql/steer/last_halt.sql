-- The cluster's latest halt or resume ($cluster): steering stays off after a guard's halt until resumed.
SELECT status, started_at, message
FROM steer_cycles
WHERE cluster = $cluster AND status IN ('halted', 'resumed')
ORDER BY started_at DESC
LIMIT 1;
