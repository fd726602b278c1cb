-- keelwave parity: GET /agent/health — per agent: runs, loop runs and rate, failures, cost.
-- Params: project_id, from, to.
SELECT
    agent_name,
    count() AS runs,
    sum(loop_detected) AS loop_runs,
    round(avg(loop_detected), 4) AS loop_rate,
    countIf(status != 'completed') AS failed_runs,
    round(avg(steps), 2) AS avg_steps,
    round(sum(cost_usd), 6) AS cost_usd
FROM runs FINAL
WHERE project_id = {project_id:String}
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY agent_name
ORDER BY loop_runs DESC, agent_name
