-- The cluster's latest approval ($cluster), in the order approvals were written (rowid: a clock set
-- back, or forward, must not hide a later one).
SELECT decision, kind, policy_id, published_at, approved_by, approved_at, note, claimed_by
FROM steer_approvals
WHERE cluster = $cluster
ORDER BY rowid DESC
LIMIT 1;
