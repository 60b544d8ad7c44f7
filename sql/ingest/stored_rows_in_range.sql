-- Rows other files put in the warehouse for the same clusters and submit range as the file being
-- committed: when there are none (and the file's own keys are unique), the commit skips the merge.
-- $1 file sha256, $2 cluster names (list), $3 first submit, $4 last submit
SELECT count(*)
FROM jobs
WHERE source_file_id <> $1
  AND cluster IN (SELECT unnest($2))
  AND submit_time BETWEEN $3 AND $4;
