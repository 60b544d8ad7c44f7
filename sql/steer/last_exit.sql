-- How the cluster's last live run ended ($cluster): its latest live or release row, in the order the rows
-- were written (rowid: a clock set back must not reorder them). 'kept' is a clean --once exit, whose
-- factors the next start carries on from; anything else with jobs still set is a crash.
SELECT status, started_at, message
FROM steer_cycles
WHERE cluster = $cluster AND mode IN ('live', 'release')
ORDER BY rowid DESC
LIMIT 1;
