-- A job set again: its earlier open rows are closed at the new row's time ($cluster, $stamp; the ids in __ids).
UPDATE steered_jobs SET released_at = $stamp
WHERE cluster = $cluster AND released_at IS NULL AND job_id IN (SELECT job_id FROM __ids);
