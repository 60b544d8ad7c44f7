-- Every file's data-check run, oldest first: what the data-docs site renders.
SELECT run_id FROM data_check_runs ORDER BY checked_at, run_id;
