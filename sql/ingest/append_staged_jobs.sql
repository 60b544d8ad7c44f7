-- Append the job rows the parallel parsers staged as Parquet ($1: the file's SHA-256, $2: the load
-- time, $3: the parts' glob).
INSERT INTO jobs BY NAME
SELECT *, $1::VARCHAR AS source_file_id, $2::TIMESTAMPTZ AS ingested_at
FROM read_parquet($3);
