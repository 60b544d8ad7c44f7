-- The controller's differences (with bootstrap intervals over weeks) of one validation ($validation_id).
SELECT *
FROM validation_diffs
WHERE validation_id = $validation_id
ORDER BY reference_kind DESC, rowid;
