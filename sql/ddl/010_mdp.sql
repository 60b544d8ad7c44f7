-- Logged MDP transitions (SPEC §7) for the offline-RL controller: one row per decision epoch per
-- source trajectory. States are the normalised vectors of transforms/state.py (FEATURES, in that
-- order; a test checks these columns against it). Written by models/controller/dataset.py.
--   partition         '*' = the whole cluster
--   window_from/to    the window the tuples were generated for ([from, to), epochs start in it)
--   source            'as-run' | 'replay' (more may be registered)
--   behaviour_policy  'as-run-inferred', or the replay behaviour ('random', 'hold-U', 'eps-greedy-0.1', ...)
--   seed              the rollout's seed; NULL for the as-run history
--   state_spec        hash of the feature definitions + state/reward configs the row was built with;
--                     rows of another spec are never mixed into a training set
--   action            index into models/controller/objectives.py OBJECTIVES (0 = U, 1 = W)
--   reward            transforms/reward.py for the epoch [epoch_start, epoch_start + epoch_s)
--   terminal          true only if the trajectory really ends (never for the as-run history)
CREATE TABLE IF NOT EXISTS mdp_transitions (
    cluster          VARCHAR NOT NULL,
    partition        VARCHAR NOT NULL,
    window_from      TIMESTAMPTZ NOT NULL,
    window_to        TIMESTAMPTZ NOT NULL,
    epoch_start      TIMESTAMPTZ NOT NULL,
    epoch_s          BIGINT NOT NULL,
    source           VARCHAR NOT NULL,
    behaviour_policy VARCHAR NOT NULL,
    seed             BIGINT,
    state_spec       VARCHAR NOT NULL,
    s_used_cpu         FLOAT NOT NULL,
    s_used_gpu         FLOAT NOT NULL,
    s_used_mem         FLOAT NOT NULL,
    s_queue_len        FLOAT NOT NULL,
    s_queued_cpu       FLOAT NOT NULL,
    s_queued_gpu       FLOAT NOT NULL,
    s_queued_mem       FLOAT NOT NULL,
    s_wait_mean        FLOAT NOT NULL,
    s_wait_max         FLOAT NOT NULL,
    s_long_tail_share  FLOAT NOT NULL,
    s_req_mean         FLOAT NOT NULL,
    s_arrivals         FLOAT NOT NULL,
    s_hour_sin         FLOAT NOT NULL,
    s_hour_cos         FLOAT NOT NULL,
    s_dow_sin          FLOAT NOT NULL,
    s_dow_cos          FLOAT NOT NULL,
    action           INTEGER NOT NULL,
    reward           DOUBLE NOT NULL,
    ns_used_cpu        FLOAT NOT NULL,
    ns_used_gpu        FLOAT NOT NULL,
    ns_used_mem        FLOAT NOT NULL,
    ns_queue_len       FLOAT NOT NULL,
    ns_queued_cpu      FLOAT NOT NULL,
    ns_queued_gpu      FLOAT NOT NULL,
    ns_queued_mem      FLOAT NOT NULL,
    ns_wait_mean       FLOAT NOT NULL,
    ns_wait_max        FLOAT NOT NULL,
    ns_long_tail_share FLOAT NOT NULL,
    ns_req_mean        FLOAT NOT NULL,
    ns_arrivals        FLOAT NOT NULL,
    ns_hour_sin        FLOAT NOT NULL,
    ns_hour_cos        FLOAT NOT NULL,
    ns_dow_sin         FLOAT NOT NULL,
    ns_dow_cos         FLOAT NOT NULL,
    terminal         BOOLEAN NOT NULL
);
-- Lookahead features (transforms/state.py lookahead_feature_list: one per objective of the menu,
-- then the best cost), empty when the state configuration has none; warehouses created before them.
ALTER TABLE mdp_transitions ADD COLUMN IF NOT EXISTS s_lookahead FLOAT[];
ALTER TABLE mdp_transitions ADD COLUMN IF NOT EXISTS ns_lookahead FLOAT[];
