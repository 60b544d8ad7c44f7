-- Where a cluster's history ends: its last submit time (NULL without jobs). $partition NULL: every
-- partition.
SELECT max(submit_time) AS last_submit
FROM jobs
WHERE cluster = $cluster AND ($partition::VARCHAR IS NULL OR partition = $partition);
