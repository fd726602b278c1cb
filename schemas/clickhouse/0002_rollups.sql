-- Per-run, per-minute rollup contributions (ClickHouse 20.3+; 18.16 gets 0002_rollups.legacy.sql).
--
-- One row per (project, minute, run), written once the run's events move past that minute or the
-- run ends, versioned by the offset of the event that closed it: a replay after a crash or
-- rebalance writes the identical row, so sums over `FINAL` are exact. The rollup by project and
-- agent at any bucket that is a multiple of a minute is a GROUP BY over this table, e.g.
--   SELECT toStartOfInterval(bucket, INTERVAL 1 HOUR) AS b, agent_name, sum(steps), sum(loop_runs)
--   FROM rollup_minute FINAL WHERE project_id = 'p' GROUP BY b, agent_name ORDER BY b
-- The minute of an active run appears when it is closed, so the newest minute (and the minutes
-- of runs that went quiet without finishing, until `idle_timeout_ms` ends them) lag; for
-- to-the-second numbers query `steps`.
--
-- Run columns sit on the row of the minute the run started (`runs_started`) or ended
-- (`runs_ended`, `loop_runs`, `termination_reason`); `loops_caught` / `caught_after_steps` on
-- the minute its loop was caught (detection latency in steps since the loop began).
-- `loop_steps` / `loop_cost_usd`: steps taken once the loop was caught, and their cost.

CREATE TABLE IF NOT EXISTS {db}.rollup_minute
(
    project_id String,
    bucket DateTime('UTC'),
    run_id String,
    agent_name LowCardinality(String),
    runs_started UInt8,
    runs_ended UInt8,
    loop_runs UInt8,
    termination_reason LowCardinality(String),
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
ORDER BY (project_id, bucket, run_id)
TTL bucket + INTERVAL {retention_days} DAY;
