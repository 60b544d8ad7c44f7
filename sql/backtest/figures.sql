-- Every contender's figures per period, with the running totals from the span's start: the
-- cumulative wait-hours and summed bounded slowdown the report plots.
SELECT f.contender, f.period, p.period_from, p.period_to, f.jobs, f.wait_mean_s, f.wait_max_s, f.bsld_mean,
       sum(f.wait_sum_s) OVER w / 3600.0 AS wait_h_cum,
       sum(f.bsld_sum) OVER w AS bsld_sum_cum,
       CAST(sum(f.jobs) OVER w AS BIGINT) AS jobs_cum
FROM backtest_contender_periods f
JOIN backtest_periods p USING (backtest_id, period)
WHERE f.backtest_id = $backtest_id
WINDOW w AS (PARTITION BY f.contender ORDER BY f.period ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
ORDER BY f.contender, f.period
