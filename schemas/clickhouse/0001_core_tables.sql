-- eddy core tables (ClickHouse 20.3+; users run 24.x–26.x). Servers older than 20.3, such as CI's
-- Debian 18.16, get 0001_core_tables.legacy.sql instead: same column names, order and RowBinary
-- encodings, so one row struct feeds both (LowCardinality(String) is written as a String;
-- DateTime64(3) is an Int64 of milliseconds, which is what the `*_ms` columns carry).
--
-- Placeholders: `{db}` is the configured database (validated [A-Za-z0-9_]+). A line holding
-- `{retention_days}` is a TTL clause: it is dropped when `clickhouse_retention_days` is 0.
-- With `clickhouse_cluster` set, eddy renders each table as `<name>_local ON CLUSTER` with a
-- Replicated engine plus a Distributed `<name>` (see `eddy migrate --print`).
--
-- Every table is a ReplacingMergeTree keyed by a deterministic identity, so a batch replayed
-- after a crash or rebalance replaces itself: read exact results with FINAL (or argMax).
-- Event times: `ts` / `started_at` / `ended_at` are DateTime('UTC') seconds (partitions, TTL and
-- the query pack's windows); `ts_ms` / `ended_ms` hold the same instant to the millisecond.

CREATE TABLE IF NOT EXISTS {db}.steps
(
    project_id String,
    run_id String,
    step_index UInt64,
    ts DateTime('UTC'),
    ts_ms DateTime64(3, 'UTC'),
    step_type LowCardinality(String),
    agent LowCardinality(String),
    caller LowCardinality(String),
    tool_name LowCardinality(String),
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
ORDER BY (project_id, run_id, step_index)
TTL ts + INTERVAL {retention_days} DAY;

CREATE TABLE IF NOT EXISTS {db}.signals
(
    event_id String,
    kind LowCardinality(String),
    project_id String,
    run_id String,
    agent_name LowCardinality(String),
    step_index UInt64,
    ts DateTime('UTC'),
    ts_ms DateTime64(3, 'UTC'),
    detector LowCardinality(String),
    severity LowCardinality(String),
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
ORDER BY (project_id, run_id, event_id)
TTL ts + INTERVAL {retention_days} DAY;

CREATE TABLE IF NOT EXISTS {db}.runs
(
    project_id String,
    run_id String,
    event_id String,
    agent_name LowCardinality(String),
    started_at DateTime('UTC'),
    ended_at DateTime('UTC'),
    ended_ms DateTime64(3, 'UTC'),
    status LowCardinality(String),
    termination_reason LowCardinality(String),
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
ORDER BY (project_id, run_id)
TTL ended_at + INTERVAL {retention_days} DAY;
