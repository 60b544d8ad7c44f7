-- Published controller policies (SPEC §9): one row per artifact folder
-- (<database folder>/policies/<policy_id>/). Written by models/controller/artifact.py.
--   sums_sha256   SHA-256 of the folder's SHA256SUMS file: anchors the artifact to this row
--   fqe_value     DiscreteFQE estimate of the policy's value (mean over validation states)
--   behaviour_value  discounted return of the logged behaviour on the same states (for scale)
--   replay_score  the replay evaluation's score when one ran (NULL otherwise)
CREATE TABLE IF NOT EXISTS policies (
    policy_id        VARCHAR PRIMARY KEY,
    cluster          VARCHAR NOT NULL,
    partition        VARCHAR NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    path             VARCHAR NOT NULL,
    train_from       TIMESTAMPTZ NOT NULL,
    train_to         TIMESTAMPTZ NOT NULL,
    valid_from       TIMESTAMPTZ,
    valid_to         TIMESTAMPTZ,
    algorithm        VARCHAR NOT NULL,
    n_steps          BIGINT NOT NULL,
    seed             BIGINT NOT NULL,
    n_train_tuples   BIGINT NOT NULL,
    dataset_sha256   VARCHAR NOT NULL,
    sums_sha256      VARCHAR NOT NULL,
    fqe_value        DOUBLE,
    behaviour_value  DOUBLE,
    replay_score     DOUBLE,
    menu             VARCHAR,            -- the objectives action i runs, comma-separated
    action_shares    VARCHAR,            -- JSON {objective: share of validation states where the policy picks it}
    code_version     VARCHAR NOT NULL
);
-- warehouses created before the objective menu
ALTER TABLE policies ADD COLUMN IF NOT EXISTS menu VARCHAR;
ALTER TABLE policies ADD COLUMN IF NOT EXISTS action_shares VARCHAR;
