-- Every cluster with jobs in the warehouse, by name (for error messages that list what is there).
SELECT DISTINCT cluster FROM jobs ORDER BY cluster;
