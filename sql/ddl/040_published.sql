-- What each cluster should run: the publish step's decision (SPEC §7 publish gate). One row per
-- promotion; the current one is the latest per (cluster, partition).
--   kind            'controller': the learned policy passed the gate and is published;
--                   'fixed': it did not, and the best fixed contender is recommended instead
--   recommendation  what to run, e.g. 'MetaPilot controller <policy_id>', 'SAF+easy', or 'the scheduler's
--                   current policy' (a refusal where nothing waited or nothing was checked)
--   message         the decision in words (the report's first line)
--   gate            JSON: the gate's verdict on the checkpoint window
--   gate_training   JSON: the same gate's verdict on the last training weeks (the publish gate asks
--                   for both; NULL for a card written before that check, which is not published)
--   ope_passes      whether off-policy evaluation (FQE) ranks the policy above the logged behaviour
--                   (the publish gate asks for it too; issue 11)
CREATE TABLE IF NOT EXISTS published_policies (
    cluster        VARCHAR NOT NULL,
    partition      VARCHAR NOT NULL,
    policy_id      VARCHAR NOT NULL,
    heldout_id  VARCHAR,
    published_at   TIMESTAMPTZ NOT NULL,
    verdict        VARCHAR,           -- the held-out validation's plain-language verdict
    kind           VARCHAR,
    recommendation VARCHAR,
    message        VARCHAR,
    gate           VARCHAR,
    gate_training  VARCHAR,
    ope_passes     BOOLEAN
);
-- warehouses created before the publish gate
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS kind VARCHAR;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS recommendation VARCHAR;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS message VARCHAR;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS gate VARCHAR;
-- warehouses created before the training-weeks check
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS gate_training VARCHAR;
-- warehouses created before the off-policy evaluation check
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS ope_passes BOOLEAN;
-- the walk forward's decision for the next period, published by `pipeline --backtest` and the monthly
-- walk forward (issue 50): kind 'fixed' (a rule, with its tail guard in guard_h) or 'planner' (its
-- settings in `planner`, JSON); policy_id NULL (no learned policy), backtest_id the walk forward that
-- backs it, `record` (JSON) what following MetaPilot did over it (regret and interval against the
-- admissible reference, gain over the current rule, max wait against the current rule's)
ALTER TABLE published_policies ALTER COLUMN policy_id DROP NOT NULL;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS guard_h DOUBLE;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS planner VARCHAR;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS backtest_id VARCHAR;
ALTER TABLE published_policies ADD COLUMN IF NOT EXISTS record VARCHAR;
