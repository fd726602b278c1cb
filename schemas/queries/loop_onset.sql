-- Beyond keelwave: at which step loops begin, and how many steps later eddy caught them.
-- Params: project_id, from, to.
-- onset_step is the loop's step index (an OTLP run's is a start time: see `loop_step_number`);
-- steps to catch are counted from step numbers where a worker recorded them (0004_step_numbers),
-- else taken as the difference of indices.
-- Ratios and averages round half up as floor(x * 10^n + 0.5) / 10^n: round() breaks float ties
-- half-to-even on ClickHouse 20.x+ and away from zero on 18.16, and the answers must agree.
SELECT
    loop_step_index AS onset_step,
    count() AS loop_runs,
    floor(avg(if(loop_step_number > 0 AND loop_caught_step_number > 0,
        loop_caught_step_number - loop_step_number,
        loop_caught_step_index - loop_step_index)) * 100 + 0.5) / 100 AS avg_steps_to_catch
FROM runs FINAL
WHERE project_id = {project_id:String} AND loop_detected = 1 AND has_loop_step_index = 1
  AND started_at >= {from:DateTime} AND started_at < {to:DateTime}
GROUP BY onset_step
ORDER BY onset_step
