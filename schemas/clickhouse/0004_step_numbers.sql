-- Step numbers and step counts (ClickHouse 20.3+; 18.16 gets 0004_step_numbers.legacy.sql),
-- stored apart from `step_index`, the ordering key. A step index orders a run's steps and tells a
-- redelivery from a new step, but need not count them: an OTLP run's indices are its spans' start
-- times (docs/otlp.md), so the difference of two is no number of steps. Columns are added one per
-- statement, as in 0003_steering.sql.
--
-- rollup_minute.steps_to_catch / loops_counted: on the minute a loop was caught, how many steps
--   the run took after the loop's first step up to the one that caught it (the run's distinct
--   steps, in step order), and 1 when they were counted. Both 0 on rows written before this
--   migration and where the steps could not be counted (more than `engine.max_seen_ranges`
--   scattered steps before the catch), so sum(steps_to_catch) / sum(loops_counted) averages real
--   counts only. `caught_after_steps` holds the same count on new rows (0 when not counted); on
--   older rows it is a difference of step indices.
-- runs.loop_step_number / loop_caught_step_number: `loop_step_index` and
--   `loop_caught_step_index` as the run's step numbers (1: its first step, in step order), as of
--   the run's end; 0 without a loop, on older rows, or where they could not be told.

ALTER TABLE {db}.rollup_minute ADD COLUMN IF NOT EXISTS loops_counted UInt8;

ALTER TABLE {db}.rollup_minute ADD COLUMN IF NOT EXISTS steps_to_catch UInt64;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS loop_step_number UInt64;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS loop_caught_step_number UInt64;
