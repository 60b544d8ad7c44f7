-- Every dated capacity row of a cluster (SPEC §5), valid_from as epoch seconds, for the as-run
-- state's capacity at each epoch (transforms/asrun_state.py with_capacity).
SELECT partition, epoch(valid_from)::BIGINT AS valid_from_s, cores, gpus, mem_mib
FROM capacity
WHERE cluster = $cluster
ORDER BY partition, valid_from;
