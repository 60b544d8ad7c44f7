-- Drop the stored tuples of the trajectories about to be written again (models/controller/dataset.py
-- build_dataset), so that storing is idempotent: `_mp_traj` holds one row per trajectory key.
DELETE FROM mdp_transitions m
USING _mp_traj t
WHERE m.cluster = t.cluster
  AND m.partition = t.partition
  AND m.window_from = t.window_from
  AND m.window_to = t.window_to
  AND m.source = t.source
  AND m.behaviour_policy = t.behaviour_policy
  AND m.seed IS NOT DISTINCT FROM t.seed
  AND m.state_spec = t.state_spec;
