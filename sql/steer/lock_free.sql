-- The cluster's steering lock freed ($cluster): by its holder ($token), or every row when a stale holder is
-- taken over ($token NULL).
DELETE FROM steer_lock
WHERE cluster = $cluster AND ($token IS NULL OR token = $token);
