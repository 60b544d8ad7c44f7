-- The contenders of the cluster's most recent validation ($cluster): controller first, then the
-- fixed objectives, the baselines (in the order they were stored) and the as-run history.
WITH latest AS (
    SELECT validation_id
    FROM validations
    WHERE cluster = $cluster
    ORDER BY created_at DESC, validation_id DESC
    LIMIT 1
)
SELECT v.*
FROM validations v
JOIN latest USING (validation_id)
ORDER BY CASE v.kind WHEN 'controller' THEN 0 WHEN 'objective' THEN 1 WHEN 'baseline' THEN 2 ELSE 3 END, v.rowid;
