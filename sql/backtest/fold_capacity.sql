-- The cluster's capacity rows, copied into a walk-forward fold's own warehouse.
SELECT * FROM capacity WHERE cluster = $cluster
