-- Marts, layer 2 (intermediate): the period grid and the capacity that applies to each period.
--
-- The grid is generated from the data: per cluster, every period from the one holding the first
-- submit to the one holding the last event (end, else start, else submit) of that cluster, crossed
-- with the cluster's partitions (by_partition = true) or with the single whole-cluster key '*'
-- (by_partition = false). Periods without any activity are kept (zero counts and hours), so that
-- idle days show utilisation 0 rather than no row.
--
-- Capacity per grid row, from the `capacity` table (SPEC §5): the row for (cluster, partition) with
-- the latest valid_from <= period start; if there is none, the cluster's '*' row with the latest
-- valid_from <= period start (utilisation of a partition is then measured against the whole
-- cluster); NULL when neither is known. One addition, for periods (in practice a cluster's first) when no row at
-- all is valid yet at the period start but one becomes valid inside the period, that (earliest) row
-- is used, so that capacity dated at the first submit (inferred peaks, SWF headers) covers the
-- first day/week. Whole-cluster rows (partition '*') use the '*' row only: partition rows
-- are not summed, because Slurm partitions may share nodes.

CREATE OR REPLACE MACRO mp_partition_key(by_partition, partition) AS
    CASE WHEN by_partition THEN partition ELSE '*' END;

CREATE OR REPLACE MACRO int_period_grid(grain, by_partition) AS TABLE
WITH bounds AS (
    SELECT
        cluster,
        date_trunc(grain, min(submit_ts)) AS first_ts,
        date_trunc(grain, max(greatest(submit_ts, coalesce(start_ts, submit_ts), coalesce(end_ts, submit_ts)))) AS last_ts
    FROM stg_jobs
    GROUP BY cluster
),
periods AS (
    SELECT cluster, unnest(range(first_ts, last_ts + mp_period_step(grain), mp_period_step(grain))) AS period_ts
    FROM bounds
),
keys AS (
    SELECT DISTINCT cluster, mp_partition_key(by_partition, partition) AS partition
    FROM stg_jobs
)
SELECT
    p.cluster,
    k.partition,
    p.period_ts,
    timezone('UTC', p.period_ts) AS period_start
FROM periods p
JOIN keys k USING (cluster);

-- Rows valid at the period start come first (partition, then '*'); only when neither exists, the
-- first row that becomes valid inside the period (partition, then '*').
CREATE OR REPLACE MACRO int_period_capacity(grain, by_partition) AS TABLE
WITH star AS (SELECT * FROM capacity WHERE partition = '*'),
g AS (
    SELECT *, timezone('UTC', period_ts + mp_period_step(grain)) AS period_end
    FROM int_period_grid(grain, by_partition)
),
joined AS (
    SELECT
        g.*,
        CASE
            WHEN pa.valid_from IS NOT NULL THEN g.partition
            WHEN sa.valid_from IS NOT NULL THEN '*'
            WHEN pn.valid_from < g.period_end THEN g.partition
            WHEN sn.valid_from < g.period_end THEN '*'
        END AS cap_partition,
        CASE
            WHEN pa.valid_from IS NOT NULL THEN pa.valid_from
            WHEN sa.valid_from IS NOT NULL THEN sa.valid_from
            WHEN pn.valid_from < g.period_end THEN pn.valid_from
            WHEN sn.valid_from < g.period_end THEN sn.valid_from
        END AS cap_valid_from
    FROM g
    ASOF LEFT JOIN capacity pa
        ON g.cluster = pa.cluster AND g.partition = pa.partition AND g.period_start >= pa.valid_from
    ASOF LEFT JOIN capacity pn
        ON g.cluster = pn.cluster AND g.partition = pn.partition AND g.period_start < pn.valid_from
    ASOF LEFT JOIN star sa
        ON g.cluster = sa.cluster AND g.period_start >= sa.valid_from
    ASOF LEFT JOIN star sn
        ON g.cluster = sn.cluster AND g.period_start < sn.valid_from
)
SELECT
    j.cluster,
    j.partition,
    j.period_ts,
    j.period_start,
    c.cores AS capacity_cores,
    c.gpus AS capacity_gpus,
    c.nodes AS capacity_nodes,
    c.mem_mib AS capacity_mem_mib,
    c.partition AS capacity_partition,
    c.valid_from AS capacity_valid_from,
    c.source AS capacity_source
FROM joined j
LEFT JOIN capacity c
    ON c.cluster = j.cluster
   AND c.partition = j.cap_partition
   AND c.valid_from = j.cap_valid_from;

CREATE OR REPLACE VIEW int_day_capacity AS SELECT * FROM int_period_capacity('day', true);

CREATE OR REPLACE VIEW int_week_capacity AS SELECT * FROM int_period_capacity('week', true);
