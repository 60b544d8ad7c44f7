-- What a file's load wrote to `jobs` after merging duplicates ($1: its SHA-256; $2: the load's
-- cluster when the file's lines name no cluster, else NULL): job rows, the lines they came from,
-- and the clusters.
SELECT count(*) AS jobs_written, count(DISTINCT source_line) AS rows_loaded, list(DISTINCT cluster) AS clusters
FROM jobs
WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2);
