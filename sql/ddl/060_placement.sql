-- Node placement (SPEC §11): the node list of a cluster, node metrics, placement replay runs.
-- Written by warehouse/placement_ingest.py and warehouse/placement_store.py.

-- One row per node of a cluster (the openb node list; Slurm/PBS node lists map here too).
CREATE TABLE IF NOT EXISTS nodes (
    cluster        VARCHAR NOT NULL,
    node           VARCHAR NOT NULL,
    cpu_milli      BIGINT NOT NULL,
    memory_mib     BIGINT NOT NULL,
    gpus           BIGINT NOT NULL,
    gpu_model      VARCHAR,             -- NULL on CPU-only nodes
    source_file_id VARCHAR NOT NULL,
    source_line    BIGINT,
    ingested_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (cluster, node)
);

-- Node metrics as Prometheus exports them (text exposition, query_range JSON).
CREATE TABLE IF NOT EXISTS node_metrics (
    cluster        VARCHAR NOT NULL,
    node           VARCHAR NOT NULL,
    metric         VARCHAR NOT NULL,
    labels         VARCHAR NOT NULL,    -- JSON object, sorted keys, __name__ left out
    ts             TIMESTAMPTZ NOT NULL,
    value          DOUBLE,              -- NaN and +-Inf kept as Prometheus wrote them
    source_file_id VARCHAR NOT NULL,
    source_line    BIGINT
);

-- Pods placed by CPU milli-cores and milli-GPUs: amounts the job record has no room for.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cpu_milli BIGINT;   -- requested CPU in milli-cores
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS gpu_milli BIGINT;   -- milli-GPU per GPU (1000 whole; less: a share of one)

-- One row per placement replay (`metapilot place replay`, and the PPO agent's evaluation).
CREATE TABLE IF NOT EXISTS placement_runs (
    run_id          VARCHAR PRIMARY KEY,
    cluster         VARCHAR NOT NULL,
    policy          VARCHAR NOT NULL,   -- random | first-fit | best-fit | least-loaded | fgd | a PPO policy id
    mode            VARCHAR NOT NULL,   -- time | inflate
    seed            BIGINT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    pods            BIGINT NOT NULL,
    placed          BIGINT NOT NULL,
    failed          BIGINT NOT NULL,
    mean_wait_s     DOUBLE,
    gpu_alloc_share DOUBLE,
    frag_gpu_share  DOUBLE,
    imbalance       DOUBLE,
    hot_node_share  DOUBLE,
    idle_share      DOUBLE,
    unfit           BIGINT,             -- pods that fit no node of the cluster even when it is empty
    unknown_gpu_model BIGINT,           -- pods asking for a GPU model no node has
    seconds         DOUBLE,
    result_json     VARCHAR NOT NULL,   -- the full result (curve, counts, settings)
    code_version    VARCHAR NOT NULL
);
