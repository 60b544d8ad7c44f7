-- The most recent validation, of one cluster or ($cluster NULL) of any.
SELECT heldout_id
FROM heldout_replays
WHERE ($cluster::VARCHAR IS NULL OR cluster = $cluster)
ORDER BY created_at DESC, heldout_id DESC
LIMIT 1;
