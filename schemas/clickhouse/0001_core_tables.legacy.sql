-- eddy core tables, legacy form for ClickHouse < 20.3 (CI's Debian 18.16). The documented form is
-- 0001_core_tables.sql; both take the same RowBinary rows (same column names, order and encodings).
-- `{db}` is replaced by the configured database (validated [A-Za-z0-9_]+).
-- Every table is a ReplacingMergeTree keyed by a deterministic identity, so a batch replayed
-- after a crash or rebalance replaces itself: read exact results with FINAL (or argMax).
-- 18.16 has no DateTime64 (milliseconds are a plain Int64 column), no TTL, and LowCardinality only
-- behind an experimental setting that newer servers reject.

CREATE TABLE IF NOT EXISTS {db}.steps
(
    project_id String,
    run_id String,
    step_index UInt64,
    ts DateTime,
    ts_ms Int64,
    step_type String,
    agent String,
    caller String,
    tool_name String,
    -- keelwave's fingerprint of record: sha256(tool_name || 0x00 || raw tool_input bytes)
    raw_fp FixedString(32),
    has_raw_fp UInt8,
    canonical_input_fp FixedString(32),
    canonical_output_fp FixedString(32),
    tool_success Int8,
    tool_latency_ms Float64,
    tokens UInt64,
    cost_usd Float64,
    tokens_in_context UInt64,
    content_len UInt32,
    src_partition Int32,
    src_offset Int64
)
ENGINE = ReplacingMergeTree(src_offset)
PARTITION BY toYYYYMM(ts)
ORDER BY (project_id, run_id, step_index);

CREATE TABLE IF NOT EXISTS {db}.signals
(
    event_id String,
    kind String,
    project_id String,
    run_id String,
    agent_name String,
    step_index UInt64,
    ts DateTime,
    ts_ms Int64,
    detector String,
    severity String,
    pattern String,
    fingerprint String,
    hits UInt32,
    step_indices Array(UInt64),
    first_step_index UInt64,
    evidence String,
    src_partition Int32,
    src_offset Int64
)
ENGINE = ReplacingMergeTree(src_offset)
PARTITION BY toYYYYMM(ts)
ORDER BY (project_id, run_id, event_id);

CREATE TABLE IF NOT EXISTS {db}.runs
(
    project_id String,
    run_id String,
    event_id String,
    agent_name String,
    started_at DateTime,
    ended_at DateTime,
    ended_ms Int64,
    status String,
    termination_reason String,
    termination_reason_reported UInt8,
    loop_detected UInt8,
    has_loop_step_index UInt8,
    loop_step_index UInt64,
    loop_caught_step_index UInt64,
    signals UInt32,
    redeliveries UInt64,
    steps UInt64,
    tool_calls UInt64,
    tokens UInt64,
    cost_usd Float64,
    duration_ms Int64,
    src_partition Int32,
    src_offset Int64
)
ENGINE = ReplacingMergeTree(src_offset)
PARTITION BY toYYYYMM(ended_at)
ORDER BY (project_id, run_id);
