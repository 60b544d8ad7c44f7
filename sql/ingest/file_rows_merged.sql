-- What a file's load wrote to `jobs` after merging duplicates, as sql/ingest/file_rows.sql, but
-- counting as loaded only the lines of rows whose job the warehouse did not hold before
-- (`_replaced_keys`, sql/ingest/replaced_keys.sql): job rows, new lines, clusters.
SELECT count(*) AS jobs_written,
       count(DISTINCT source_line) FILTER (WHERE r.job_id IS NULL) AS rows_loaded,
       list(DISTINCT j.cluster) AS clusters
FROM jobs j
LEFT JOIN _replaced_keys r ON r.cluster = j.cluster AND r.job_id = j.job_id AND r.submit_time = j.submit_time
WHERE j.source_file_id = $1 AND ($2 IS NULL OR j.cluster = $2);
