-- What export needs to know of a cluster ($cluster): the longest time limit and the longest wait seen.
SELECT max(timelimit_s) AS longest_timelimit_s, max(wait_s) AS longest_wait_s
FROM jobs
WHERE cluster = $cluster;
