-- Every file's data-check run, oldest first: what the data-docs site renders.
SELECT run_id FROM validation_runs ORDER BY validated_at, run_id;
