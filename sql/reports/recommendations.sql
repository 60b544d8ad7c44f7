-- The controller's recommended objective per epoch of the week ($cluster, $week_start), from the
-- policy whose recommendations for the week were written last.
WITH r AS (
    SELECT *
    FROM recommendations
    WHERE cluster = $cluster
      AND epoch_start >= $week_start::TIMESTAMPTZ
      AND epoch_start < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY
),
p AS (
    SELECT policy_id FROM r GROUP BY policy_id ORDER BY max(created_at) DESC, policy_id LIMIT 1
)
SELECT r.cluster, r.partition, r.epoch_start, r.epoch_s, r.policy_id, r.action, r.objective, r.q_values
FROM r
JOIN p USING (policy_id)
ORDER BY r.partition, r.epoch_start;
