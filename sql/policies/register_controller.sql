-- Register a controller policy (models/controller/artifact.py register): one row in `policies`,
-- replacing a row with the same id (a retrain with the same weights and data gets the same id).
INSERT OR REPLACE INTO policies (policy_id, cluster, partition, created_at, path, train_from, train_to, valid_from,
                                 valid_to, algorithm, n_steps, seed, n_train_tuples, dataset_sha256, sums_sha256,
                                 fqe_value, behaviour_value, replay_score, menu, action_shares, code_version)
VALUES ($policy_id, $cluster, $partition, $created_at, $path, $train_from, $train_to, $valid_from,
        $valid_to, $algorithm, $n_steps, $seed, $n_train_tuples, $dataset_sha256, $sums_sha256,
        $fqe_value, $behaviour_value, $replay_score, $menu, $action_shares, $code_version);
