-- Steering, legacy form for ClickHouse < 20.3 (CI's Debian 18.16); the documented form, with the
-- columns' meaning, is 0003_steering.sql. 18.16 has no `ADD COLUMN IF NOT EXISTS`: eddy counts a
-- statement that finds its column already there (code 44) as applied, so a migration cut short
-- between a statement and the ledger's row still completes.

ALTER TABLE {db}.steps ADD COLUMN signal_event_id String;

ALTER TABLE {db}.signals ADD COLUMN advice String;

ALTER TABLE {db}.runs ADD COLUMN steers UInt32;

ALTER TABLE {db}.runs ADD COLUMN has_steered_step_index UInt8;

ALTER TABLE {db}.runs ADD COLUMN steered_step_index UInt64;

ALTER TABLE {db}.runs ADD COLUMN steer_outcome String;
