-- The live tail guard's trips on a cluster since $since ($cluster; live or dry-run, $mode), as written: when, and the job whose wait
-- tripped it (NULL: the utilisation floor). A job trips it once; a trip pauses steering for a while.
SELECT started_at, guard_job
FROM steer_cycles
WHERE cluster = $cluster AND mode = $mode AND status = 'guard' AND started_at >= $since
ORDER BY rowid;
