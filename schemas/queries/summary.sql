-- keelwave parity: GET /agent/summary — runs, loop_runs, loop_rate for a window and the one before.
-- Windowed by run start (UTC). Params: project_id, from, to.
SELECT
    countIf(started_at >= {from:DateTime} AND started_at < {to:DateTime}) AS runs,
    sumIf(loop_detected, started_at >= {from:DateTime} AND started_at < {to:DateTime}) AS loop_runs,
    if(runs = 0, 0, round(loop_runs / runs, 4)) AS loop_rate,
    countIf(started_at >= {from:DateTime} - ({to:DateTime} - {from:DateTime}) AND started_at < {from:DateTime}) AS prev_runs,
    sumIf(loop_detected, started_at >= {from:DateTime} - ({to:DateTime} - {from:DateTime}) AND started_at < {from:DateTime}) AS prev_loop_runs,
    if(prev_runs = 0, 0, round(prev_loop_runs / prev_runs, 4)) AS prev_loop_rate
FROM runs FINAL
WHERE project_id = {project_id:String}
