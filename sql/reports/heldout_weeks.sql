-- Per-week figures of every contender of one validation ($heldout_id).
SELECT *
FROM heldout_weeks
WHERE heldout_id = $heldout_id
ORDER BY contender, week_start;
