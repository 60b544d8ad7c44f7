-- Clusters the pipeline can learn from: history span, job count and where capacity comes from,
-- longest usable history first.
SELECT j.cluster,
       count(*)                              AS jobs,
       min(j.submit_time)                    AS first_submit,
       max(j.submit_time)                    AS last_submit,
       date_diff('day', min(j.submit_time), max(j.submit_time)) AS days,
       (SELECT string_agg(DISTINCT c.source, ',') FROM capacity c WHERE c.cluster = j.cluster) AS capacity_source
FROM jobs j
GROUP BY j.cluster
ORDER BY (date_diff('day', min(j.submit_time), max(j.submit_time)) >= 42) DESC, count(*) DESC, j.cluster;
