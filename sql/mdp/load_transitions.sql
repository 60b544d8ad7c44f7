-- Stored tuples of one cluster's partition ('*' = the whole cluster). Every other filter is optional
-- (NULL: not applied): the window they were built for, the range of epoch starts [from, to), the
-- state spec, the sources.
SELECT *
FROM mdp_transitions
WHERE cluster = $cluster
  AND partition = $partition
  AND ($window_from::TIMESTAMPTZ IS NULL OR (window_from = $window_from AND window_to = $window_to))
  AND ($epochs_from::TIMESTAMPTZ IS NULL OR epoch_start >= $epochs_from)
  AND ($epochs_to::TIMESTAMPTZ IS NULL OR epoch_start < $epochs_to)
  AND ($spec::VARCHAR IS NULL OR state_spec = $spec)
  AND ($sources::VARCHAR[] IS NULL OR list_contains($sources, source))
ORDER BY source, behaviour_policy, seed, window_from, epoch_start;
