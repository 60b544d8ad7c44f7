-- Replay simulator runs and their metrics (issue: replay simulator).

CREATE TABLE IF NOT EXISTS sim_runs (
    run_id             VARCHAR PRIMARY KEY,
    cluster            VARCHAR NOT NULL,
    partition          VARCHAR,            -- NULL = every partition
    window_from        TIMESTAMPTZ,
    window_to          TIMESTAMPTZ,
    policy             VARCHAR NOT NULL,   -- FCFS, SJF, ..., or 'switching'
    backfill           VARCHAR NOT NULL,   -- none | easy | conservative
    objective_schedule VARCHAR,            -- JSON: fixed rule, or per-epoch objectives
    seed               BIGINT,
    code_version       VARCHAR NOT NULL,
    wall_s             DOUBLE NOT NULL,
    jobs_replayed      BIGINT NOT NULL,
    jobs_left_out      BIGINT NOT NULL,    -- never ran, zero run time, no size
    runs_clamped       BIGINT NOT NULL,    -- run time cut at the requested time
    estimates_filled   BIGINT NOT NULL,    -- no requested time: run time used (perfect estimate)
    cannot_fit         BIGINT NOT NULL,    -- larger than their partition: reported, not replayed
    created_at         TIMESTAMPTZ NOT NULL,
    engine_s           DOUBLE              -- the replay's event loop alone (wall_s: the whole call)
);
ALTER TABLE sim_runs ADD COLUMN IF NOT EXISTS engine_s DOUBLE;  -- warehouses created before it
-- JSON {python, duckdb, polars, prefect, great-expectations, d3rlpy, torch: version} of the run
ALTER TABLE sim_runs ADD COLUMN IF NOT EXISTS versions VARCHAR;

CREATE TABLE IF NOT EXISTS sim_metrics (
    run_id          VARCHAR NOT NULL,
    scope           VARCHAR NOT NULL,      -- overall | week
    period_label    VARCHAR NOT NULL,      -- 'all' or ISO week '1996-W40'
    period_start    TIMESTAMPTZ,
    jobs            BIGINT NOT NULL,
    wait_mean_s     DOUBLE,
    wait_median_s   DOUBLE,
    wait_p95_s      DOUBLE,
    wait_p99_s      DOUBLE,
    wait_max_s      DOUBLE,
    bsld_mean       DOUBLE,
    bsld_mean_1min  DOUBLE,                -- the same over the jobs that ran 60 s or more
    util_cpu        DOUBLE,
    util_gpu        DOUBLE,
    util_mem        DOUBLE,
    makespan_s      DOUBLE,
    PRIMARY KEY (run_id, scope, period_label)
);
ALTER TABLE sim_metrics ADD COLUMN IF NOT EXISTS bsld_mean_1min DOUBLE;  -- warehouses created before it
