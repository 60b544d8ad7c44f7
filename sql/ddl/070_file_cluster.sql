-- Which load of a file a quarantined line or a data-check run belongs to: a file whose lines name
-- no cluster can be loaded for several clusters (the same `file_sha256`), told apart by `cluster`
-- (= ingest_files.cluster of that load).
ALTER TABLE quarantine ADD COLUMN IF NOT EXISTS cluster VARCHAR;
ALTER TABLE data_check_runs ADD COLUMN IF NOT EXISTS cluster VARCHAR;
