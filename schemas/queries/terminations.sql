-- keelwave parity: GET /agent/runs/terminations — runs by termination_reason.
-- Params: project_id, from, to.
SELECT termination_reason, count() AS runs
FROM runs FINAL
WHERE project_id = {project_id:String}
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY termination_reason
ORDER BY runs DESC, termination_reason
