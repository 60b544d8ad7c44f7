-- Append the quarantined lines the parallel parsers staged as Parquet ($1: the parts' glob); each
-- row carries its path, line number, raw text and reason; $2: the cluster(s) of the load; $3: the
-- file's SHA-256 (staging may start before the hash is known).
INSERT INTO quarantine BY NAME SELECT *, $2::VARCHAR AS cluster, $3::VARCHAR AS file_sha256 FROM read_parquet($1);
