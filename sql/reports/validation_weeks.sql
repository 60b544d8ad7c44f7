-- Per-week figures of every contender of one validation ($validation_id).
SELECT *
FROM validation_weeks
WHERE validation_id = $validation_id
ORDER BY contender, week_start;
