-- Written-ahead rows of a cycle ($cluster, $cycle_id) for jobs Slurm was read back not to carry (the ids in
-- __ids): the update did not reach them; their earlier rows stay.
DELETE FROM steered_jobs
WHERE cluster = $cluster AND cycle_id = $cycle_id AND released_at IS NULL AND job_id IN (SELECT job_id FROM __ids);
