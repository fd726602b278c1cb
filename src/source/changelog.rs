//! The state changelog: a compacted topic co-partitioned with the input.
//!
//! Records (JSON, versioned so a rolling upgrade can read older ones):
//! - key `["<project_id>","<run_id>"]`, value `{"v":1,"state":RunState}`: an open run;
//! - same key, value `{"v":1,"ended":true}`: the run ended (late events cannot reopen it);
//! - same key, no value (tombstone): the ended run was forgotten;
//! - key `"__meta__"`, value `{"v":1,"applied_offset":N,"meta":PartitionMeta}`: the state above
//!   covers input offsets `< N`. Written last in each flush, after ClickHouse and the output
//!   topic acknowledged everything up to N, so restoring and skipping `< N` loses nothing.
use super::SourceError;
use crate::contract::RunKey;
use crate::engine::{Change, PartitionMeta, RunState};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const META_KEY: &[u8] = b"\"__meta__\"";
const VERSION: u32 = 1;

#[derive(Serialize)]
struct RunRecordOut<'a> {
    v: u32,
    /// The record covers this run's input events below this offset (see `Restored::run_offsets`).
    offset: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a RunState>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    ended: bool,
}

#[derive(Deserialize)]
struct RunRecordIn {
    v: u32,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default)]
    state: Option<RunState>,
    #[serde(default)]
    ended: bool,
}

#[derive(Serialize, Deserialize)]
struct MetaRecord {
    v: u32,
    applied_offset: i64,
    meta: PartitionMeta,
}

pub fn run_key(k: &RunKey) -> Vec<u8> {
    serde_json::to_vec(&(&k.project_id, &k.run_id)).unwrap_or_default()
}

/// Encode one change as (key, value); `None` value = tombstone.
/// Encode one change made while applying input offsets below `offset` as (key, value);
/// `None` value = tombstone.
pub fn encode(change: &Change<'_>, offset: i64) -> (Vec<u8>, Option<Vec<u8>>) {
    match change {
        Change::Upsert(k, s) => {
            let rec = RunRecordOut {
                v: VERSION,
                offset,
                state: Some(s),
                ended: false,
            };
            (run_key(k), serde_json::to_vec(&rec).ok())
        }
        Change::Ended(k) => {
            let rec = RunRecordOut {
                v: VERSION,
                offset,
                state: None,
                ended: true,
            };
            (run_key(k), serde_json::to_vec(&rec).ok())
        }
        Change::Forget(k) => (run_key(k), None),
    }
}

pub fn encode_meta(applied_offset: i64, meta: &PartitionMeta) -> Vec<u8> {
    serde_json::to_vec(&MetaRecord {
        v: VERSION,
        applied_offset,
        meta: meta.clone(),
    })
    .unwrap_or_default()
}

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
/// `Config::kafka_client_props`).
pub fn restore_with(
    props: &[(String, String)],
    topic: &str,
    partition: i32,
) -> Result<Restored, SourceError> {
    let started = Instant::now();
    let mut cc = ClientConfig::new();
    for (k, v) in props {
        cc.set(k, v);
    }
    let c: BaseConsumer = cc
        .set("group.id", "eddy-restore-unused")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()?;
    let (low, high) = c.fetch_watermarks(topic, partition, Duration::from_secs(15))?;
    let mut out = Restored::default();
    if high <= low {
        out.elapsed = started.elapsed();
        return Ok(out);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
    c.assign(&tpl)?;
    // Order of insertion matters for the ended list (oldest first), so track positions.
    let mut runs: HashMap<RunKey, (i64, Option<RunState>)> = HashMap::new();
    let mut next = low;
    while next < high {
        let Some(msg) = c.poll(Duration::from_secs(5)) else {
            continue;
        };
        let msg = match msg {
            Ok(m) => m,
            Err(rdkafka::error::KafkaError::PartitionEOF(_)) => break,
            Err(e) => return Err(e.into()),
        };
        next = msg.offset() + 1;
        out.records += 1;
        let key = msg.key().unwrap_or_default();
        let bad = |why: String| SourceError::Changelog {
            partition,
            offset: msg.offset(),
            why,
        };
        if key == META_KEY {
            if let Some(p) = msg.payload() {
                let m: MetaRecord = serde_json::from_slice(p).map_err(|e| bad(e.to_string()))?;
                out.applied_offset = Some(m.applied_offset);
                out.meta = m.meta;
            }
            continue;
        }
        let (project_id, run_id): (String, String) =
            serde_json::from_slice(key).map_err(|e| bad(format!("key: {e}")))?;
        let rk = RunKey { project_id, run_id };
        match msg.payload() {
            None => {
                runs.remove(&rk);
            }
            Some(p) => {
                let rec: RunRecordIn = serde_json::from_slice(p).map_err(|e| bad(e.to_string()))?;
                if rec.v > VERSION {
                    return Err(bad(format!(
                        "record version {} is newer than this eddy reads ({VERSION}); roll back the upgrade or finish it",
                        rec.v
                    )));
                }
                let state = if rec.ended { None } else { rec.state };
                if let Some(o) = rec.offset {
                    out.run_offsets.insert(rk.clone(), o);
                }
                runs.insert(rk, (msg.offset(), state));
            }
        }
    }
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
