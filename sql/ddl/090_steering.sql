-- Steering a live Slurm (SPEC §12, issue 39).
--   steer_approvals  a person's approval of a decision (publishing is not deploying): what, who, when
--   steer_cycles     one row per cycle of `metapilot steer` (live, dry-run, release, guard): the objective,
--                    the pending jobs read, those changed, seconds, Slurm's RPC counts (sdiag, JSON),
--                    status ok | error | guard | paused | kept | adopted | released | halted | resumed, and
--                    the message in words
--   steered_jobs     every job whose site factor the loop set, until released (released_at)
--   steer_shadow     what a --dry-run cycle would have set: the ranking compared with the order Slurm
--                    really started jobs in (`metapilot steer report`)
CREATE TABLE IF NOT EXISTS steer_approvals (
    cluster       VARCHAR NOT NULL,
    decision      VARCHAR NOT NULL,     -- 'SAF+EASY', or 'controller <policy_id>'
    kind          VARCHAR NOT NULL,     -- fixed | controller
    policy_id     VARCHAR,
    published_at  TIMESTAMPTZ,          -- the publish decision approved (NULL: a rule named by hand)
    approved_by   VARCHAR NOT NULL,     -- the account that ran `approve` (its real uid's name)
    approved_at   TIMESTAMPTZ NOT NULL,
    note          VARCHAR,
    claimed_by    VARCHAR               -- $SUDO_USER when approved through sudo: what the environment claims
);
-- warehouses created before the approver's real uid was recorded (issue 49)
ALTER TABLE steer_approvals ADD COLUMN IF NOT EXISTS claimed_by VARCHAR;
CREATE TABLE IF NOT EXISTS steer_cycles (
    cycle_id      VARCHAR NOT NULL,
    cluster       VARCHAR NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL,
    mode          VARCHAR NOT NULL,     -- live | dry-run | release
    decision      VARCHAR,
    objective     VARCHAR,
    guard_h       DOUBLE,
    pending       INTEGER,
    eligible      INTEGER,
    changed       INTEGER,
    failed        INTEGER,
    seconds       DOUBLE,               -- the cycle's own work, Slurm's answers excluded
    slurm_seconds DOUBLE,               -- waiting for squeue/sinfo/scontrol/sdiag
    rpc_counts    VARCHAR,              -- JSON: sdiag's RPC counts by message type
    status        VARCHAR NOT NULL,
    message       VARCHAR,
    guard_job     VARCHAR               -- status 'guard': the job whose wait tripped the live tail guard
);
-- warehouses created before the guard became a logged, rate-limited pause (issue 49)
ALTER TABLE steer_cycles ADD COLUMN IF NOT EXISTS guard_job VARCHAR;
CREATE TABLE IF NOT EXISTS steered_jobs (
    cluster       VARCHAR NOT NULL,
    job_id        VARCHAR NOT NULL,     -- what scontrol was given (an array's id for the whole array)
    site_factor   BIGINT NOT NULL,
    rank          INTEGER,
    group_key     VARCHAR,
    objective     VARCHAR,
    cycle_id      VARCHAR NOT NULL,
    set_at        TIMESTAMPTZ NOT NULL,
    released_at   TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS steer_shadow (
    cycle_id      VARCHAR NOT NULL,
    cluster       VARCHAR NOT NULL,
    shadow_at     TIMESTAMPTZ NOT NULL,
    job_id        VARCHAR NOT NULL,
    group_key     VARCHAR,
    rank          INTEGER,
    site_factor   BIGINT,
    objective     VARCHAR
);
-- One loop per Slurm cluster (issue 49): the live loop, --once or --release holding it, and its heartbeat.
-- A second one is refused naming the holder; a holder whose heartbeat stopped (or whose process is gone,
-- on the same host) is stale and taken over. A row, not a file: it is seen from every host.
CREATE TABLE IF NOT EXISTS steer_lock (
    cluster       VARCHAR NOT NULL,
    token         VARCHAR NOT NULL,     -- the holder's own random id
    holder        VARCHAR NOT NULL,     -- the account (real uid)
    host          VARCHAR NOT NULL,
    pid           INTEGER NOT NULL,
    mode          VARCHAR NOT NULL,     -- live | once | release
    taken_at      TIMESTAMPTZ NOT NULL,
    beat_at       TIMESTAMPTZ NOT NULL
);
