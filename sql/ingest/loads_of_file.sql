-- The loads recorded for a file ($1: its SHA-256, or the start of it as `ingest_files` shows it;
-- $2: one cluster, or NULL for every load): what `metapilot forget` removes.
SELECT sha256, cluster, format, outcome, path FROM ingest_files
WHERE starts_with(sha256, $1) AND ($2 IS NULL OR cluster = $2)
ORDER BY finished_at;
