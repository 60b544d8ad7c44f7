-- Files that could not be loaded (failed, or every line quarantined) and that no load has replaced
-- since: the same content loaded, or a later load of the same path (the file copied again whole).
-- $cluster: only those of that cluster, and those whose cluster is unknown (a format never
-- recognised, or a log that names its clusters in lines that did not load: the recorded cluster
-- is only a guess from the file name); NULL for all. What `serve --list` and the weekly report show.
SELECT f.path, f.outcome, f.message, f.cluster, f.sha256, f.finished_at
FROM ingest_files f
WHERE f.outcome IN ('failed', 'quarantined')
  AND ($cluster IS NULL OR f.format IS NULL OR f.format IN ('sacct', 'sacct-json') OR f.cluster = $cluster
       OR list_contains(string_split(f.cluster, ','), $cluster))
  AND NOT EXISTS (
      SELECT 1 FROM ingest_files g
      WHERE g.outcome = 'loaded'
        AND (g.sha256 = f.sha256 OR (g.path = f.path AND g.finished_at > f.finished_at))
  )
ORDER BY f.finished_at DESC;
