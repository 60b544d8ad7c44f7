-- The policy each cluster runs: the publish step promotes a trained, validated policy.
-- One row per promotion; the current one is the latest per (cluster, partition).
CREATE TABLE IF NOT EXISTS published_policies (
    cluster        VARCHAR NOT NULL,
    partition      VARCHAR NOT NULL,
    policy_id      VARCHAR NOT NULL,
    validation_id  VARCHAR,
    published_at   TIMESTAMPTZ NOT NULL,
    verdict        VARCHAR            -- the validation's plain-language verdict
);
