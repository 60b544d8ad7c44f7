-- Remove what an earlier load of a file ($1: its SHA-256) wrote, inside the new load's transaction
-- (a reload with --encoding). Its `ingest_files` row is replaced by the new load's.
DELETE FROM jobs WHERE source_file_id = $1;
DELETE FROM quarantine WHERE file_sha256 = $1;
DELETE FROM validation_runs WHERE file_sha256 = $1;
