-- Warehouses from before the held-out replay had its own name (issue 36): its tables were called
-- validations / validation_weeks / validation_diffs. Renamed in place (rows kept); a no-op on a
-- warehouse that has the new names. Run before the DDL, so CREATE IF NOT EXISTS finds them.
ALTER TABLE IF EXISTS validations RENAME TO heldout_replays;
ALTER TABLE IF EXISTS validation_weeks RENAME TO heldout_weeks;
ALTER TABLE IF EXISTS validation_diffs RENAME TO heldout_diffs;
-- ... and the data checks of ingest were validation_runs.
ALTER TABLE IF EXISTS validation_runs RENAME TO data_check_runs;
