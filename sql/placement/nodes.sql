-- The node list of a cluster ($1 = cluster).
SELECT node, cpu_milli, memory_mib, gpus, gpu_model FROM nodes WHERE cluster = $1 ORDER BY node;
