-- The last complete ISO week of a cluster's data ($cluster): the week before the one holding the
-- last submitted job (that week may be cut short by the end of the log). NULL when the data do not
-- reach past their first week.
WITH b AS (
    SELECT date_trunc('week', timezone('UTC', min(submit_time))) AS first_week,
           date_trunc('week', timezone('UTC', max(submit_time))) - INTERVAL 7 DAY AS last_week
    FROM jobs
    WHERE cluster = $cluster
)
SELECT timezone('UTC', last_week) AS week_start, strftime(last_week, '%G-W%V') AS week
FROM b
WHERE last_week >= first_week;
