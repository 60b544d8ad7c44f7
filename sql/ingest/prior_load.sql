-- What ingest recorded for a file's content before ($sha256), if anything: loaded or failed, for
-- which cluster, in which format.
SELECT outcome, cluster, format FROM ingest_files WHERE sha256 = $sha256;
