-- The first and last ISO weeks with submitted jobs of the cluster ($cluster): what a report for a
-- week outside the data says is there.
SELECT strftime(min(timezone('UTC', submit_time)), '%G-W%V') AS first_week,
       strftime(max(timezone('UTC', submit_time)), '%G-W%V') AS last_week
FROM jobs
WHERE cluster = $cluster;
