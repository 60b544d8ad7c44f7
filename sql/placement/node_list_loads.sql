-- Why a cluster ($1) may have no node list: the node lists ingested, for it and for other
-- clusters, with their outcome and line counts (newest first).
SELECT cluster, path, outcome, coalesce(lines_read, 0) AS lines_read, coalesce(rows_loaded, 0) AS rows_loaded,
       coalesce(rows_quarantined, 0) AS rows_quarantined, message,
       (SELECT count(*) FROM nodes WHERE nodes.cluster = $1) AS nodes_now
FROM ingest_files
WHERE format = 'openb-nodes'
ORDER BY cluster = $1 DESC, finished_at DESC NULLS LAST;
