//! Restoring a partition's runs from its state changelog: a compacted topic co-partitioned with
//! the input, whose records `crate::changelog` defines.
//!
//! Decoding the run states is most of a restore's work, so it runs beside the read: this thread
//! reads the partition (librdkafka fetches ahead on its own thread) and hands batches of run
//! records to decoding threads, one per core. What the partition says does not depend on how
//! the batches were shared out: the latest record of each run, by offset, wins.
use super::compacted;
use super::SourceError;
use crate::changelog::{self, RecordError, RunRecord};
use crate::contract::RunKey;
use crate::engine::{PartitionMeta, RunState};
use rdkafka::message::Message;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a restore retries Kafka errors without progress before it fails.
const RESTORE_RETRY: Duration = Duration::from_secs(60);
/// Run records handed to a decoding thread at a time.
const BATCH: usize = 256;
/// At most this many decoding threads (and no more than the cores).
const MAX_DECODERS: usize = 8;

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

/// A run record as read: its changelog offset, run, and value (`None`: a tombstone).
type Raw = (i64, RunKey, Option<Vec<u8>>);
/// A run record decoded: its changelog offset, run, and what it says (`None`: a tombstone).
type Decoded = (i64, RunKey, Option<Result<RunRecord, RecordError>>);

/// A run's latest record (`rec` `None`: a tombstone), and the latest input offset its records
/// covered, with the changelog offset that said so.
struct Latest {
    offset: i64,
    rec: Option<RunRecord>,
    covered: Option<(i64, i64)>,
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
    let decoders = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_DECODERS);
    let (tx, rx) = mpsc::sync_channel::<Vec<Raw>>(2 * decoders);
    let rx = Arc::new(Mutex::new(rx));
    let (read, decoded) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..decoders)
            .map(|_| {
                let rx = Arc::clone(&rx);
                scope.spawn(move || decode_batches(&rx))
            })
            .collect();
        let mut batch: Vec<Raw> = Vec::with_capacity(BATCH);
        let read =
            compacted::read_to_end::<SourceError>(props, topic, partition, RESTORE_RETRY, |msg| {
                let key = msg.key().unwrap_or_default();
                if key == changelog::META_KEY {
                    if let Some(p) = msg.payload() {
                        let (applied, meta) = changelog::decode_meta(p)
                            .map_err(|e| unreadable(partition, msg.offset(), e))?;
                        out.applied_offset = Some(applied);
                        out.meta = meta;
                    }
                    return Ok(());
                }
                let run = changelog::parse_run_key(key)
                    .map_err(|e| unreadable(partition, msg.offset(), e))?;
                batch.push((msg.offset(), run, msg.payload().map(<[u8]>::to_vec)));
                if batch.len() == BATCH {
                    // Fails only when every decoder is gone, which `join` below reports.
                    let _ = tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                }
                Ok(())
            });
        let _ = tx.send(batch);
        drop(tx);
        let decoded: Vec<Vec<Decoded>> = workers
            .into_iter()
            .map(|w| w.join().expect("a decoding thread panicked"))
            .collect();
        (read, decoded)
    });
    out.records = read?;
    // The latest record of each run by offset (tombstones included) decides, and the latest
    // offset any of its records covered is its `run_offsets`. Batches were decoded in any
    // order, so both are the maxima, not the last seen.
    let mut latest: FxHashMap<RunKey, Latest> = FxHashMap::default();
    let mut first_bad: Option<(i64, RecordError)> = None;
    for (offset, run, rec) in decoded.into_iter().flatten() {
        let rec = match rec {
            None => None,
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => {
                if first_bad.as_ref().is_none_or(|(at, _)| offset < *at) {
                    first_bad = Some((offset, e));
                }
                continue;
            }
        };
        let covered = rec.as_ref().and_then(|r| r.offset).map(|c| (offset, c));
        match latest.entry(run) {
            Entry::Vacant(v) => {
                v.insert(Latest {
                    offset,
                    rec,
                    covered,
                });
            }
            Entry::Occupied(mut o) => {
                let l = o.get_mut();
                if covered.is_some_and(|(at, _)| l.covered.is_none_or(|(was, _)| was < at)) {
                    l.covered = covered;
                }
                if offset > l.offset {
                    l.offset = offset;
                    l.rec = rec;
                }
            }
        }
    }
    if let Some((offset, e)) = first_bad {
        return Err(unreadable(partition, offset, e));
    }
    let mut ended: Vec<(i64, RunKey)> = Vec::new();
    for (k, l) in latest {
        if let Some((_, c)) = l.covered {
            out.run_offsets.insert(k.clone(), c);
        }
        match l.rec {
            // A tombstone: the ended run was forgotten.
            None => {}
            Some(RunRecord { state: Some(s), .. }) => out.runs.push((k, s)),
            Some(RunRecord { state: None, .. }) => ended.push((l.offset, k)),
        }
    }
    ended.sort();
    out.ended = ended.into_iter().map(|(_, k)| k).collect();
    sort_by_key_cheaply(&mut out.runs);
    out.elapsed = started.elapsed();
    Ok(out)
}

fn unreadable(partition: i32, offset: i64, e: RecordError) -> SourceError {
    SourceError::Changelog {
        partition,
        offset,
        why: e.to_string(),
    }
}

/// A decoding thread: batches until the reader is done.
fn decode_batches(rx: &Mutex<mpsc::Receiver<Vec<Raw>>>) -> Vec<Decoded> {
    let mut out = Vec::new();
    loop {
        // The lock is held only to take a batch, not while decoding it.
        let batch = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return out,
        };
        let Ok(batch) = batch else {
            return out;
        };
        out.extend(
            batch.into_iter().map(|(offset, run, value)| {
                (offset, run, value.map(|v| changelog::decode_run(&v)))
            }),
        );
    }
}

/// Sort runs by key: an order that does not depend on hashing. Run states are large, so they
/// are moved once, into place, rather than at every step of the sort.
fn sort_by_key_cheaply(runs: &mut Vec<(RunKey, RunState)>) {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_unstable_by(|a, b| runs[*a].0.cmp(&runs[*b].0));
    let mut slots: Vec<Option<(RunKey, RunState)>> = runs.drain(..).map(Some).collect();
    runs.extend(order.into_iter().filter_map(|i| slots[i].take()));
}
