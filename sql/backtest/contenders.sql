-- A walk forward's contenders over its span, as stored by warehouse/backtest_store.py.
SELECT *
FROM backtests
WHERE backtest_id = $backtest_id
ORDER BY contender
