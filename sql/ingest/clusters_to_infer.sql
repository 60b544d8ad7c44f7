-- Clusters whose capacity is inferred (SPEC §5): jobs, and no configured or SWF-header capacity.
-- Their peak allocation is computed again whenever data arrives (a log ingested in parts, hourly
-- `collect`), so the first part's peak never freezes it; a configured capacity is never touched.
SELECT DISTINCT cluster FROM jobs
WHERE cluster NOT IN (SELECT cluster FROM capacity WHERE source <> 'inferred-peak')
ORDER BY cluster;
