-- Capacity of each partition of cluster $1 in force at time $2: the latest entry dated at or
-- before it, else the earliest entry (capacity known only from later on).
SELECT partition, nodes, cores, gpus, mem_mib, source, valid_from
FROM (
    SELECT *, row_number() OVER (
        PARTITION BY partition
        ORDER BY (valid_from <= coalesce($2::TIMESTAMPTZ, valid_from)) DESC,
                 CASE WHEN valid_from <= coalesce($2::TIMESTAMPTZ, valid_from) THEN epoch(valid_from) ELSE -epoch(valid_from) END DESC
    ) AS rn
    FROM capacity WHERE cluster = $1
)
WHERE rn = 1
ORDER BY partition;
