-- Whether a file of this size was loaded from this path before ($1: the path as shown, $2: its
-- size in bytes): then it is probably the same content, and ingest hashes it before parsing any of
-- it, so that a file loaded before costs only its hash (warehouse/ingest.py `ingest_file_to`).
SELECT count(*) > 0 FROM ingest_files WHERE path = $1 AND bytes = $2 AND outcome = 'loaded';
