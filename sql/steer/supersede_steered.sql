-- Jobs set again and confirmed: their earlier open rows are closed at the new row's time ($cluster, $stamp;
-- the ids in __ids); the rows this cycle wrote ahead ($cycle_id) stay open.
UPDATE steered_jobs SET released_at = $stamp
WHERE cluster = $cluster AND released_at IS NULL AND cycle_id <> $cycle_id AND job_id IN (SELECT job_id FROM __ids);
