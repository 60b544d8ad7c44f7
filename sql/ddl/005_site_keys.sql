-- The site key's fingerprints (SPEC §8): the key itself lives outside the warehouse (secret.key
-- beside the database, or $METAPILOT_SECRET_FILE). An ingest checks its key against the latest
-- row and refuses another; a new key is recorded only on request (`metapilot ingest --new-key`).
CREATE TABLE IF NOT EXISTS site_keys (
    fingerprint  VARCHAR NOT NULL,      -- HMAC of a fixed label under the key: does not reveal it
    recorded_at  TIMESTAMPTZ NOT NULL,
    key_file     VARCHAR,               -- where the key was read from
    note         VARCHAR NOT NULL       -- first key | key in use when recorded | new key accepted (--new-key)
);
