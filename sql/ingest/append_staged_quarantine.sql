-- Append the quarantined lines the parallel parsers staged as Parquet ($1: the parts' glob); each
-- row carries its file, line number, raw text and reason; $2: the cluster(s) of the load.
INSERT INTO quarantine BY NAME SELECT *, $2::VARCHAR AS cluster FROM read_parquet($1);
