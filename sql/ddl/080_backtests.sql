-- The walk forward (issue 38, SPEC §7): `metapilot backtest`. Written by warehouse/backtest_store.py.
--
-- backtests: one row per contender of one walk forward over [span_from, span_to).
--   kind          metapilot | fixed (the 21, 'SAF+EASY') | current | as-run | leader | guarded-leader
--                 | planner | oracle (a bound, never a decision)
--   wait_*_s, bsld_mean, bsld_mean_1min   over the jobs submitted in the span (bsld_mean_1min: those
--                 that ran 60 s or more); util_cpu_backlog: core utilisation while jobs wait
--   gain_*        1 - contender / current (the site's rule today): > 0 is better
--   regret_*      contender / reference - 1 over the span, reference = the best admissible fixed
--                 rule held throughout (p99 and max wait at most 1.5x the current rule's), in
--                 hindsight; *_any against the best fixed rule overall; *_lo / *_hi the 95% block
--                 bootstrap interval over the periods (a win only when *_hi < 0)
--   worst_user_wait_s / worst_account_wait_s / jain_users   fairness over hashed user and account ids
CREATE TABLE IF NOT EXISTS backtests (
    backtest_id           VARCHAR NOT NULL,
    cluster               VARCHAR NOT NULL,
    span_from             TIMESTAMPTZ NOT NULL,
    span_to               TIMESTAMPTZ NOT NULL,
    current_rule          VARCHAR NOT NULL,
    reference             VARCHAR,
    reference_any         VARCHAR,
    contender             VARCHAR NOT NULL,
    kind                  VARCHAR NOT NULL,
    status                VARCHAR NOT NULL,      -- ok | unavailable (note says why)
    note                  VARCHAR,
    jobs                  BIGINT,
    wait_mean_s           DOUBLE,
    wait_p95_s            DOUBLE,
    wait_p99_s            DOUBLE,
    wait_max_s            DOUBLE,
    bsld_mean             DOUBLE,
    bsld_mean_1min        DOUBLE,
    util_cpu_backlog      DOUBLE,
    gain_wait_mean        DOUBLE,
    gain_bsld             DOUBLE,
    regret_bsld           DOUBLE,
    regret_bsld_lo        DOUBLE,
    regret_bsld_hi        DOUBLE,
    regret_wait_mean      DOUBLE,
    regret_wait_mean_lo   DOUBLE,
    regret_wait_mean_hi   DOUBLE,
    regret_bsld_any       DOUBLE,
    regret_wait_mean_any  DOUBLE,
    admissible            BOOLEAN,
    worst_user_wait_s     DOUBLE,
    worst_account_wait_s  DOUBLE,
    jain_users            DOUBLE,
    code_version          VARCHAR NOT NULL,
    created_at            TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (backtest_id, contender)
);
-- with the site's slurm.conf (`backtest --current-conf`, issue 51): on the current contender's row, Kendall's tau
-- of its start order against the as-run history (the check that the site's replay is close to what it lived)
ALTER TABLE backtests ADD COLUMN IF NOT EXISTS asrun_kendall_tau DOUBLE;


-- One row per period of a walk forward: what each deployable contender ran in it, decided at its
-- origin from the past alone, and how the fold's learning went.
CREATE TABLE IF NOT EXISTS backtest_periods (
    backtest_id       VARCHAR NOT NULL,
    period            INTEGER NOT NULL,
    period_from       TIMESTAMPTZ NOT NULL,
    period_to         TIMESTAMPTZ NOT NULL,
    decision          VARCHAR NOT NULL,        -- MetaPilot's, in words
    rule              VARCHAR,                 -- the fixed rule MetaPilot ran (or fell back to)
    guard_h           DOUBLE,                  -- its tail guard (NULL: none)
    policy_id         VARCHAR,                 -- the learned controller, when it decided
    leader            VARCHAR,                 -- follow-the-leader's rule
    guarded_leader    VARCHAR,
    guarded_leader_h  DOUBLE,
    fold_policy_id    VARCHAR,                 -- what the fold's learning trained (even when not followed)
    fold_gate         VARCHAR,                 -- the fold's gate: controller | fixed | failed
    fold_note         VARCHAR,
    jobs              BIGINT,
    PRIMARY KEY (backtest_id, period)
);
-- the replay of the current rule against the as-run history of the same past, at the period's origin
-- (issue 48: fidelity before advice; NULL where the log records no start times)
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_wait_mean_replay_s DOUBLE;
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_wait_mean_asrun_s DOUBLE;
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_waited_replay DOUBLE;  -- share that waited > 1 min
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_waited_asrun DOUBLE;
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_kendall_tau DOUBLE;  -- of the start order
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS fidelity_far BOOLEAN;  -- too far apart: the decision kept
ALTER TABLE backtest_periods ADD COLUMN IF NOT EXISTS why VARCHAR;  -- the decision's reason, in words

-- One row per contender and period of a walk forward: the figures of the jobs submitted in that
-- period (the sums add up over periods to the span's means; the report's cumulative plot).
CREATE TABLE IF NOT EXISTS backtest_contender_periods (
    backtest_id   VARCHAR NOT NULL,
    contender     VARCHAR NOT NULL,
    period        INTEGER NOT NULL,
    jobs          BIGINT,
    wait_mean_s   DOUBLE,
    wait_max_s    DOUBLE,
    bsld_mean     DOUBLE,
    wait_sum_s    DOUBLE,
    bsld_sum      DOUBLE,
    PRIMARY KEY (backtest_id, contender, period)
);
