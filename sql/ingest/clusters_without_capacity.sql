-- Clusters with jobs but no capacity entry (no config, no SWF header): their capacity is inferred
-- from the peak allocation (infer_peak_capacity.sql).
SELECT DISTINCT cluster FROM jobs WHERE cluster NOT IN (SELECT cluster FROM capacity) ORDER BY cluster;
