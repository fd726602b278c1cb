-- Beyond keelwave: did steering help? Per agent, the runs a guard steered (handed eddy's advice
-- on an alert, reported as a `steer` step), how many went on without another alert or stop
-- (recovered) and how many looped again, how the recovered ones ended, and the looping runs
-- no guard steered, to compare with.
-- Params: project_id, from, to.
-- Ratios round half up as floor(x * 10^n + 0.5) / 10^n (see loop_onset.sql).
SELECT
    agent_name,
    countIf(steers > 0) AS steered_runs,
    countIf(steer_outcome = 'recovered') AS recovered,
    countIf(steer_outcome = 'looped_again') AS looped_again,
    floor(countIf(steer_outcome = 'recovered') / greatest(countIf(steers > 0), 1) * 1000 + 0.5)
        / 1000 AS recovery_rate,
    countIf(steer_outcome = 'recovered' AND status = 'completed') AS recovered_completed,
    countIf(loop_detected = 1 AND steers = 0) AS loop_runs_not_steered
FROM runs FINAL
WHERE project_id = {project_id:String}
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY agent_name
HAVING steered_runs > 0 OR loop_runs_not_steered > 0
ORDER BY steered_runs DESC, agent_name
