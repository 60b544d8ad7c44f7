-- Who holds a cluster's steering lock ($cluster), if anyone: the latest row written.
SELECT token, holder, host, pid, mode, taken_at, beat_at
FROM steer_lock
WHERE cluster = $cluster
ORDER BY rowid DESC
LIMIT 1;
