-- A file loaded (warehouse/ingest_log.py): its line counts, which reconcile (read = loaded + merged +
-- quarantined + skipped), replacing an earlier record of the same content.
INSERT OR REPLACE INTO ingest_files (sha256, path, bytes, format, cluster, lines_read, rows_loaded, jobs_written,
                                     rows_merged, rows_quarantined, lines_skipped, started_at, finished_at, outcome,
                                     message)
VALUES ($sha256, $path, $bytes, $format, $cluster, $lines_read, $rows_loaded, $jobs_written,
        $rows_merged, $rows_quarantined, $lines_skipped, $started_at, $finished_at, 'loaded', $message);
