-- Per-epoch aggregates of the as-run history (transforms/state.py AGGREGATES, less capacity),
-- one row per epoch boundary t in [$t0, $t1] (both included, step $epoch_s).
-- Runs after the CTE `asrun_jobs` (sql/mdp/asrun_jobs.sql). Parameters:
--   $t0, $t1       BIGINT  first and last boundary (seconds since the Unix epoch)
--   $epoch_s       BIGINT  epoch length
--   $long_tail_s   DOUBLE  a queued job waiting longer than this is "long-tail"
-- At a boundary t:
--   running  start_s <= t < end_s                    -> used_* (resources held)
--   queued   submit_s <= t < q_end_s                 -> queue_len, queued_*, waits, req_mean_s
--   arrived  t - epoch_s <= submit_s < t             -> arrivals (the previous epoch)
--   used_*_s resource-seconds within [t, t + epoch_s) -> the epoch's utilisation (reward)
--   wait_accrued_s job-seconds queued within [t, t + epoch_s) -> the aligned reward's A
--   wait_started_max_s  largest wait of the jobs started in [t, t + epoch_s] -> the record of G
epochs AS (
    SELECT unnest(range($t0::BIGINT, $t1::BIGINT + 1, $epoch_s::BIGINT))::DOUBLE AS t
), running AS (
    SELECT e.t, sum(j.cores) AS used_cpu, sum(j.gpus) AS used_gpu, sum(j.mem) AS used_mem
    FROM epochs e JOIN asrun_jobs j ON j.start_s <= e.t AND e.t < j.end_s
    GROUP BY e.t
), queued AS (
    SELECT
        e.t,
        count(*)                  AS queue_len,
        sum(j.cores)              AS queued_cpu,
        sum(j.gpus)               AS queued_gpu,
        sum(j.mem)                AS queued_mem,
        avg(e.t - j.submit_s)     AS wait_mean_s,
        max(e.t - j.submit_s)     AS wait_max_s,
        avg(CASE WHEN e.t - j.submit_s > $long_tail_s THEN 1.0 ELSE 0.0 END) AS long_tail_share,
        avg(j.req_time_s)         AS req_mean_s
    FROM epochs e JOIN asrun_jobs j ON j.submit_s <= e.t AND e.t < j.q_end_s
    GROUP BY e.t
), arrived AS (
    SELECT e.t, count(*) AS arrivals
    FROM epochs e JOIN asrun_jobs j ON j.submit_s >= e.t - $epoch_s AND j.submit_s < e.t
    GROUP BY e.t
), used AS (
    SELECT
        e.t,
        sum(j.cores * (least(j.end_s, e.t + $epoch_s) - greatest(j.start_s, e.t))) AS used_cpu_s,
        sum(j.gpus  * (least(j.end_s, e.t + $epoch_s) - greatest(j.start_s, e.t))) AS used_gpu_s,
        sum(j.mem   * (least(j.end_s, e.t + $epoch_s) - greatest(j.start_s, e.t))) AS used_mem_s
    FROM epochs e JOIN asrun_jobs j ON j.start_s < e.t + $epoch_s AND j.end_s > e.t
    GROUP BY e.t
), started AS (
    SELECT e.t, max(j.start_s - j.submit_s) AS wait_started_max_s
    FROM epochs e JOIN asrun_jobs j ON j.start_s >= e.t AND j.start_s <= e.t + $epoch_s
    GROUP BY e.t
), accrued AS (
    SELECT e.t, sum(least(j.q_end_s, e.t + $epoch_s) - greatest(j.submit_s, e.t)) AS wait_accrued_s
    FROM epochs e JOIN asrun_jobs j ON j.submit_s < e.t + $epoch_s AND j.q_end_s > e.t
    GROUP BY e.t
)
SELECT
    e.t::BIGINT                          AS epoch_start,
    coalesce(r.used_cpu, 0)::DOUBLE      AS used_cpu,
    coalesce(r.used_gpu, 0)::DOUBLE      AS used_gpu,
    coalesce(r.used_mem, 0)::DOUBLE      AS used_mem,
    coalesce(q.queue_len, 0)::BIGINT     AS queue_len,
    coalesce(q.queued_cpu, 0)::DOUBLE    AS queued_cpu,
    coalesce(q.queued_gpu, 0)::DOUBLE    AS queued_gpu,
    coalesce(q.queued_mem, 0)::DOUBLE    AS queued_mem,
    coalesce(q.wait_mean_s, 0)::DOUBLE   AS wait_mean_s,
    coalesce(q.wait_max_s, 0)::DOUBLE    AS wait_max_s,
    coalesce(q.long_tail_share, 0)::DOUBLE AS long_tail_share,
    coalesce(q.req_mean_s, 0)::DOUBLE    AS req_mean_s,
    coalesce(a.arrivals, 0)::BIGINT      AS arrivals,
    coalesce(u.used_cpu_s, 0)::DOUBLE    AS used_cpu_s,
    coalesce(u.used_gpu_s, 0)::DOUBLE    AS used_gpu_s,
    coalesce(u.used_mem_s, 0)::DOUBLE    AS used_mem_s,
    coalesce(w.wait_accrued_s, 0)::DOUBLE AS wait_accrued_s,
    coalesce(s.wait_started_max_s, 0)::DOUBLE AS wait_started_max_s
FROM epochs e
LEFT JOIN running r ON r.t = e.t
LEFT JOIN queued  q ON q.t = e.t
LEFT JOIN arrived a ON a.t = e.t
LEFT JOIN used    u ON u.t = e.t
LEFT JOIN accrued w ON w.t = e.t
LEFT JOIN started s ON s.t = e.t
ORDER BY epoch_start
