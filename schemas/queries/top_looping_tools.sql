-- Beyond keelwave: the tools on which loops were caught (the step that raised the first
-- alert/stop of each looping run), with how many runs and how much those runs cost.
-- Params: project_id, from, to.
SELECT tool_name, count() AS loop_runs, round(sum(cost_usd), 6) AS cost_usd
FROM
(
    SELECT project_id, run_id, loop_caught_step_index AS step_index, cost_usd
    FROM runs FINAL
    WHERE project_id = {project_id:String} AND loop_detected = 1
      AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
) AS r
ANY LEFT JOIN
(
    SELECT project_id, run_id, step_index, tool_name
    FROM steps FINAL
    WHERE project_id = {project_id:String}
      -- Only the caught steps: the join then reads a handful of steps, not the project's.
      AND (run_id, step_index) IN
      (
          SELECT run_id, loop_caught_step_index
          FROM runs FINAL
          WHERE project_id = {project_id:String} AND loop_detected = 1
            AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
      )
) AS s USING (project_id, run_id, step_index)
GROUP BY tool_name
ORDER BY loop_runs DESC, tool_name
