-- Step numbers and step counts, legacy form for ClickHouse < 20.3 (CI's Debian 18.16); the
-- documented form, with the columns' meaning, is 0004_step_numbers.sql. 18.16 has no
-- `ADD COLUMN IF NOT EXISTS`: eddy counts a statement that finds its column already there
-- (code 44) as applied, as for 0003_steering.legacy.sql.

ALTER TABLE {db}.rollup_minute ADD COLUMN loops_counted UInt8;

ALTER TABLE {db}.rollup_minute ADD COLUMN steps_to_catch UInt64;

ALTER TABLE {db}.runs ADD COLUMN loop_step_number UInt64;

ALTER TABLE {db}.runs ADD COLUMN loop_caught_step_number UInt64;
