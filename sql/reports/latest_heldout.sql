-- The contenders of the cluster's most recent validation ($cluster): controller first, then the
-- fixed objectives, the baselines (in the order they were stored) and the as-run history.
WITH latest AS (
    SELECT heldout_id
    FROM heldout_replays
    WHERE cluster = $cluster
    ORDER BY created_at DESC, heldout_id DESC
    LIMIT 1
)
SELECT v.*
FROM heldout_replays v
JOIN latest USING (heldout_id)
ORDER BY CASE v.kind WHEN 'controller' THEN 0 WHEN 'objective' THEN 1 WHEN 'baseline' THEN 2 ELSE 3 END, v.rowid;
