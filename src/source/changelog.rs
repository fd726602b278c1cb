//! The state changelog: a compacted topic co-partitioned with the input.
//!
//! Records (JSON, versioned so a rolling upgrade can read older ones; version 2 keeps the
//! near-duplicate detector's MinHash inputs instead of full signatures where smaller; version 3
//! writes signatures with 16-bit slots, which a version 2 reader would compare against its
//! 32-bit ones without a word, so it refuses them instead; version 4 writes them with byte
//! slots, keeps at most four feature hashes, the low halves of the progress detector's recent
//! keys, thoughts' information counts in 32 bits and no fingerprints for a run keelwave
//! already marked; every version reads the ones before it):
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
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const META_KEY: &[u8] = b"\"__meta__\"";
/// How long a restore retries Kafka errors without progress before it fails.
const RESTORE_RETRY: Duration = Duration::from_secs(60);
const VERSION: u32 = 4;

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

/// A run record's value: the input offset it covers and the run's state (`None`: it ended).
/// Reads every version up to this one.
pub fn decode_run(value: &[u8]) -> Result<(Option<i64>, Option<RunState>), String> {
    let rec: RunRecordIn = serde_json::from_slice(value).map_err(|e| e.to_string())?;
    if rec.v > VERSION {
        return Err(format!(
            "record version {} is newer than this eddy reads ({VERSION}); roll back the upgrade or finish it",
            rec.v
        ));
    }
    Ok((rec.offset, if rec.ended { None } else { rec.state }))
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
    // While a broker fails over, the partition has no reachable leader for a few seconds:
    // errors are retried (librdkafka finds the new leader) until RESTORE_RETRY passes without
    // progress, as the group consumer does; only then is the restore (and the worker) failed.
    let mut failing_since: Option<Instant> = None;
    let retry = |since: &mut Option<Instant>, e: KafkaError| -> Result<(), SourceError> {
        if since.get_or_insert_with(Instant::now).elapsed() >= RESTORE_RETRY {
            return Err(e.into());
        }
        tracing::warn!(error = %e, partition, "changelog restore: retrying");
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    };
    let (low, high) = loop {
        match c.fetch_watermarks(topic, partition, Duration::from_secs(15)) {
            Ok(w) => break w,
            Err(e) => retry(&mut failing_since, e)?,
        }
    };
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
            Err(e) => {
                retry(&mut failing_since, e)?;
                continue;
            }
        };
        failing_since = None;
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
                let (offset, state) = decode_run(p).map_err(bad)?;
                if let Some(o) = offset {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::decode;
    use crate::engine::{EngineConfig, PartitionEngine};
    use std::sync::Arc;

    /// A run with near-duplicate history, as the engine leaves it.
    fn live_state() -> (RunKey, RunState) {
        let mut e = PartitionEngine::new(Arc::new(EngineConfig::default()));
        let mut out = Vec::new();
        for (i, q) in [
            "rust async runtime",
            "tokio runtime async rust",
            "a b c d e f g h i j k l",
        ]
        .iter()
        .enumerate()
        {
            let line = format!(
                r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{i},"step_index":{i},"step_type":"tool_call","tool_name":"web_search","tool_input":{{"q":"{q}"}},"tool_output":[],"tool_success":true}}"#
            );
            e.apply(&decode(line.as_bytes()).expect("valid step"), &mut out);
        }
        let (k, s) = e.runs().next().expect("one open run");
        (k.clone(), s.clone())
    }

    #[test]
    fn records_round_trip() {
        let (k, s) = live_state();
        let (_, v) = encode(&Change::Upsert(k, &s), 7);
        let (offset, back) = decode_run(&v.expect("a value")).expect("decodes");
        assert_eq!(offset, Some(7));
        assert_eq!(back, Some(s));
    }

    /// Windows shared between detectors in memory are still written one per detector, and a
    /// record read back is written again byte for byte.
    #[test]
    fn records_are_rewritten_byte_for_byte() {
        let (k, s) = live_state();
        let (_, v) = encode(&Change::Upsert(k.clone(), &s), 7);
        let v = v.expect("a value");
        let rec: serde_json::Value = serde_json::from_slice(&v).unwrap();
        let det = &rec["state"]["detectors"];
        for (detector, window) in [
            ("repeat", "window"),
            ("cycle", "hist"),
            ("neardup", "window"),
            ("context", "outputs"),
        ] {
            let n = det[detector][window].as_array().map_or(0, Vec::len);
            assert_eq!(n, 3, "{detector}.{window}: {}", det[detector]);
        }
        let (_, back) = decode_run(&v).expect("decodes");
        let back = back.expect("open run");
        let (_, again) = encode(&Change::Upsert(k, &back), 7);
        assert_eq!(again.expect("a value"), v);
    }

    /// Failed calls (whose near-duplicate entries keep their error, not their output) and
    /// data outputs restore to an equal state and are written again byte for byte.
    #[test]
    fn failures_and_progress_round_trip() {
        let mut e = PartitionEngine::new(Arc::new(EngineConfig::default()));
        let mut out = Vec::new();
        for i in 0..12 {
            let (ok, output) = match i % 3 {
                0 => ("false", r#""error: column does not exist""#.to_string()),
                1 => ("true", format!(r#"{{"rows":[{i}],"name":"x{i}"}}"#)),
                _ => ("true", r#"{"rows":[1]}"#.to_string()),
            };
            let line = format!(
                r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{i},"step_index":{i},"step_type":"tool_call","tool_name":"db_query","tool_input":{{"q":"select {} from t"}},"tool_output":{output},"tool_success":{ok}}}"#,
                i % 4
            );
            e.apply(&decode(line.as_bytes()).expect("valid step"), &mut out);
        }
        let (k, s) = e.runs().next().expect("one open run");
        let (k, s) = (k.clone(), s.clone());
        let (_, v) = encode(&Change::Upsert(k.clone(), &s), 7);
        let v = v.expect("a value");
        let rec: serde_json::Value = serde_json::from_slice(&v).unwrap();
        let det = &rec["state"]["detectors"];
        assert!(det["neardup"]["window"]
            .as_array()
            .is_some_and(|w| w.len() > 3));
        assert!(det["progress"]["recent_actions"]
            .as_array()
            .is_some_and(|a| a.len() == 4));
        let (_, back) = decode_run(&v).expect("decodes");
        let back = back.expect("open run");
        assert_eq!(back, s);
        let (_, again) = encode(&Change::Upsert(k, &back), 7);
        assert_eq!(again.expect("a value"), v);
    }

    /// A version 1 record (full MinHash signatures in the near-duplicate window) still restores
    /// during a rolling upgrade, and the run goes on detecting as before.
    #[test]
    fn version_1_records_are_read() {
        let (k, s) = live_state();
        let (_, v) = encode(&Change::Upsert(k, &s), 7);
        let mut rec: serde_json::Value = serde_json::from_slice(&v.expect("a value")).unwrap();
        rec["v"] = 1.into();
        // Version 1 wrote window entries as objects and every signature in full.
        let det = &mut rec["state"]["detectors"];
        let as_objects = |list: &mut serde_json::Value, names: &[&str]| {
            let Some(items) = list.as_array_mut() else {
                panic!("a window: {list}");
            };
            for item in items.iter_mut() {
                let fields = item.as_array().expect("an array entry").clone();
                let obj: serde_json::Map<String, serde_json::Value> =
                    names.iter().map(|n| n.to_string()).zip(fields).collect();
                *item = obj.into();
            }
        };
        as_objects(
            &mut det["neardup"]["window"],
            &["step", "tool", "action", "kind", "result", "sig"],
        );
        as_objects(
            &mut det["repeat"]["window"],
            &["step", "primary", "output", "repeatable", "work"],
        );
        as_objects(
            &mut det["cycle"]["hist"],
            &["step", "action", "output", "repeatable"],
        );
        let window = det["neardup"]["window"].as_array_mut().expect("window");
        assert_eq!(window.len(), 3);
        for call in window.iter_mut() {
            if let Some(f) = call["sig"].get("f").and_then(|f| f.as_array()).cloned() {
                let hashes: Vec<u64> = f.iter().filter_map(|h| h.as_u64()).collect();
                // Version 1 wrote the full signature with 32-bit slots.
                let mut full = [0; crate::engine::text::MINHASH_K];
                crate::engine::text::minhash_into(&mut full, &hashes);
                call["sig"] = serde_json::json!(full.to_vec());
            }
        }
        assert!(window
            .iter()
            .all(|c| c["sig"].as_array().is_some_and(|a| a.len() == 32)));
        let v1 = serde_json::to_vec(&rec).unwrap();
        let (offset, back) = decode_run(&v1).expect("a version 1 record decodes");
        assert_eq!(offset, Some(7));
        let back = back.expect("open run");
        assert_eq!(back.steps, s.steps);
        // Same verdicts from here on: both states see one more paraphrase.
        let next = |st: RunState| {
            let mut e = PartitionEngine::new(Arc::new(EngineConfig::default()));
            e.restore(
                Default::default(),
                [(
                    RunKey {
                        project_id: "p".into(),
                        run_id: "r".into(),
                    },
                    st,
                )],
                [],
            );
            let mut out = Vec::new();
            for (i, q) in ["async rust runtime tokio", "rust tokio async runtime"]
                .iter()
                .enumerate()
            {
                let i = i + 3;
                let line = format!(
                    r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":{i},"step_index":{i},"step_type":"tool_call","tool_name":"web_search","tool_input":{{"q":"{q}"}},"tool_output":[],"tool_success":true}}"#
                );
                e.apply(&decode(line.as_bytes()).expect("valid step"), &mut out);
            }
            serde_json::to_string(&out).unwrap()
        };
        let want = next(s);
        assert!(want.contains("near_duplicate"), "{want}");
        assert_eq!(next(back), want);
        // A record from a newer eddy is refused with a clear reason.
        rec["v"] = (VERSION + 1).into();
        let err = decode_run(&serde_json::to_vec(&rec).unwrap()).unwrap_err();
        assert!(err.contains("newer"), "{err}");
    }
}
