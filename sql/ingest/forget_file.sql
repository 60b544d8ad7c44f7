-- Remove what an earlier load of a file wrote, inside the new load's transaction (a reload with
-- --encoding) or when `metapilot forget` removes it. $1: its SHA-256; $2: the cluster of that load when the file's lines name no cluster
-- (its other loads, for other clusters, stay), else NULL. Its `ingest_files` row is replaced by
-- the new load's.
DELETE FROM jobs WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2);
DELETE FROM quarantine WHERE file_sha256 = $1 AND ($2 IS NULL OR cluster = $2);
DELETE FROM data_check_runs WHERE file_sha256 = $1 AND ($2 IS NULL OR cluster = $2);
-- node lists and node metrics (SPEC §11) that the file gave, for `metapilot forget`
DELETE FROM nodes WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2);
DELETE FROM node_metrics WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2);
