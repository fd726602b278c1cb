//! Restoring a partition's runs from its state changelog: a compacted topic co-partitioned with
//! the input, whose records `crate::changelog` defines.
use super::compacted;
use super::SourceError;
use crate::changelog;
use crate::contract::RunKey;
use crate::engine::{PartitionMeta, RunState};
use rdkafka::message::Message;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a restore retries Kafka errors without progress before it fails.
const RESTORE_RETRY: Duration = Duration::from_secs(60);

/// What a changelog partition says.
#[derive(Default)]
pub struct Restored {
    pub applied_offset: Option<i64>,
    /// Per run, the input offset its record covers. Without transactions the records of one
    /// flush are not atomic: a crash can leave some runs' records newer than the meta record.
    /// Events of such a run below its own offset are already in its state and must not be
    /// applied again.
    pub run_offsets: HashMap<RunKey, i64>,
    pub meta: PartitionMeta,
    pub runs: Vec<(RunKey, RunState)>,
    /// Ended runs, oldest first.
    pub ended: Vec<RunKey>,
    pub records: u64,
    pub elapsed: Duration,
}

/// Read changelog partition `partition` from the beginning to its end. Blocking: call it from
/// `spawn_blocking`.
pub fn restore(brokers: &str, topic: &str, partition: i32) -> Result<Restored, SourceError> {
    restore_with(
        &[("bootstrap.servers".to_string(), brokers.to_string())],
        topic,
        partition,
    )
}

/// [`restore`] with client properties (brokers and security settings, see
/// `KafkaConfig::client_props`).
pub fn restore_with(
    props: &[(String, String)],
    topic: &str,
    partition: i32,
) -> Result<Restored, SourceError> {
    let started = Instant::now();
    let mut out = Restored::default();
    // The latest record of each run, with its offset: the ended list is ordered by it.
    let mut runs: HashMap<RunKey, (i64, Option<RunState>)> = HashMap::new();
    let records =
        compacted::read_to_end::<SourceError>(props, topic, partition, RESTORE_RETRY, |msg| {
            let bad = |e: changelog::RecordError| SourceError::Changelog {
                partition,
                offset: msg.offset(),
                why: e.to_string(),
            };
            let key = msg.key().unwrap_or_default();
            if key == changelog::META_KEY {
                if let Some(p) = msg.payload() {
                    let (applied, meta) = changelog::decode_meta(p).map_err(bad)?;
                    out.applied_offset = Some(applied);
                    out.meta = meta;
                }
                return Ok(());
            }
            let rk = changelog::parse_run_key(key).map_err(bad)?;
            match msg.payload() {
                None => {
                    runs.remove(&rk);
                }
                Some(p) => {
                    let rec = changelog::decode_run(p).map_err(bad)?;
                    if let Some(o) = rec.offset {
                        out.run_offsets.insert(rk.clone(), o);
                    }
                    runs.insert(rk, (msg.offset(), rec.state));
                }
            }
            Ok(())
        })?;
    out.records = records;
    let mut ended: Vec<(i64, RunKey)> = Vec::new();
    for (k, (off, st)) in runs {
        match st {
            Some(s) => out.runs.push((k, s)),
            None => ended.push((off, k)),
        }
    }
    ended.sort();
    out.ended = ended.into_iter().map(|(_, k)| k).collect();
    out.runs.sort_by(|a, b| a.0.cmp(&b.0));
    out.elapsed = started.elapsed();
    Ok(out)
}
