-- The data-check runs $1 (run ids) with the file each checked (warehouse/data_docs.py). A file
-- loaded for two clusters has two `ingest_files` rows: a run belongs to the load recorded in the
-- same transaction, the one whose record time is nearest the run's (also right for warehouses
-- made before runs named their cluster).
SELECT v.run_id, v.file_sha256, v.suite_name, v.success, v.evaluated, v.failed_rows, v.results_json,
       v.checked_at, f.path, f.format, f.cluster
FROM data_check_runs v
LEFT JOIN ingest_files f ON f.sha256 = v.file_sha256
WHERE v.run_id IN (SELECT unnest($1))
QUALIFY row_number() OVER (PARTITION BY v.run_id
                           ORDER BY abs(epoch(coalesce(f.finished_at, f.started_at)) - epoch(v.checked_at))) = 1;
