-- Core warehouse tables (SPEC §4, §5). Applied idempotently by warehouse.db.connect().

CREATE TABLE IF NOT EXISTS jobs (
    cluster        VARCHAR NOT NULL,
    job_id         VARCHAR NOT NULL,
    array_job_id   VARCHAR,
    array_task_id  BIGINT,
    het_job_id     VARCHAR,
    het_offset     BIGINT,
    source_format  VARCHAR NOT NULL,
    source_file_id VARCHAR NOT NULL,   -- sha256 of the file, ingest_files.sha256
    source_line    BIGINT,
    user_id        VARCHAR,            -- keyed hash (SPEC §8) unless --keep-names
    account_id     VARCHAR,
    group_id       VARCHAR,
    job_name       VARCHAR,            -- keyed hash unless --keep-names
    partition      VARCHAR,
    qos            VARCHAR,
    state          VARCHAR,
    exit_code      VARCHAR,
    submit_time    TIMESTAMPTZ NOT NULL,
    eligible_time  TIMESTAMPTZ,
    start_time     TIMESTAMPTZ,
    end_time       TIMESTAMPTZ,
    wait_s         BIGINT,
    run_s          BIGINT,
    timelimit_s    BIGINT,
    req_cpus       BIGINT,
    req_nodes      BIGINT,
    req_mem_mib    BIGINT,
    req_gpus       BIGINT,
    alloc_cpus     BIGINT,
    alloc_nodes    BIGINT,
    alloc_mem_mib  BIGINT,
    alloc_gpus     BIGINT,
    gpu_type       VARCHAR,
    node_list      VARCHAR,
    ingested_at    TIMESTAMPTZ NOT NULL
    -- key: (cluster, job_id, submit_time), kept unique by the loader's merge (sql/ingest/merge_jobs.sql);
    -- no index constraint, so that multi-million-row merges stay within bounded memory
);

-- A file is known by its content and, for formats whose lines name no cluster (SWF, PBS, openb
-- lists, ...), the cluster it was loaded for: the same node list can serve two clusters
-- (warehouse/ingest_log.py). `cluster` is the cluster(s) the load went to.
CREATE TABLE IF NOT EXISTS ingest_files (
    sha256           VARCHAR NOT NULL,
    path             VARCHAR NOT NULL,
    bytes            BIGINT NOT NULL,
    format           VARCHAR,
    cluster          VARCHAR NOT NULL,
    lines_read       BIGINT,
    rows_loaded      BIGINT,   -- lines that became job rows
    jobs_written     BIGINT,   -- job rows written (a pending array range line gives several)
    rows_merged      BIGINT,   -- steps folded into their job, duplicates superseded
    rows_quarantined BIGINT,
    lines_skipped    BIGINT,   -- comments, blank lines and header lines only
    started_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    outcome          VARCHAR NOT NULL,  -- loaded | quarantined (no line loaded: blocks no reload) | failed
    message          VARCHAR,
    PRIMARY KEY (sha256, cluster)
);

CREATE TABLE IF NOT EXISTS quarantine (
    file_sha256 VARCHAR NOT NULL,
    path        VARCHAR NOT NULL,
    line_no     BIGINT NOT NULL,
    raw         VARCHAR,
    reason      VARCHAR NOT NULL,
    quarantined_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS capacity (
    cluster       VARCHAR NOT NULL,
    partition     VARCHAR NOT NULL,      -- '*' = the whole cluster
    valid_from    TIMESTAMPTZ NOT NULL,
    nodes         BIGINT,
    cores         BIGINT NOT NULL,
    gpus          BIGINT NOT NULL DEFAULT 0,
    mem_mib       BIGINT,
    source        VARCHAR NOT NULL,      -- config | swf-header | inferred-peak
    note          VARCHAR,
    PRIMARY KEY (cluster, partition, valid_from)
);

CREATE TABLE IF NOT EXISTS data_check_runs (
    run_id        VARCHAR PRIMARY KEY,
    file_sha256   VARCHAR NOT NULL,
    suite_name    VARCHAR NOT NULL,
    success       BOOLEAN NOT NULL,
    evaluated     BIGINT NOT NULL,
    failed_rows   BIGINT NOT NULL,
    results_json  VARCHAR NOT NULL,      -- per expectation: name, success, unexpected_count
    checked_at  TIMESTAMPTZ NOT NULL
);
