-- Beyond keelwave: the per-minute rollup by agent at any coarser bucket (a multiple of 60 s),
-- read from `rollup_minute` instead of scanning steps. Exact under redelivery (FINAL).
-- Params: project_id, from, to, bucket_seconds (60, 300, 3600, 86400, ...).
-- Runs count in the bucket they ended in; steps, errors, tokens and cost in the bucket they
-- happened in; loop_cost_usd is what steps cost once their run's loop was caught.
-- avg_caught_after_steps averages counted steps (`steps_to_catch` over `loops_counted`), never
-- differences of step indices, which OTLP runs' start-time indices are not (0004_step_numbers).
-- Output columns reuse the table's column names, so the table's columns are read under other
-- names first (an alias would otherwise shadow its column inside other aggregates).
-- Averages round half up as floor(x * 10^n + 0.5) / 10^n (see health.sql).
SELECT
    toDateTime(intDiv(toUInt32(b), {bucket_seconds:UInt32}) * {bucket_seconds:UInt32}, 'UTC') AS bucket_start,
    agent_name,
    sum(r_started) AS runs_started,
    sum(r_ended) AS runs_ended,
    sum(r_loop) AS loop_runs,
    sum(n_steps) AS steps,
    sum(n_tools) AS tool_calls,
    sum(n_errors) AS errors,
    sum(n_tokens) AS tokens,
    round(sum(c_all), 6) AS cost_usd,
    round(sum(c_loop), 6) AS loop_cost_usd,
    sum(caught) AS loops_caught,
    floor(sum(to_catch) / greatest(sum(counted), 1) * 100 + 0.5) / 100 AS avg_caught_after_steps,
    countIf(reason = 'clean') AS ended_clean,
    countIf(reason = 'loop_detected') AS ended_loop_detected,
    countIf(reason = 'max_steps_reached') AS ended_max_steps,
    countIf(reason = 'error') AS ended_error,
    countIf(reason NOT IN ('', 'clean', 'loop_detected', 'max_steps_reached', 'error')) AS ended_other
FROM
(
    SELECT
        bucket AS b,
        agent_name,
        runs_started AS r_started,
        runs_ended AS r_ended,
        loop_runs AS r_loop,
        termination_reason AS reason,
        steps AS n_steps,
        tool_calls AS n_tools,
        errors AS n_errors,
        tokens AS n_tokens,
        cost_usd AS c_all,
        loop_cost_usd AS c_loop,
        loops_caught AS caught,
        loops_counted AS counted,
        steps_to_catch AS to_catch
    FROM rollup_minute FINAL
    WHERE project_id = {project_id:String}
      AND bucket >= {from:DateTime} AND bucket < {to:DateTime}
) AS m
GROUP BY bucket_start, agent_name
ORDER BY bucket_start, agent_name
