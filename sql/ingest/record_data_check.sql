-- The data checks of one loaded file (warehouse/ingest_log.py): the suite, whether it passed, and
-- per expectation its name, success and unexpected count (JSON); $cluster: ingest_files.cluster of the load.
INSERT INTO data_check_runs (run_id, file_sha256, cluster, suite_name, success, evaluated, failed_rows, results_json,
                             checked_at)
VALUES ($run_id, $file_sha256, $cluster, $suite_name, $success, $evaluated, $failed_rows, $results_json, $checked_at);
