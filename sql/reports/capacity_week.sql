-- Capacity rows of a cluster ($cluster) in force during the week ($week_start): per partition, the
-- latest row dated before the week ends (else the earliest row), as the replay and the marts use.
SELECT partition, cores, gpus, mem_mib, source, valid_from
FROM (
    SELECT *, row_number() OVER (
        PARTITION BY partition
        ORDER BY (valid_from < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY) DESC,
                 CASE WHEN valid_from < $week_start::TIMESTAMPTZ + INTERVAL 7 DAY THEN epoch(valid_from) ELSE -epoch(valid_from) END DESC
    ) AS rn
    FROM capacity
    WHERE cluster = $cluster
)
WHERE rn = 1
ORDER BY partition;
