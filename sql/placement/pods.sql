-- The pods (or jobs) of a cluster as the node-level replay needs them, in list order ($1 = cluster).
-- Jobs of other formats map onto the same model: whole cores, whole GPUs.
SELECT
    coalesce(cpu_milli, req_cpus * 1000, alloc_cpus * 1000, 0)                 AS cpu_milli,
    coalesce(req_mem_mib, alloc_mem_mib, 0)                                    AS memory_mib,
    coalesce(req_gpus, alloc_gpus, 0)                                          AS num_gpu,
    coalesce(gpu_milli, CASE WHEN coalesce(req_gpus, alloc_gpus, 0) > 0 THEN 1000 ELSE 0 END) AS gpu_milli,
    gpu_type                                                                   AS gpu_spec,
    CAST(epoch(submit_time) AS DOUBLE)                                         AS creation_s,
    CAST(epoch(end_time) - epoch(coalesce(start_time, submit_time)) AS DOUBLE) AS duration_s
FROM jobs
WHERE cluster = $1
ORDER BY source_file_id, source_line, job_id;
