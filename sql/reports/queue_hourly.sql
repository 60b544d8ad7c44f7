-- The observed queue and machine at every hour of the week ($cluster, $week_start), at the instant
-- the hour starts (h). One row per hour (168), generated with range(); hours with nothing give 0.
--   queued_jobs / queued_cores  jobs submitted at or before h and not yet started: start after h,
--                               or never started and not yet gone (cancelled after h, or still pending
--                               when the log ends); cores requested (requested, else allocated)
--   running_jobs / busy_cores / busy_gpus  jobs with start <= h < end (no end yet: still running)
-- Naive UTC timestamps throughout (as in the marts), so the session TimeZone does not matter.
WITH hours AS (
    SELECT unnest(range(timezone('UTC', $week_start::TIMESTAMPTZ),
                        timezone('UTC', $week_start::TIMESTAMPTZ) + INTERVAL 7 DAY,
                        INTERVAL 1 HOUR)) AS hour_ts
),
j AS (
    SELECT
        timezone('UTC', submit_time) AS submit_ts,
        timezone('UTC', start_time) AS start_ts,
        coalesce(timezone('UTC', end_time), 'infinity'::TIMESTAMP) AS gone_ts,
        coalesce(req_cpus, alloc_cpus, 0) AS req_cores,
        coalesce(alloc_cpus, req_cpus, 0) AS cores,
        coalesce(alloc_gpus, req_gpus, 0) AS gpus
    FROM jobs
    WHERE cluster = $cluster
      AND submit_time < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY
      AND (end_time IS NULL OR end_time > $week_start::TIMESTAMPTZ)
)
SELECT
    h.hour_ts AS hour_utc,
    timezone('UTC', h.hour_ts) AS hour_start,
    count(j.submit_ts) FILTER (WHERE j.start_ts IS NULL OR j.start_ts > h.hour_ts) AS queued_jobs,
    coalesce(sum(j.req_cores) FILTER (WHERE j.start_ts IS NULL OR j.start_ts > h.hour_ts), 0)::BIGINT AS queued_cores,
    count(j.submit_ts) FILTER (WHERE j.start_ts <= h.hour_ts) AS running_jobs,
    coalesce(sum(j.cores) FILTER (WHERE j.start_ts <= h.hour_ts), 0)::BIGINT AS busy_cores,
    coalesce(sum(j.gpus) FILTER (WHERE j.start_ts <= h.hour_ts), 0)::BIGINT AS busy_gpus
FROM hours h
LEFT JOIN j ON j.submit_ts <= h.hour_ts AND j.gone_ts > h.hour_ts
GROUP BY h.hour_ts
ORDER BY h.hour_ts;
