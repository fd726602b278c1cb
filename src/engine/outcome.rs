//! What a partition engine hands its callers besides output events: what each input event did
//! ([`Outcome`], for the sink's rows), the changes since the last flush ([`Change`], for the
//! changelog), and the partition-level state persisted with the runs ([`PartitionMeta`]).
use super::{RunState, StepFingerprints};
use crate::contract::RunKey;
use std::collections::VecDeque;

/// What happened to one input event; the sink stage uses it to build rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A step that was new to its run.
    Step(StepFingerprints),
    /// A step whose (project_id, run_id, step_index) was already seen: ignored by detectors.
    /// Its fingerprints are not computed (left empty): the seen-steps check comes first so a
    /// redelivery storm costs no parsing or hashing.
    Redelivery(StepFingerprints),
    /// A lifecycle event (run_started / run_finished) that was applied.
    Lifecycle,
    /// An event for a run that already terminated (late, or redelivered after the end).
    AfterEnd,
}

/// Partition-level state that is not per run. Persisted with the run snapshots, as the
/// changelog's meta record (see `changelog::state::meta`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionMeta {
    pub(crate) watermark_ms: Option<i64>,
    /// Events applied to this partition's runs (the eviction clock: least recently active).
    pub(crate) seq: u64,
    /// Runs (hashed) that reported a time beyond `max_future_skew_ms` of the watermark, with
    /// that time; `watermark_jump_quorum` distinct runs move the watermark. Bounded by it.
    pub(crate) jumps: Vec<(u64, i64)>,
    /// Runs (hashed) that reported a time more than `max_future_skew_ms` behind the watermark,
    /// with their latest such time; a quorum of them pulls the watermark back. Bounded by it.
    pub(crate) behind: Vec<(u64, i64)>,
    /// Recently ended runs, oldest first, so a redelivered or late event cannot reopen them and
    /// publish a second `run_terminated`. Bounded by `EngineConfig::ended_runs_remembered`.
    /// Persisted as one changelog marker per run, not inside the meta record.
    pub(crate) ended: VecDeque<RunKey>,
}

/// One changelog change.
#[derive(Debug)]
pub enum Change<'a> {
    /// The run's state changed: write it.
    Upsert(RunKey, &'a RunState),
    /// The run ended: remember it (so late events cannot reopen it) until it is forgotten.
    Ended(RunKey),
    /// The run fell out of the remembered window: its changelog record can be deleted.
    Forget(RunKey),
}
