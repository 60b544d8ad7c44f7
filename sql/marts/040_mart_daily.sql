-- Daily marts (UTC days; period_label 'YYYY-MM-DD'). Definitions: 030_mart_periods.sql.

-- One row per (cluster, partition, day), from the cluster's first submit to its last event.
CREATE OR REPLACE VIEW mart_daily AS SELECT * FROM mart_periods('day', true);

-- The same for the whole cluster (all partitions together, partition = '*').
CREATE OR REPLACE VIEW mart_daily_cluster AS SELECT * FROM mart_periods('day', false);

-- Wait of the jobs started each day, by XDMoD job-size class (rows only where jobs started).
CREATE OR REPLACE VIEW mart_wait_by_size_daily AS SELECT * FROM mart_wait_by_size('day', true);

CREATE OR REPLACE VIEW mart_wait_by_size_daily_cluster AS SELECT * FROM mart_wait_by_size('day', false);
