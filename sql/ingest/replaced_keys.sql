-- Before a load's rows are merged: the job keys of this file ($1; $2 the load's cluster when its
-- lines name none, else NULL) that rows of other files already hold. A line whose row replaces one
-- of them is counted as merged, not loaded (issue 41: a file loaded once half-written, then whole).
CREATE OR REPLACE TEMP TABLE _replaced_keys AS
SELECT DISTINCT j.cluster, j.job_id, j.submit_time
FROM jobs j
WHERE j.source_file_id = $1 AND ($2 IS NULL OR j.cluster = $2)
  AND EXISTS (
      SELECT 1 FROM jobs o
      WHERE o.cluster = j.cluster AND o.job_id = j.job_id AND o.submit_time = j.submit_time
        AND o.source_file_id <> $1
  );
