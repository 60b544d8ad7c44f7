-- Replay validation of a controller policy on a held-out window (issue: replay validation, weekly
-- reports and ROI). Written by warehouse/heldout_store.py; read by the report and `metapilot roi`.
--
-- heldout_replays: one row per contender of one validation run.
--   contender     'MetaPilot' (the controller, objective switched per epoch), 'fixed-U', 'fixed-W'
--                 (the two engines it chooses between, held all window), the 21 baselines
--                 ('FCFS+easy', ...), 'as-run' (the logged starts of the same jobs)
--   kind          controller | objective | baseline | history
--   status        ok | unavailable (metrics NULL; `note` says why, e.g. no objective-switching replay)
--   wait_*_s      over the window's replayed jobs, wait = start - submit (s); median/p95/p99 interpolate
--                 linearly; bsld_mean = mean of max(1, (wait + run) / max(run, 10)); bsld_mean_1min = the
--                 same over the jobs that ran 60 s or more (the jobs that ran less, most of them failing at
--                 start, carry most of bsld_mean on real logs: docs/benchmarks.md)
--   util_*        used resource-seconds / (capacity x (last end - first submit)); NULL where the
--                 capacity is 0 or unknown (models/simulator/metrics.py, the same code for every contender)
--   makespan_s    last end - first submit: the time to finish the window's jobs
--   util_cpu_backlog  core utilisation while some job of the window waits: used core-seconds inside the
--                 union of the jobs' [submit, start) / (cores x its length) (SPEC §6: over a whole window
--                 arrivals fix utilisation; this is where policies differ)
--   jobs          jobs measured; jobs_not_run: jobs of the window that could never fit (replays) or have no
--                 logged start (as-run), left out of the figures
--   capacity_*    the capacity the window was replayed with (summed over pools): ROI prices against it
--   window_from/to  the held-out window, by submit time ([from, to))
CREATE TABLE IF NOT EXISTS heldout_replays (
    heldout_id    VARCHAR NOT NULL,
    policy_id        VARCHAR,
    contender        VARCHAR NOT NULL,
    wait_mean_s      DOUBLE,
    wait_median_s    DOUBLE,
    wait_p95_s       DOUBLE,
    wait_p99_s       DOUBLE,
    wait_max_s       DOUBLE,
    bsld_mean        DOUBLE,
    bsld_mean_1min   DOUBLE,
    util_cpu         DOUBLE,
    util_gpu         DOUBLE,
    util_mem         DOUBLE,
    makespan_s       DOUBLE,
    util_cpu_backlog DOUBLE,
    kind             VARCHAR NOT NULL,
    status           VARCHAR NOT NULL,
    note             VARCHAR,
    jobs             BIGINT,
    jobs_not_run     BIGINT,
    first_submit     TIMESTAMPTZ,
    last_end         TIMESTAMPTZ,
    cluster          VARCHAR NOT NULL,
    partition        VARCHAR,            -- NULL = every partition
    window_from      TIMESTAMPTZ NOT NULL,
    window_to        TIMESTAMPTZ NOT NULL,
    epoch_s          BIGINT NOT NULL,
    capacity_cores   DOUBLE,
    capacity_gpus    DOUBLE,
    capacity_mem_mib DOUBLE,
    code_version     VARCHAR NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (heldout_id, contender)
);

-- Per ISO week (Monday 00:00 UTC) figures of each available contender: waits of the jobs submitted
-- that week, jobs completed that week, the week's utilisation (models/simulator/metrics.weekly).
CREATE TABLE IF NOT EXISTS heldout_weeks (
    heldout_id   VARCHAR NOT NULL,
    contender       VARCHAR NOT NULL,
    week            VARCHAR NOT NULL,    -- ISO '1996-W44'
    week_start      TIMESTAMPTZ NOT NULL,
    jobs            BIGINT NOT NULL,
    wait_mean_s     DOUBLE,
    wait_median_s   DOUBLE,
    wait_p95_s      DOUBLE,
    wait_p99_s      DOUBLE,
    wait_max_s      DOUBLE,
    bsld_mean       DOUBLE,
    bsld_mean_1min  DOUBLE,
    jobs_completed  BIGINT NOT NULL,
    util_cpu        DOUBLE,
    util_gpu        DOUBLE,
    util_mem        DOUBLE,
    PRIMARY KEY (heldout_id, contender, week)
);
-- warehouses created before the column
ALTER TABLE heldout_replays ADD COLUMN IF NOT EXISTS bsld_mean_1min DOUBLE;
ALTER TABLE heldout_weeks ADD COLUMN IF NOT EXISTS bsld_mean_1min DOUBLE;

-- The controller's differences (controller - reference) per metric, with a paired bootstrap 95%
-- interval over weeks (models/evaluation/heldout.py). reference_kind 'best-fixed': the fixed contender
-- (fixed-U, fixed-W or a baseline) that is best on that very metric; 'as-run': the logged history.
--   diff            overall controller value - reference value
--   weekly_mean_diff / ci_low / ci_high  mean over the paired weeks of the weekly differences and
--                   its percentile bootstrap interval (NULL with fewer than 2 paired weeks)
--   better          the controller is better on the overall figure (lower wait/slowdown/makespan,
--                   higher utilisation); significant: the weekly interval excludes 0 (its sign says
--                   whether the controller is significantly better or worse)
CREATE TABLE IF NOT EXISTS heldout_diffs (
    heldout_id     VARCHAR NOT NULL,
    metric            VARCHAR NOT NULL,
    reference_kind    VARCHAR NOT NULL,
    reference         VARCHAR NOT NULL,
    controller_value  DOUBLE,
    reference_value   DOUBLE,
    diff              DOUBLE,
    rel_diff          DOUBLE,
    weeks             BIGINT NOT NULL,
    weekly_mean_diff  DOUBLE,
    ci_low            DOUBLE,
    ci_high           DOUBLE,
    n_boot            BIGINT NOT NULL,
    seed              BIGINT NOT NULL,
    better            BOOLEAN,
    significant       BOOLEAN,
    PRIMARY KEY (heldout_id, metric, reference_kind)
);

-- The controller's recommended objective per decision epoch, scored on the observed (as-run) state
-- of the cluster: filled by `metapilot advise`-style batch scoring, read by the weekly report.
--   partition   '*' = the whole cluster
--   action      index into models/controller/objectives.py OBJECTIVES; objective its name ('U', 'W')
--   q_values    the policy's value of each action, in OBJECTIVES order (NULL when not exposed)
CREATE TABLE IF NOT EXISTS recommendations (
    cluster      VARCHAR NOT NULL,
    partition    VARCHAR NOT NULL,
    epoch_start  TIMESTAMPTZ NOT NULL,
    epoch_s      BIGINT NOT NULL,
    policy_id    VARCHAR NOT NULL,
    action       INTEGER NOT NULL,
    objective    VARCHAR NOT NULL,
    q_values     DOUBLE[],
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, partition, epoch_start, policy_id)
);
