-- Register a PPO placement policy (row from models/placement/artifact.py registry_row): one row in
-- `policies`, algorithm 'PPO', replacing a row with the same id (same weights, same id).
-- Controller-only columns (validation window, FQE, menu, action shares) stay NULL.
INSERT OR REPLACE INTO policies (policy_id, cluster, partition, created_at, path, train_from, train_to, algorithm,
                                 n_steps, seed, n_train_tuples, dataset_sha256, sums_sha256, replay_score, code_version)
VALUES ($policy_id, $cluster, $partition, $created_at, $path, $train_from, $train_to, $algorithm,
        $n_steps, $seed, $n_train_tuples, $dataset_sha256, $sums_sha256, $replay_score, $code_version);
