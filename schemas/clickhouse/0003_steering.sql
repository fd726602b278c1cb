-- Steering (ClickHouse 20.3+; 18.16 gets 0003_steering.legacy.sql): what eddy told a looping
-- agent and whether the run looped again afterwards. Columns are added, one per statement, so a
-- statement repeated after a crash between it and the ledger's row finds its column there.
-- With `clickhouse_cluster` set, each ALTER runs `ON CLUSTER` on `<name>_local` and on the
-- Distributed `<name>`.
--
-- steps.signal_event_id: on a `steer` step (a guard handed the agent a signal's advice), that
--   signal's event_id; empty on every other step.
-- signals.advice: the corrective message built from the signal (what repeats, since which step,
--   the evidence, what to try instead), as guards and the verdict route hand it to the agent.
-- runs.steers / has_steered_step_index / steered_step_index: how many steer steps the run
--   reported, and its first; runs.steer_outcome: 'recovered' (no alert or stop after the first
--   steer), 'looped_again', or empty for a run never steered.

ALTER TABLE {db}.steps ADD COLUMN IF NOT EXISTS signal_event_id String;

ALTER TABLE {db}.signals ADD COLUMN IF NOT EXISTS advice String;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS steers UInt32;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS has_steered_step_index UInt8;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS steered_step_index UInt64;

ALTER TABLE {db}.runs ADD COLUMN IF NOT EXISTS steer_outcome LowCardinality(String);
