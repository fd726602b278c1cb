-- keelwave parity: GET /agent/summary — runs, loop_runs, loop_rate for a window and the one before.
-- Windowed by run start (UTC). Params: project_id, from, to.
-- Ratios and averages round half up as floor(x * 10^n + 0.5) / 10^n: round() breaks float ties
-- half-to-even on ClickHouse 20.x+ and away from zero on 18.16, and the answers must agree.
SELECT
    countIf(started_at >= {from:DateTime} AND started_at < {to:DateTime}) AS runs,
    sumIf(loop_detected, started_at >= {from:DateTime} AND started_at < {to:DateTime}) AS loop_runs,
    if(runs = 0, 0, floor(loop_runs / runs * 10000 + 0.5) / 10000) AS loop_rate,
    countIf(started_at >= {from:DateTime} - ({to:DateTime} - {from:DateTime}) AND started_at < {from:DateTime}) AS prev_runs,
    sumIf(loop_detected, started_at >= {from:DateTime} - ({to:DateTime} - {from:DateTime}) AND started_at < {from:DateTime}) AS prev_loop_runs,
    if(prev_runs = 0, 0, floor(prev_loop_runs / prev_runs * 10000 + 0.5) / 10000) AS prev_loop_rate
FROM runs FINAL
WHERE project_id = {project_id:String}
