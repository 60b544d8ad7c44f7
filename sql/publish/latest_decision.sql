-- The latest publish decision of a cluster ($cluster): the last one written (rowid), not the latest
-- published_at: a row stamped in the future (a clock set forward) must not hide every later publish.
-- Every column (a warehouse opened read-only may predate the newer ones: the caller reads by name).
SELECT *
FROM published_policies
WHERE cluster = $cluster
ORDER BY rowid DESC
LIMIT 1;
