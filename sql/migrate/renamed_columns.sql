-- Columns that still carry an old name (issue 36: one meaning per name): the held-out replay's id was
-- validation_id, the time of a file's data checks validated_at.
SELECT table_name, column_name
FROM information_schema.columns
WHERE table_schema = current_schema()
  AND ((column_name = 'validation_id'
        AND table_name IN ('heldout_replays', 'heldout_weeks', 'heldout_diffs', 'published_policies'))
       OR (column_name = 'validated_at' AND table_name = 'data_check_runs'))
ORDER BY table_name, column_name
