-- Tables that still carry the held-out replay's id under its old name, validation_id (issue 36).
SELECT table_name
FROM information_schema.columns
WHERE table_schema = current_schema()
  AND column_name = 'validation_id'
  AND table_name IN ('heldout_replays', 'heldout_weeks', 'heldout_diffs', 'published_policies')
ORDER BY table_name
