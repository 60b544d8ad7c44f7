-- Drop every capacity entry of a cluster ($cluster) before a config replaces them.
DELETE FROM capacity WHERE cluster = $cluster;
