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
    pub(crate) applied_offset: Option<i64>,
    /// Per run, the input offset its record covers. Without transactions the records of one
    /// flush are not atomic: a crash can leave some runs' records newer than the meta record.
    /// Events of such a run below its own offset are already in its state and must not be
    /// applied again.
    pub(crate) run_offsets: HashMap<RunKey, i64>,
    pub(crate) meta: PartitionMeta,
    /// The runs restored, with their state.
    pub runs: Vec<(RunKey, RunState)>,
    /// Ended runs, oldest first.
    pub(crate) ended: Vec<RunKey>,
    pub(crate) records: u64,
    pub(crate) elapsed: Duration,
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
pub(crate) fn restore_with(
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
    let merged =
        merge(decoded.into_iter().flatten()).map_err(|(at, e)| unreadable(partition, at, e))?;
    out.runs = merged.runs;
    out.ended = merged.ended;
    out.run_offsets = merged.run_offsets;
    out.elapsed = started.elapsed();
    Ok(out)
}

/// Runs, ended runs and per-run covered offsets from a partition's run records, decoded in any
/// order. The latest record of each run by offset (tombstones included) decides, and the
/// latest offset any of its records covered is its `run_offsets` entry: both are maxima, so
/// how the batches were shared out does not matter. The first unreadable record (by offset)
/// fails it.
fn merge(decoded: impl Iterator<Item = Decoded>) -> Result<Merged, (i64, RecordError)> {
    let mut latest: FxHashMap<RunKey, Latest> = FxHashMap::default();
    let mut first_bad: Option<(i64, RecordError)> = None;
    for (offset, run, rec) in decoded {
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
    if let Some(bad) = first_bad {
        return Err(bad);
    }
    let (mut runs, mut ended, mut run_offsets) = (Vec::new(), Vec::new(), HashMap::new());
    for (k, l) in latest {
        if let Some((_, c)) = l.covered {
            run_offsets.insert(k.clone(), c);
        }
        match l.rec {
            // A tombstone: the ended run was forgotten.
            None => {}
            Some(RunRecord { state: Some(s), .. }) => runs.push((k, s)),
            Some(RunRecord { state: None, .. }) => ended.push((l.offset, k)),
        }
    }
    ended.sort();
    sort_by_key_cheaply(&mut runs);
    Ok(Merged {
        runs,
        ended: ended.into_iter().map(|(_, k)| k).collect(),
        run_offsets,
    })
}

/// What [`merge`] makes of a partition's run records (see [`Restored`]).
struct Merged {
    runs: Vec<(RunKey, RunState)>,
    ended: Vec<RunKey>,
    run_offsets: HashMap<RunKey, i64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(r: &str) -> RunKey {
        RunKey {
            project_id: "p".into(),
            run_id: r.into(),
        }
    }

    fn open(steps: u32, covered: i64) -> Option<Result<RunRecord, RecordError>> {
        let mut s = RunState::new(0);
        s.steps = steps;
        Some(Ok(RunRecord {
            offset: Some(covered),
            state: Some(s),
        }))
    }

    fn ended(covered: i64) -> Option<Result<RunRecord, RecordError>> {
        Some(Ok(RunRecord {
            offset: Some(covered),
            state: None,
        }))
    }

    /// A partition's records, as the read finds them.
    fn records() -> Vec<Decoded> {
        vec![
            (0, key("a"), open(1, 10)),
            (1, key("b"), open(1, 11)),
            (2, key("a"), open(2, 20)),
            (3, key("c"), open(1, 12)),
            (4, key("b"), ended(21)),
            (5, key("c"), ended(22)),
            (6, key("d"), open(1, 13)),
            (7, key("c"), None),
            (8, key("e"), ended(23)),
            (9, key("d"), open(3, 30)),
        ]
    }

    /// Open runs with their steps, ended runs, and covered offsets, by run id.
    #[derive(Debug, PartialEq)]
    struct Summary {
        runs: Vec<(String, u64)>,
        ended: Vec<String>,
        offsets: Vec<(String, i64)>,
    }

    fn summary(m: Result<Merged, (i64, RecordError)>) -> Summary {
        let Ok(m) = m else {
            panic!("every record is readable");
        };
        let mut offsets: Vec<_> = m
            .run_offsets
            .into_iter()
            .map(|(k, o)| (k.run_id, o))
            .collect();
        offsets.sort();
        Summary {
            runs: m
                .runs
                .into_iter()
                .map(|(k, s)| (k.run_id, u64::from(s.steps)))
                .collect(),
            ended: m.ended.into_iter().map(|k| k.run_id).collect(),
            offsets,
        }
    }

    /// The latest record of each run decides, whatever order the decoders returned them in.
    #[test]
    fn the_latest_record_wins_in_any_order() {
        let want = Summary {
            runs: vec![("a".to_string(), 2), ("d".to_string(), 3)],
            ended: vec!["b".to_string(), "e".to_string()],
            offsets: vec![
                ("a".to_string(), 20),
                ("b".to_string(), 21),
                ("c".to_string(), 22),
                ("d".to_string(), 30),
                ("e".to_string(), 23),
            ],
        };
        assert_eq!(summary(merge(records().into_iter())), want);
        // Reversed, and interleaved as two decoders' outputs.
        let mut reversed = records();
        reversed.reverse();
        assert_eq!(summary(merge(reversed.into_iter())), want);
        let (even, odd): (Vec<_>, Vec<_>) = records().into_iter().partition(|d| d.0 % 2 == 0);
        assert_eq!(summary(merge(odd.into_iter().chain(even))), want);
    }

    /// The first unreadable record by offset is reported, whichever decoder met it first.
    #[test]
    fn the_first_unreadable_record_is_reported() {
        let mut recs = records();
        recs.push((12, key("f"), Some(Err(RecordError::Binary("late".into())))));
        recs.insert(
            0,
            (11, key("g"), Some(Err(RecordError::Binary("early".into())))),
        );
        match merge(recs.into_iter()) {
            Err((at, e)) => assert_eq!(
                (at, e.to_string()),
                (11, "malformed binary record: early".to_string())
            ),
            Ok(_) => panic!("an unreadable record must fail the restore"),
        }
    }
}
