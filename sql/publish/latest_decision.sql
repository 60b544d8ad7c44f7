-- The latest publish decision of a cluster ($cluster): the last one written (rowid), not the latest
-- published_at: a row stamped in the future (a clock set forward) must not hide every later publish.
-- Rows from before the gate count as controllers.
SELECT policy_id, coalesce(kind, 'controller') AS kind, recommendation, message, published_at
FROM published_policies
WHERE cluster = $cluster
ORDER BY rowid DESC
LIMIT 1;
