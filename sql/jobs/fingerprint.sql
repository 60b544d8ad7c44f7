-- Changes whenever a cluster's jobs change (count and last load): part of every cache key over a
-- window of them.
SELECT count(*) AS jobs, max(ingested_at)::VARCHAR AS last_ingested FROM jobs WHERE cluster = $cluster;
