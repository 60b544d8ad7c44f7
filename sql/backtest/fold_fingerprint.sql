-- What a walk-forward fold learns from, in a few numbers: the cluster's jobs submitted before the
-- origin (how many, when last loaded or replaced) and its capacity rows. Equal numbers, the same
-- past: a later walk forward reuses the fold's learning instead of repeating it.
SELECT
    (SELECT count(*) FROM jobs WHERE cluster = $cluster AND submit_time < $before) AS jobs,
    (SELECT max(ingested_at)::VARCHAR FROM jobs WHERE cluster = $cluster AND submit_time < $before) AS last_ingested,
    (SELECT count(*) FROM capacity WHERE cluster = $cluster) AS capacity_rows,
    (SELECT coalesce(sum(cores), 0) FROM capacity WHERE cluster = $cluster) AS capacity_cores,
    (SELECT max(valid_from)::VARCHAR FROM capacity WHERE cluster = $cluster) AS capacity_from
