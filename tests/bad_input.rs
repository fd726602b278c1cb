//! Hostile input against the real broker and ClickHouse: more than 20 kinds of malformed or
//! hostile messages interleaved with a looping and a healthy run. Every bad message must be in
//! the dead-letter topic with the right reason, its original bytes and its source offset;
//! every good run must produce exactly what it produces alone (replay of the good lines); the
//! hostile-but-valid messages are processed; and the worker stays up.
mod common;

use common::*;
use eddy::contract::OutputEvent;
use eddy::replay::replay_to_vec;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

const T0: i64 = 1_767_225_600_000;

fn step(
    project: &str,
    run: &str,
    i: u64,
    ts: i64,
    input: serde_json::Value,
    output: serde_json::Value,
) -> String {
    json!({"v":1,"kind":"step","project_id":project,"run_id":run,"ts":ts,"step_index":i,
           "step_type":"tool_call","tool_name":"web_search","tool_input":input,"tool_output":output,
           "tool_success":true,"tokens":100,"cost_usd":0.001,"agent":"researcher"})
    .to_string()
}

/// A looping run and a healthy one, keyed by run id.
fn good_lines() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for run in ["loopy", "healthy"] {
        v.push((run.into(), json!({"v":1,"kind":"run_started","project_id":"acme","run_id":run,"ts":T0,"agent_name":"researcher"}).to_string()));
        for i in 1..=12u64 {
            let ts = T0 + i as i64 * 1000;
            let line = if run == "loopy" && i >= 3 {
                step(
                    "acme",
                    run,
                    i,
                    ts,
                    json!({"q":"weather in Paris"}),
                    json!({"hits":[]}),
                )
            } else {
                step(
                    "acme",
                    run,
                    i,
                    ts,
                    json!({"q": format!("topic {i}")}),
                    json!({"hits":[i]}),
                )
            };
            v.push((run.into(), line));
        }
        v.push((run.into(), json!({"v":1,"kind":"run_finished","project_id":"acme","run_id":run,"ts":T0 + 20_000,"status":"completed"}).to_string()));
    }
    v
}

const STEP_HEAD: &str = r#"{"v":1,"kind":"step","project_id":"acme","run_id":"bad","ts":1767225601000,"step_type":"tool_call","tool_name":"t""#;

