-- The ids of the most recently registered policies (for an error about an unknown id).
SELECT policy_id FROM policies ORDER BY created_at DESC LIMIT 10;
