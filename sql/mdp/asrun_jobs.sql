-- The jobs of one cluster (optionally one partition) that are alive around a window, times in
-- seconds since the Unix epoch. Used as the CTE `asrun_jobs` by the other files of sql/mdp/
-- (transforms/asrun_state.py prepends it). Parameters:
--   $cluster    VARCHAR
--   $partition  VARCHAR or NULL (NULL = every partition of the cluster)
--   $t_lo       DOUBLE  first second of interest (window start - one epoch, for arrivals)
--   $t_hi       DOUBLE  last second of interest (window end + one epoch, for utilisation)
-- Definitions (one place, shared with the simulator through SPEC §6):
--   size     = the larger of allocated and requested where both are known (cores, GPUs, MiB);
--              unknown GPUs / memory = 0
--   run end  = end_time, else start + run_s, else still running (+infinity)
--   q_end_s  = when the job left the queue: its start, else (never started) its end_time
--              (cancelled while pending), else, for a job that ran (run_s > 0) at a time the log
--              does not give (SWF wait -1), its submit: it is never counted as queued, as its wait
--              is unknown; else still pending (+infinity)
--   req_time = the requested time (timelimit_s), else the run time (SPEC §6: perfect estimate)
WITH j AS (
    SELECT
        job_id,
        epoch(submit_time)                                                  AS submit_s,
        epoch(start_time)                                                   AS start_s,
        epoch(end_time)                                                     AS end_raw_s,
        run_s,
        timelimit_s,
        greatest(coalesce(alloc_cpus, req_cpus, 0), coalesce(req_cpus, alloc_cpus, 0))          AS cores,
        greatest(coalesce(alloc_gpus, req_gpus, 0), coalesce(req_gpus, alloc_gpus, 0))          AS gpus,
        greatest(coalesce(alloc_mem_mib, req_mem_mib, 0), coalesce(req_mem_mib, alloc_mem_mib, 0)) AS mem
    FROM jobs
    WHERE cluster = $cluster
      AND ($partition IS NULL OR partition = $partition)
      AND submit_time < to_timestamp($t_hi)
), k AS (
    SELECT
        job_id,
        submit_s,
        start_s,
        CASE WHEN start_s IS NULL THEN NULL
             ELSE coalesce(end_raw_s, start_s + run_s, 'infinity'::DOUBLE) END AS end_s,
        coalesce(start_s, end_raw_s, CASE WHEN run_s > 0 THEN submit_s END, 'infinity'::DOUBLE) AS q_end_s,
        coalesce(timelimit_s, run_s)::DOUBLE                                 AS req_time_s,
        cores::DOUBLE AS cores,
        gpus::DOUBLE  AS gpus,
        mem::DOUBLE   AS mem
    FROM j
)
SELECT *
FROM k
WHERE greatest(q_end_s, coalesce(end_s, q_end_s)) >= $t_lo
