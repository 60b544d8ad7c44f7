-- The most recent walk forward of a cluster (of any cluster when $cluster is NULL).
SELECT backtest_id
FROM backtests
WHERE $cluster IS NULL OR cluster = $cluster
ORDER BY created_at DESC, backtest_id DESC
LIMIT 1
