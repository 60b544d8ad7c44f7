-- The most recent validation, of one cluster or ($cluster NULL) of any.
SELECT validation_id
FROM validations
WHERE ($cluster::VARCHAR IS NULL OR cluster = $cluster)
ORDER BY created_at DESC, validation_id DESC
LIMIT 1;
