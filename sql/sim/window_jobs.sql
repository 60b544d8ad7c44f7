-- Jobs of one cluster submitted in [$2, $3), optionally one partition ($4), for replay.
-- NULL bounds mean "from the first" / "to the last".
SELECT job_id, submit_time, start_time, end_time, wait_s, run_s, timelimit_s,
       req_cpus, alloc_cpus, req_gpus, alloc_gpus, req_mem_mib, alloc_mem_mib, partition, state,
       req_nodes, alloc_nodes, user_id, qos, account_id
FROM jobs
WHERE cluster = $1
  AND ($2::TIMESTAMPTZ IS NULL OR submit_time >= $2::TIMESTAMPTZ)
  AND ($3::TIMESTAMPTZ IS NULL OR submit_time <  $3::TIMESTAMPTZ)
  AND ($4::VARCHAR IS NULL OR partition = $4::VARCHAR)
ORDER BY submit_time, job_id;