/// (key, payload, expected dead-letter reason).
fn bad_messages() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let s = |x: &str| x.as_bytes().to_vec();
    let with = |extra: &str| format!("{STEP_HEAD},\"step_index\":1,{extra}}}").into_bytes();
    let deep = |n: usize| {
        format!(
            "{STEP_HEAD},\"step_index\":1,\"tool_input\":{}1{}}}",
            "[".repeat(n),
            "]".repeat(n)
        )
        .into_bytes()
    };
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend(with(r#""x":1"#));
    let mut two_mb = with(&format!(
        r#""tool_output":"{}""#,
        "A".repeat(2 * 1024 * 1024)
    ));
    two_mb.shrink_to_fit();
    vec![
        ("truncated_json", s(r#"{"v":1,"kind":"step","project_id":"acme","run_"#), "invalid_json"),
        ("empty_payload", Vec::new(), "empty_payload"),
        ("binary_garbage", vec![0xff, 0xfe, 0x00, 0x01, 0x80, 0x9f, 0xc3, 0x28], "invalid_utf8"),
        ("utf8_inside_string", [s(r#"{"v":1,"kind":"st"#), vec![0xc3, 0x28], s(r#"ep"}"#)].concat(), "invalid_utf8"),
        ("version_2", s(r#"{"v":2,"kind":"step","project_id":"acme","run_id":"bad","ts":1}"#), "unsupported_version"),
        ("version_string", s(r#"{"v":"1","kind":"step","project_id":"acme","run_id":"bad","ts":1}"#), "unsupported_version"),
        ("no_version", s(r#"{"kind":"step","project_id":"acme","run_id":"bad","ts":1}"#), "missing_version"),
        ("unknown_kind", s(r#"{"v":1,"kind":"tool_result","project_id":"acme","run_id":"bad","ts":1}"#), "unknown_kind"),
        ("no_kind", s(r#"{"v":1,"project_id":"acme","run_id":"bad","ts":1}"#), "missing_kind"),
        ("array", s("[1,2,3]"), "not_an_object"),
        ("null", s("null"), "not_an_object"),
        ("project_id_number", s(r#"{"v":1,"kind":"step","project_id":5,"run_id":"bad","ts":1,"step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("run_id_array", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":["a"],"ts":1,"step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("step_index_string", format!("{STEP_HEAD},\"step_index\":\"abc\"}}").into_bytes(), "invalid_field"),
        ("duplicate_step_index", with(r#""step_index":2"#), "duplicate_field"),
        ("step_index_negative", format!("{STEP_HEAD},\"step_index\":-1}}").into_bytes(), "invalid_field"),
        ("step_index_float", format!("{STEP_HEAD},\"step_index\":1.5}}").into_bytes(), "invalid_field"),
        ("tokens_negative", with(r#""tokens":-5"#), "invalid_field"),
        ("cost_string", with(r#""cost_usd":"cheap""#), "invalid_field"),
        ("success_string", with(r#""tool_success":"yes""#), "invalid_field"),
        ("ts_text", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":"bad","ts":"yesterday","step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("ts_beyond_9999", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":"bad","ts":100000000000000000,"step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("ts_before_1970", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":"bad","ts":"1969-12-31T23:59:59Z","step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("no_step_index", format!("{STEP_HEAD}}}").into_bytes(), "missing_field"),
        ("no_ts", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":"bad","step_index":1,"step_type":"x"}"#), "missing_field"),
        ("empty_run_id", s(r#"{"v":1,"kind":"step","project_id":"acme","run_id":"","ts":1,"step_index":1,"step_type":"x"}"#), "invalid_field"),
        ("huge_run_id", format!(r#"{{"v":1,"kind":"step","project_id":"acme","run_id":"{}","ts":1,"step_index":1,"step_type":"x"}}"#, "r".repeat(10_000)).into_bytes(), "invalid_field"),
        ("status_maybe", s(r#"{"v":1,"kind":"run_finished","project_id":"acme","run_id":"bad","ts":1,"status":"maybe"}"#), "invalid_field"),
        ("reason_evicted", s(r#"{"v":1,"kind":"run_finished","project_id":"acme","run_id":"bad","ts":1,"status":"failed","termination_reason":"evicted"}"#), "invalid_field"),
        ("nested_100", deep(100), "too_deep"),
        ("nested_100000", deep(100_000), "too_deep"),
        ("nan_token", with(r#""cost_usd":NaN"#), "invalid_json"),
        ("infinity_token", with(r#""tool_latency_ms":Infinity"#), "invalid_json"),
        ("duplicate_run_id", with(r#""run_id":"other""#), "duplicate_field"),
        ("bom", bom, "invalid_json"),
        ("two_megabytes", two_mb, "too_large"),
        ("trailing_garbage", [with(r#""x":1"#), s(" {}")].concat(), "invalid_json"),
    ]
}

/// Valid but hostile: processed, never dead-lettered. (key, payload, is a step).
fn hostile_valid() -> Vec<(String, String, bool)> {
    let h = |run: &str, ts: i64, input: serde_json::Value, output: serde_json::Value| {
        step("hostile", run, 1, ts, input, output)
    };
    vec![
        ("h-str".into(), h("h-str", T0 + 5_000, json!("a string input"), json!(null)), true),
        ("h-arr".into(), h("h-arr", T0 + 5_000, json!([1, [2, [3]]]), json!([])), true),
        ("h-num".into(), h("h-num", T0 + 5_000, json!(42.5), json!(-1)), true),
        ("h-past".into(), h("h-past", 0, json!({"q":"1970"}), json!({})), true),
        ("h-future".into(), h("h-future", 253_402_300_000_000, json!({"q":"9999"}), json!({})), true),
        ("not-the-run-id".into(), h("h-key", T0 + 5_000, json!({"q":"k"}), json!({})), true),
        ("h-big".into(), h("h-big", T0 + 5_000, json!({"q":"big"}), json!({"blob": "b".repeat(600_000), "api_key": "sk-HOSTILE-SECRET"})), true),
        ("h-extra".into(), json!({"v":1,"kind":"run_started","project_id":"hostile","run_id":"h-extra","ts":T0,"agent_name":"a","future_field":{"x":[1,2]}}).to_string(), false),
        ("h-unicode".into(), h("h-unicode", T0 + 5_000, json!({"q":"caf\u{e9} \u{1F600} \u{0}"}), json!({"e":"\u{202e}"})), true),
    ]
}

fn project_of(e: &OutputEvent) -> &str {
    match e {
        OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => &s.project_id,
        OutputEvent::RunTerminated(t) => &t.project_id,
    }
}

/// The message stored at (partition, offset) of `topic`.
fn read_at(
    cfg: &eddy::config::Config,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Option<Vec<u8>> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set("group.id", "eddy-test-read-at")
        .set("enable.auto.commit", "false")
        .create()
        .expect("reader");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    c.assign(&tpl).unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            assert_eq!(m.offset(), offset);
            return Some(m.payload().unwrap_or_default().to_vec());
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_dead_lettered_and_good_traffic_is_untouched() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "bad");
    // The input topic must accept the 2 MB message; the test's producer must send it.
    cfg.kafka.topics.max_message_bytes = Some(4 * 1024 * 1024);
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let mut pcfg = cfg.clone();
    pcfg.kafka
        .producer
        .insert("message.max.bytes".into(), (4 * 1024 * 1024).to_string());

    let good = good_lines();
    let bad = bad_messages();
    let hostile = hostile_valid();
    assert!(bad.len() >= 20);
    // Interleave: good, bad, hostile in turn.
    let mut msgs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let (mut gi, mut bi, mut hi) = (0, 0, 0);
    while gi < good.len() || bi < bad.len() || hi < hostile.len() {
        if let Some((k, l)) = good.get(gi) {
            msgs.push((k.clone().into_bytes(), l.clone().into_bytes()));
            gi += 1;
        }
        if let Some((k, p, _)) = bad.get(bi) {
            msgs.push((format!("bad-{k}").into_bytes(), p.clone()));
            bi += 1;
        }
        if gi % 2 == 0 {
            if let Some((k, l, _)) = hostile.get(hi) {
                msgs.push((k.clone().into_bytes(), l.clone().into_bytes()));
                hi += 1;
            }
        }
    }
    let mut producer = eddy::emit::Producer::plain(&pcfg.kafka).expect("producer");
    for (k, p) in &msgs {
        producer
            .send_raw(&cfg.kafka.topics.input, k, p)
            .expect("send");
    }
    producer.flush().await.expect("all delivered");

    let mut worker = spawn_worker(&cfg, &[]);

    // Expected: the good lines replayed alone.
    let good_jsonl: String = good.iter().map(|(_, l)| format!("{l}\n")).collect();
    let (want, _) = replay_to_vec(
        good_jsonl.as_bytes(),
        Arc::new(cfg.engine.clone()),
        cfg.kafka.topics.partitions as u32,
    );
    let want_ids: BTreeSet<String> = want.iter().map(|e| e.event_id().to_string()).collect();
    assert!(want
        .iter()
        .any(|e| matches!(e, OutputEvent::LoopDetected(s) if s.run_id == "loopy")));

    let dlq = read_topic_until(
        &cfg,
        &cfg.kafka.topics.dlq,
        Duration::from_secs(90),
        Some(&mut worker),
        |r| r.len() >= bad.len(),
    );
    let outs_recs = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(60),
        Some(&mut worker),
        |r| {
            let ids: BTreeSet<String> = outputs(r)
                .iter()
                .map(|e| e.event_id().to_string())
                .collect();
            want_ids.is_subset(&ids)
        },
    );

    // Every bad message: in the DLQ once, with its reason, original bytes and source offset.
    assert_eq!(
        dlq.len(),
        bad.len(),
        "exactly the bad messages are dead-lettered"
    );
    let by_key: BTreeMap<String, &common::Record> = dlq
        .iter()
        .map(|r| {
            (
                String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned(),
                r,
            )
        })
        .collect();
    for (k, payload, reason) in &bad {
        let r = by_key
            .get(&format!("bad-{k}"))
            .unwrap_or_else(|| panic!("{k} not in the DLQ"));
        assert_eq!(
            r.headers.get("eddy.reason").map(String::as_str),
            Some(*reason),
            "{k}: {:?}",
            r.headers.get("eddy.detail")
        );
        assert!(!r.headers["eddy.detail"].is_empty());
        assert_eq!(r.headers["eddy.source.topic"], cfg.kafka.topics.input);
        let part: i32 = r.headers["eddy.source.partition"].parse().unwrap();
        let off: i64 = r.headers["eddy.source.offset"].parse().unwrap();
        let stored =
            read_at(&cfg, &cfg.kafka.topics.input, part, off).expect("source offset exists");
        assert_eq!(
            &stored, payload,
            "{k}: eddy.source.* points at the original message"
        );
        let got = r.payload.clone().unwrap_or_default();
        if payload.len() > cfg.kafka.dlq_max_payload_bytes {
            assert_eq!(
                r.headers.get("eddy.truncated").map(String::as_str),
                Some("true"),
                "{k}"
            );
            assert_eq!(r.headers["eddy.original_size"], payload.len().to_string());
            assert_eq!(&got[..], &payload[..cfg.kafka.dlq_max_payload_bytes]);
        } else {
            assert_eq!(&got, payload, "{k}: the DLQ keeps the original bytes");
            assert!(!r.headers.contains_key("eddy.truncated"));
        }
    }

    // Good runs: exactly what they produce alone (same ids, same content).
    let got: Vec<OutputEvent> = outputs(&outs_recs);
    let acme: BTreeMap<String, OutputEvent> = got
        .iter()
        .filter(|e| project_of(e) == "acme")
        .map(|e| (e.event_id().to_string(), e.clone()))
        .collect();
    let want_map: BTreeMap<String, OutputEvent> = want
        .iter()
        .map(|e| (e.event_id().to_string(), e.clone()))
        .collect();
    assert_eq!(
        acme, want_map,
        "good traffic is untouched by the hostile traffic"
    );
    // No secret from a hostile payload reached an output.
    for r in &outs_recs {
        assert!(
            !String::from_utf8_lossy(r.payload.as_deref().unwrap_or_default())
                .contains("sk-HOSTILE-SECRET")
        );
    }

    // ClickHouse: the good steps and signals, and every hostile-but-valid step.
    let good_steps = good
        .iter()
        .filter(|(_, l)| l.contains(r#""kind":"step""#))
        .count() as u64;
    let n = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.steps FINAL WHERE project_id = 'acme'",
        good_steps,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(n, good_steps);
    let signals = want
        .iter()
        .filter(|e| !matches!(e, OutputEvent::RunTerminated(_)))
        .count() as u64;
    let n = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.signals FINAL WHERE project_id = 'acme'",
        signals,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(n, signals);
    let n = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.runs FINAL WHERE project_id = 'acme'",
        2,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(n, 2);
    let hostile_steps = hostile.iter().filter(|h| h.2).count() as u64;
    let n = await_ch_count(
        &cfg,
        "SELECT count() FROM {db}.steps FINAL WHERE project_id = 'hostile'",
        hostile_steps,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(n, hostile_steps, "hostile but valid steps are processed");

    assert!(
        worker.try_wait().expect("wait").is_none(),
        "the worker stayed up"
    );
    stop_gracefully(&mut worker);
}
