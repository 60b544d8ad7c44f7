-- The cluster's steering lock taken ($cluster, $token, $holder, $host, $pid, $mode, $at), after lock_free.sql.
INSERT INTO steer_lock (cluster, token, holder, host, pid, mode, taken_at, beat_at)
VALUES ($cluster, $token, $holder, $host, $pid, $mode, $at, $at);
