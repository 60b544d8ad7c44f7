-- A node list describes the whole cluster ($cluster): drop the one loaded before.
DELETE FROM nodes WHERE cluster = $cluster;
