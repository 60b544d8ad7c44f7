-- The controller's differences (with bootstrap intervals over weeks) of one validation ($heldout_id).
SELECT *
FROM heldout_diffs
WHERE heldout_id = $heldout_id
ORDER BY reference_kind DESC, rowid;
