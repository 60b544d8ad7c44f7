-- Capacity inferred from the peak concurrent allocation, for clusters with no capacity rows at
-- all (SPEC §5). Outputs say so: source = 'inferred-peak'. $1 = cluster.
-- Events are summed per instant first: within an instant releases (negative deltas) come before
-- allocations, so the running totals peak at the end of an instant, and the window then sorts
-- instants, not every start and end (far fewer rows, far less memory on a multi-million-job file).
-- Memory counts what the replay charges a job, the larger of used and requested (issue 54): the
-- peak of used memory alone is below what jobs ask for, and then no job fits the cluster.
WITH ev AS (
    SELECT start_time AS t, alloc_cpus AS dc, coalesce(alloc_gpus, 0) AS dg,
           greatest(coalesce(alloc_mem_mib, 0), coalesce(req_mem_mib, 0)) AS dm, alloc_nodes AS dn
    FROM jobs WHERE cluster = $1 AND start_time IS NOT NULL AND end_time IS NOT NULL AND alloc_cpus IS NOT NULL
    UNION ALL
    SELECT end_time, -alloc_cpus, -coalesce(alloc_gpus, 0), -greatest(coalesce(alloc_mem_mib, 0), coalesce(req_mem_mib, 0)),
           -alloc_nodes
    FROM jobs WHERE cluster = $1 AND start_time IS NOT NULL AND end_time IS NOT NULL AND alloc_cpus IS NOT NULL
),
per_t AS (
    SELECT t, sum(dc) AS dc, sum(dg) AS dg, sum(dm) AS dm, sum(dn) AS dn FROM ev GROUP BY t
),
run AS (
    SELECT sum(dc) OVER w AS cpus, sum(dg) OVER w AS gpus, sum(dm) OVER w AS mem, sum(dn) OVER w AS nodes
    FROM per_t
    WINDOW w AS (ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT max(nodes) AS nodes, max(cpus) AS cores, max(gpus) AS gpus, nullif(max(mem), 0) AS mem_mib,
       (SELECT min(submit_time) FROM jobs WHERE cluster = $1) AS valid_from
FROM run;
