-- The cluster's latest approval ($cluster).
SELECT decision, kind, policy_id, published_at, approved_by, approved_at, note
FROM steer_approvals
WHERE cluster = $cluster
ORDER BY approved_at DESC
LIMIT 1;
