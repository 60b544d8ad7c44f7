-- The most frequent reasons a load's lines were quarantined ($1: SHA-256, $2: the load's cluster
-- as `ingest_files` records it): what a refused file's message quotes.
SELECT reason, count(*) AS n FROM quarantine WHERE file_sha256 = $1 AND cluster = $2
GROUP BY reason ORDER BY n DESC, reason LIMIT 3;
