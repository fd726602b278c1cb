-- Beyond keelwave: cost burned inside loops (steps from where the loop began) per agent per day.
-- Params: project_id, from, to.
SELECT toDate(ts, 'UTC') AS day, agent_name, count() AS loop_steps, round(sum(cost_usd), 6) AS loop_cost_usd
FROM
(
    SELECT project_id, run_id, step_index, ts, cost_usd
    FROM steps FINAL
    WHERE project_id = {project_id:String} AND ts >= {from:DateTime} AND ts < {to:DateTime}
      -- Only looping runs' steps reach the join.
      AND run_id IN
      (
          SELECT run_id FROM runs FINAL
          WHERE project_id = {project_id:String} AND loop_detected = 1 AND has_loop_step_index = 1
      )
) AS s
-- ALL, not ANY: since 20.x ANY INNER JOIN keeps one row per key on the left too (one step per run).
ALL INNER JOIN
(
    SELECT project_id, run_id, agent_name, loop_step_index
    FROM runs FINAL
    WHERE project_id = {project_id:String} AND loop_detected = 1 AND has_loop_step_index = 1
) AS r USING (project_id, run_id)
WHERE step_index >= loop_step_index
GROUP BY day, agent_name
ORDER BY day, loop_cost_usd DESC, agent_name
