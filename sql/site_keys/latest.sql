-- The fingerprint of the key the warehouse's names were last hashed with.
SELECT fingerprint FROM site_keys ORDER BY recorded_at DESC LIMIT 1;
