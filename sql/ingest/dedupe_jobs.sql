-- After a file's rows are appended to `jobs` (inside its transaction), keep one row per key
-- (cluster, job_id, submit_time): within the file the last record wins; against rows of earlier
-- files the new record wins, except that a record of a job that has not ended never replaces
-- one that has (a RUNNING record arriving after the COMPLETED one). $1 = this file's sha256; $2 = the
-- load's cluster when the file's lines name no cluster (the file may be loaded for others too), else NULL.
DELETE FROM jobs AS j
USING (
    SELECT cluster, job_id, submit_time, max(source_line) AS keep_line,
           bool_or(state IN ('BOOT_FAIL','CANCELLED','COMPLETED','DEADLINE','FAILED','NODE_FAIL',
                             'OUT_OF_MEMORY','PREEMPTED','TIMEOUT')) AS new_ended
    FROM jobs WHERE source_file_id = $1 AND ($2 IS NULL OR cluster = $2)
    GROUP BY ALL
) AS n
WHERE j.cluster = n.cluster AND j.job_id = n.job_id AND j.submit_time = n.submit_time
  AND (
        (j.source_file_id = $1 AND j.source_line < n.keep_line)
     OR (j.source_file_id <> $1 AND (n.new_ended OR j.state IS NULL OR j.state NOT IN
            ('BOOT_FAIL','CANCELLED','COMPLETED','DEADLINE','FAILED','NODE_FAIL','OUT_OF_MEMORY','PREEMPTED','TIMEOUT')))
  );

-- New records that lost to an ended record already in the warehouse.
DELETE FROM jobs AS j
WHERE j.source_file_id = $1 AND ($2 IS NULL OR j.cluster = $2)
  AND EXISTS (
      SELECT 1 FROM jobs o
      WHERE o.cluster = j.cluster AND o.job_id = j.job_id AND o.submit_time = j.submit_time
        AND o.source_file_id <> $1
  );
