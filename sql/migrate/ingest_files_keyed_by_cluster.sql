-- A warehouse made before a file's identity included its cluster (issue 33): `ingest_files` was
-- keyed by sha256 alone. warehouse/db.py renamed it to ingest_files_v1 before the DDL ran; copy its
-- rows into the new table (one row per file then, so the backfill below is exact) and drop it.
INSERT INTO ingest_files BY NAME SELECT * REPLACE (coalesce(cluster, '') AS cluster) FROM ingest_files_v1;
DROP TABLE ingest_files_v1;
UPDATE quarantine AS q SET cluster = f.cluster FROM ingest_files AS f
WHERE q.cluster IS NULL AND q.file_sha256 = f.sha256;
UPDATE data_check_runs AS v SET cluster = f.cluster FROM ingest_files AS f
WHERE v.cluster IS NULL AND v.file_sha256 = f.sha256;
