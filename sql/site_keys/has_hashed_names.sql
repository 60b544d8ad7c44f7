-- Whether the warehouse already holds rows whose names were hashed (jobs or quarantined lines).
SELECT EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM quarantine) AS has_rows;
