-- The columns of `ingest_files`' primary key (an older warehouse: sha256 alone).
SELECT constraint_column_names FROM duckdb_constraints()
WHERE table_name = 'ingest_files' AND constraint_type = 'PRIMARY KEY';
