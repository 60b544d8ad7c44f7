-- Marts, layer 1 (staging): one row per job of `jobs`, with what every mart derives from it.
-- Applied by warehouse.db.apply_ddl after the DDL, in file-name order; every statement here is
-- idempotent (CREATE OR REPLACE).
--
-- Conventions of every mart (Open XDMoD's Jobs realm is the reference):
--   * Periods are UTC days and ISO weeks (Monday 00:00 UTC). All period arithmetic is done on naive
--     UTC timestamps (the *_ts columns below), so results do not depend on the session TimeZone
--     (read-only connections, e.g. `metapilot sql`, do not set it).
--   * wait_s = start_time - submit_time and run_s = end_time - start_time, in seconds, recomputed
--     here from the timestamps (not the parser's jobs.wait_s / jobs.run_s), so that every mart uses
--     XDMoD's definitions whatever the source format.
--   * A job with NULL start_time never ran: it counts as submitted only (not started, not ended,
--     no hours, no wait), even when it carries an end_time (e.g. cancelled while pending).
--   * A job with a start but no end_time is still running: it counts as started (its wait is
--     known) but contributes no hours and is not ended. Its hours appear once a newer record with
--     the end time replaces it (SPEC §4).

-- Open XDMoD's job-size bins, by allocated CPUs. size_order sorts them; jobs whose alloc_cpus is
-- unknown (NULL or < 1) fall in 'unknown' (size_order 99), see stg_jobs.
CREATE OR REPLACE VIEW ref_job_size_classes AS
SELECT * FROM (VALUES
    ( 1, '1',          1,    1),
    ( 2, '2-4',        2,    4),
    ( 3, '5-8',        5,    8),
    ( 4, '9-16',       9,   16),
    ( 5, '17-32',     17,   32),
    ( 6, '33-64',     33,   64),
    ( 7, '65-128',    65,  128),
    ( 8, '129-256',  129,  256),
    ( 9, '257-512',  257,  512),
    (10, '513-1024', 513, 1024),
    (11, '1025-2048', 1025, 2048),
    (12, '2049-4096', 2049, 4096),
    (13, '>4096',    4097, NULL)
) AS t(size_order, size_class, min_cpus, max_cpus);

CREATE OR REPLACE VIEW stg_jobs AS
WITH j AS (
    SELECT
        cluster,
        job_id,
        partition,
        state,
        source_format,
        submit_time,
        start_time,
        end_time,
        -- openb pods (SPEC §11) record requests, not allocations: a pod that ran held its request
        -- (Kubernetes reserves it), its milli-CPU and its share of each GPU (issue 41: a
        -- placement-only cluster's report showed no usage at all)
        CASE WHEN source_format = 'openb' AND alloc_cpus IS NULL AND start_time IS NOT NULL
             THEN cpu_milli / 1000.0 ELSE alloc_cpus END AS alloc_cpus,
        alloc_nodes,
        CASE WHEN source_format = 'openb' AND alloc_gpus IS NULL AND start_time IS NOT NULL
             THEN coalesce(req_gpus, 0) * coalesce(gpu_milli, 0) / 1000.0 ELSE alloc_gpus END AS alloc_gpus,
        -- naive UTC copies for period arithmetic (independent of the session TimeZone)
        timezone('UTC', submit_time) AS submit_ts,
        timezone('UTC', start_time)  AS start_ts,
        -- an end without a start (never ran) is no run interval
        CASE WHEN start_time IS NOT NULL THEN timezone('UTC', end_time) END AS end_ts
    FROM jobs
)
SELECT
    j.*,
    start_ts IS NOT NULL                        AS is_started,
    start_ts IS NOT NULL AND end_ts IS NOT NULL AS is_ended,
    (epoch_us(start_ts) - epoch_us(submit_ts)) / 1e6 AS wait_s,
    (epoch_us(end_ts) - epoch_us(start_ts)) / 1e6    AS run_s,
    coalesce(sc.size_class, 'unknown') AS size_class,
    coalesce(sc.size_order, 99)        AS size_order
FROM j
LEFT JOIN ref_job_size_classes sc
    ON ceil(j.alloc_cpus) BETWEEN sc.min_cpus AND coalesce(sc.max_cpus, 9223372036854775807);
