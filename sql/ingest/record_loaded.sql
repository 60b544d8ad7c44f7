-- A file loaded (warehouse/ingest_log.py): its line counts, which reconcile (read = loaded + merged +
-- quarantined + skipped); earlier records of the same load were dropped (forget_record.sql).
-- $outcome: 'loaded', or 'quarantined' when every line was refused (that load blocks no reload).
INSERT OR REPLACE INTO ingest_files (sha256, path, bytes, format, cluster, lines_read, rows_loaded, jobs_written,
                                     rows_merged, rows_quarantined, lines_skipped, started_at, finished_at, outcome,
                                     message)
VALUES ($sha256, $path, $bytes, $format, $cluster, $lines_read, $rows_loaded, $jobs_written,
        $rows_merged, $rows_quarantined, $lines_skipped, $started_at, $finished_at, $outcome, $message);
