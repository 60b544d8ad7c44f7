-- What one load of a file holds in the warehouse ($1: SHA-256; $2: the load's cluster when the
-- file's lines name no cluster, else NULL): job rows, quarantined lines, data-check runs, node-list
-- and node-metric rows, and the clusters of its jobs.
SELECT (SELECT count(*) FROM jobs WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2)) AS jobs,
       (SELECT count(*) FROM quarantine WHERE file_sha256 = $1 AND ($2 IS NULL OR cluster = $2)) AS quarantined,
       (SELECT count(*) FROM data_check_runs WHERE file_sha256 = $1 AND ($2 IS NULL OR cluster = $2)) AS data_checks,
       (SELECT count(*) FROM nodes WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2))
     + (SELECT count(*) FROM node_metrics WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2)) AS node_rows,
       (SELECT list(DISTINCT cluster) FROM jobs WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2)) AS clusters;
