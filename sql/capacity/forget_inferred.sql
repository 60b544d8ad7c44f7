-- Drop a cluster's ($1) inferred capacity before it is computed again (or when its jobs are gone).
DELETE FROM capacity WHERE cluster = $1 AND source = 'inferred-peak';
