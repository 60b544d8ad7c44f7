-- Policies published for a cluster ($cluster), newest first.
SELECT policy_id, partition, created_at, train_from, train_to, algorithm
FROM policies
WHERE cluster = $cluster
ORDER BY created_at DESC, policy_id;
