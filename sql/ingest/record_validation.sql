-- The data checks of one loaded file (warehouse/ingest_log.py): the suite, whether it passed, and
-- per expectation its name, success and unexpected count (JSON).
INSERT INTO validation_runs (run_id, file_sha256, suite_name, success, evaluated, failed_rows, results_json, validated_at)
VALUES ($run_id, $file_sha256, $suite_name, $success, $evaluated, $failed_rows, $results_json, $validated_at);
