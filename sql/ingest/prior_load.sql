-- What ingest recorded for a file's content before ($sha256): one row per earlier load, loaded or
-- failed, with the cluster(s) it went to and its format (warehouse/ingest_log.py `earlier_load`
-- decides whether one of them is a load of the same file for the same cluster).
SELECT outcome, cluster, format FROM ingest_files WHERE sha256 = $sha256 ORDER BY finished_at;
