-- The latest publish decision of a cluster ($cluster); rows from before the gate count as
-- controllers.
SELECT policy_id, coalesce(kind, 'controller') AS kind, recommendation, message, published_at
FROM published_policies
WHERE cluster = $cluster
ORDER BY published_at DESC
LIMIT 1;
