-- Controller policies published for a cluster ($cluster), newest first (placement agents, algorithm
-- PPO, choose nodes rather than objectives: the report's placement section shows them).
SELECT policy_id, partition, created_at, train_from, train_to, algorithm
FROM policies
WHERE cluster = $cluster AND algorithm <> 'PPO'
ORDER BY created_at DESC, policy_id;
