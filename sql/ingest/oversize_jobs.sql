-- Per cluster in $1 (a list): its jobs that ask for more than their pool has (issue 54), sized as
-- the replay sizes them (the larger of allocated and requested) against the latest capacity of
-- their partition, else of the whole cluster ('*'). A replay leaves such jobs out; a log whose
-- jobs all do replays nothing. Unknown memory (NULL mem_mib) constrains nothing.
WITH cap AS (
    SELECT cluster, partition, cores, gpus, mem_mib FROM (
        SELECT *, row_number() OVER (PARTITION BY cluster, partition ORDER BY valid_from DESC) AS rn
        FROM capacity WHERE list_contains($1, cluster)
    ) WHERE rn = 1
),
sized AS (
    SELECT j.cluster,
           greatest(j.alloc_cpus, j.req_cpus) AS cpus,
           greatest(coalesce(j.alloc_gpus, 0), coalesce(j.req_gpus, 0)) AS gpus,
           greatest(j.alloc_mem_mib, j.req_mem_mib) AS mem,
           coalesce(p.cores, w.cores) AS cap_cores,
           coalesce(p.gpus, w.gpus) AS cap_gpus,
           CASE WHEN p.cluster IS NOT NULL THEN p.mem_mib ELSE w.mem_mib END AS cap_mem
    FROM jobs j
    LEFT JOIN cap p ON p.cluster = j.cluster AND p.partition = j.partition
    LEFT JOIN cap w ON w.cluster = j.cluster AND w.partition = '*'
    WHERE list_contains($1, j.cluster) AND (p.cluster IS NOT NULL OR w.cluster IS NOT NULL)
)
SELECT cluster,
       count(*) AS jobs,
       count(*) FILTER (WHERE cpus > cap_cores OR gpus > cap_gpus OR mem > cap_mem) AS over,
       count(*) FILTER (WHERE cpus > cap_cores) AS over_cores, max(cpus) AS max_cores, max(cap_cores) AS cap_cores,
       count(*) FILTER (WHERE gpus > cap_gpus) AS over_gpus, max(gpus) AS max_gpus, max(cap_gpus) AS cap_gpus,
       count(*) FILTER (WHERE mem > cap_mem) AS over_mem, max(mem) AS max_mem, max(cap_mem) AS cap_mem
FROM sized
GROUP BY cluster
HAVING count(*) FILTER (WHERE cpus > cap_cores OR gpus > cap_gpus OR mem > cap_mem) > 0
ORDER BY cluster;
