-- Who submitted each job of a span (hashed ids, as stored): the walk forward's fairness figures.
SELECT CAST(job_id AS VARCHAR) AS job_id, user_id AS "user", account_id AS account
FROM jobs
WHERE cluster = $cluster
  AND submit_time >= $span_from
  AND submit_time <  $span_to;
