-- What MetaPilot (and the leaders) ran in each period of a walk forward.
SELECT *
FROM backtest_periods
WHERE backtest_id = $backtest_id
ORDER BY period
