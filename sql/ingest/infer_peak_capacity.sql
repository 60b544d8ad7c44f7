-- Capacity inferred from the peak concurrent allocation, for clusters with no capacity rows at
-- all (SPEC §5). Outputs say so: source = 'inferred-peak'. $1 = cluster.
WITH ev AS (
    SELECT start_time AS t, alloc_cpus AS dc, coalesce(alloc_gpus, 0) AS dg, coalesce(alloc_mem_mib, 0) AS dm, alloc_nodes AS dn
    FROM jobs WHERE cluster = $1 AND start_time IS NOT NULL AND end_time IS NOT NULL AND alloc_cpus IS NOT NULL
    UNION ALL
    SELECT end_time, -alloc_cpus, -coalesce(alloc_gpus, 0), -coalesce(alloc_mem_mib, 0), -alloc_nodes
    FROM jobs WHERE cluster = $1 AND start_time IS NOT NULL AND end_time IS NOT NULL AND alloc_cpus IS NOT NULL
),
run AS (
    SELECT t,
           sum(dc) OVER w AS cpus, sum(dg) OVER w AS gpus, sum(dm) OVER w AS mem, sum(dn) OVER w AS nodes
    FROM ev
    WINDOW w AS (ORDER BY t, dc ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT max(nodes) AS nodes, max(cpus) AS cores, max(gpus) AS gpus, nullif(max(mem), 0) AS mem_mib,
       (SELECT min(submit_time) FROM jobs WHERE cluster = $1) AS valid_from
FROM run;
