-- The inferred capacity entries of a cluster ($1), as (nodes, cores, gpus, mem_mib, valid_from).
SELECT nodes, cores, gpus, mem_mib, valid_from FROM capacity
WHERE cluster = $1 AND source = 'inferred-peak' ORDER BY valid_from;
