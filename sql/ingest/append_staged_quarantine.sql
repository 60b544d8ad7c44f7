-- Append the quarantined lines the parallel parsers staged as Parquet ($1: the parts' glob); each
-- row carries its file, line number, raw text and reason.
INSERT INTO quarantine BY NAME SELECT * FROM read_parquet($1);
