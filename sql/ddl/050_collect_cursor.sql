-- The cursor of `metapilot collect` per cluster (warehouse/collect.py), derived from the data, never
-- stored: the latest end time loaded, moved back to the earliest start (or submit, for a job that
-- has not started) of the cluster's jobs not ended yet, whose records will still change. sacct is
-- asked from `cursor` on the next run. REQUEUED is not "not ended": with --duplicates its record
-- is a finished run. least() skips NULLs.
CREATE OR REPLACE VIEW collect_cursor AS
SELECT
    cluster,
    max(end_time) AS last_end,
    min(coalesce(start_time, submit_time))
        FILTER (WHERE state IN ('PENDING', 'RUNNING', 'SUSPENDED', 'CONFIGURING', 'COMPLETING', 'RESIZING')) AS open_since,
    least(max(end_time), min(coalesce(start_time, submit_time))
        FILTER (WHERE state IN ('PENDING', 'RUNNING', 'SUSPENDED', 'CONFIGURING', 'COMPLETING', 'RESIZING'))) AS cursor
FROM jobs
GROUP BY cluster;
