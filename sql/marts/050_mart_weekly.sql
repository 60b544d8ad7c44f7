-- Weekly marts (ISO weeks: Monday 00:00 UTC; period_label ISO 'YYYY-Www', e.g. '2016-W52').
-- Definitions: 030_mart_periods.sql. Utilisation is over the whole 168 h week, also for the first
-- and last (partial) weeks of the data.

CREATE OR REPLACE VIEW mart_weekly AS SELECT * FROM mart_periods('week', true);

CREATE OR REPLACE VIEW mart_weekly_cluster AS SELECT * FROM mart_periods('week', false);

CREATE OR REPLACE VIEW mart_wait_by_size_weekly AS SELECT * FROM mart_wait_by_size('week', true);

CREATE OR REPLACE VIEW mart_wait_by_size_weekly_cluster AS SELECT * FROM mart_wait_by_size('week', false);
