-- Per-run, per-minute rollup contributions, legacy form for ClickHouse < 20.3 (CI's Debian 18.16).
-- The documented form, with the semantics of every column, is 0002_rollups.sql; both take the
-- same RowBinary rows. 18.16 has no TTL and LowCardinality only behind an experimental setting.

CREATE TABLE IF NOT EXISTS {db}.rollup_minute
(
    project_id String,
    bucket DateTime,
    run_id String,
    agent_name String,
    runs_started UInt8,
    runs_ended UInt8,
    loop_runs UInt8,
    termination_reason String,
    steps UInt32,
    tool_calls UInt32,
    errors UInt32,
    tokens UInt64,
    cost_usd Float64,
    loop_steps UInt32,
    loop_cost_usd Float64,
    loops_caught UInt8,
    caught_after_steps UInt64,
    src_partition Int32,
    src_offset Int64
)
ENGINE = ReplacingMergeTree(src_offset)
PARTITION BY toYYYYMM(bucket)
ORDER BY (project_id, bucket, run_id);
