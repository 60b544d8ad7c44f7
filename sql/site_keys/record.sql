-- A site key seen for the first time, or replacing the earlier one (--new-key); only its
-- fingerprint is kept, never the key.
INSERT INTO site_keys (fingerprint, recorded_at, key_file, note) VALUES ($fingerprint, $recorded_at, $key_file, $note);
