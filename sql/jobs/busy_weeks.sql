-- The weeks in which a cluster's users submitted jobs, as the number of whole weeks from Monday
-- 1970-01-05 00:00 UTC to each week's Monday (UTC, whatever the session's time zone): the
-- pipeline splits its history over these weeks, so a gap in the log (an outage, a break in the
-- accounting) leaves no window empty.
SELECT DISTINCT CAST(floor((epoch(submit_time) - 345600) / 604800) AS BIGINT) AS week
FROM jobs
WHERE cluster = $cluster
ORDER BY week;
