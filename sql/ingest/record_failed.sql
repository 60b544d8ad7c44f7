-- A file that failed to load (its transaction rolled back, nothing of it is in the warehouse), with
-- the message the user saw.
INSERT OR REPLACE INTO ingest_files (sha256, path, bytes, format, cluster, started_at, finished_at, outcome, message)
VALUES ($sha256, $path, $bytes, $format, $cluster, $started_at, $finished_at, 'failed', $message);
