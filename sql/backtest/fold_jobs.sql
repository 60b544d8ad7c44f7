-- What a walk-forward fold learns from (flows/backtest.py): the cluster's jobs submitted before the
-- fold's origin, every column, copied into the fold's own warehouse.
SELECT * FROM jobs WHERE cluster = $cluster AND submit_time < $before
