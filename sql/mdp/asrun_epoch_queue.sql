-- The queue at each epoch boundary t in [$t0, $t1) whose epoch [t, t + $epoch_s) started at least
-- one of those queued jobs: the input of the as-run action inference (models/controller/asrun.py).
-- Runs after the CTE `asrun_jobs` (sql/mdp/asrun_jobs.sql). Parameters: $t0, $t1, $epoch_s (BIGINT).
-- started_in_epoch: the job's real start falls in [t, t + epoch_s); start_s orders them.
seq AS (  -- tie-breaker standing for the job id (SPEC §6: ties by submit time, then job id)
    SELECT row_number() OVER (ORDER BY submit_s, job_id) AS job_seq, * FROM asrun_jobs
), epochs AS (
    SELECT unnest(range($t0::BIGINT, $t1::BIGINT, $epoch_s::BIGINT))::DOUBLE AS t
), q AS (
    SELECT e.t, j.job_seq, j.submit_s, j.start_s, j.req_time_s, j.cores, j.gpus, j.mem
    FROM epochs e JOIN seq j ON j.submit_s <= e.t AND e.t < j.q_end_s
), active AS (
    SELECT DISTINCT t FROM q WHERE start_s < t + $epoch_s
)
SELECT
    q.t::BIGINT AS epoch_start,
    q.job_seq,
    q.submit_s,
    q.start_s,
    coalesce(q.start_s < q.t + $epoch_s, false) AS started_in_epoch,
    q.req_time_s,
    q.cores,
    q.gpus,
    q.mem
FROM q SEMI JOIN active ON active.t = q.t
ORDER BY epoch_start, job_seq
