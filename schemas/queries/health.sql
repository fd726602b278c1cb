-- keelwave parity: GET /agent/health — per agent: runs, loop runs and rate, failures, cost.
-- Params: project_id, from, to.
-- Ratios and averages round half up as floor(x * 10^n + 0.5) / 10^n: round() breaks float ties
-- half-to-even on ClickHouse 20.x+ and away from zero on 18.16, and the answers must agree.
SELECT
    agent_name,
    count() AS runs,
    sum(loop_detected) AS loop_runs,
    floor(avg(loop_detected) * 10000 + 0.5) / 10000 AS loop_rate,
    countIf(status != 'completed') AS failed_runs,
    floor(avg(steps) * 100 + 0.5) / 100 AS avg_steps,
    round(sum(cost_usd), 6) AS cost_usd
FROM runs FINAL
WHERE project_id = {project_id:String}
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY agent_name
ORDER BY loop_runs DESC, agent_name
