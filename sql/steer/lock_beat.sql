-- The holder's heartbeat ($cluster, $token, $at): no row updated means the lock is no longer its own.
UPDATE steer_lock SET beat_at = $at
WHERE cluster = $cluster AND token = $token;
