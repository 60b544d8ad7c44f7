-- Recommended objectives (`_mp_rec`: the new rows, warehouse/heldout_store.py), replacing those of
-- the same cluster, partition, epoch and policy.
DELETE FROM recommendations r
USING _mp_rec n
WHERE r.cluster = n.cluster AND r.partition = n.partition AND r.epoch_start = n.epoch_start
  AND r.policy_id = n.policy_id;
INSERT INTO recommendations (cluster, partition, epoch_start, epoch_s, policy_id, action, objective, q_values, created_at)
SELECT cluster, partition, epoch_start, epoch_s, policy_id, action, objective, q_values, created_at
FROM _mp_rec;
