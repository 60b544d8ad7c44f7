-- How many of a cluster's jobs name one of the given accounts or users ($2: the names as a site's tools
-- print them, $3: the same names hashed with the site key): which naming the warehouse uses for them.
SELECT count(*) FILTER (WHERE list_contains($2, account_id) OR list_contains($2, user_id)) AS as_given,
       count(*) FILTER (WHERE list_contains($3, account_id) OR list_contains($3, user_id)) AS hashed
FROM jobs
WHERE cluster = $1;
