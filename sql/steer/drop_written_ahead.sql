-- A cycle's written-ahead rows ($cluster, $cycle_id), when its update failed as a whole: the jobs keep
-- the rows of what was set before.
DELETE FROM steered_jobs WHERE cluster = $cluster AND cycle_id = $cycle_id AND released_at IS NULL;
