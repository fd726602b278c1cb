//! The OTLP receiver end to end, with real OpenTelemetry clients from PyPI: the Python SDK's
//! OTLP/HTTP exporter (GenAI conventions by hand) and OpenInference's LangChain instrumentor
//! (fake chat model, real tools) export to `eddy ingest-otlp`; a real `eddy run` catches the
//! looping agents and not the healthy ones; the very same spans exported a second time change
//! nothing on the output topic.
//!
//! Needs python3 with the packages below; without them the test fails and says how to install
//! them. Never skips.
mod common;

use common::*;
use eddy::contract::OutputEvent;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PACKAGES: &str = "pip install opentelemetry-sdk==1.45.2 \
    opentelemetry-exporter-otlp-proto-http==1.45.2 \
    openinference-instrumentation-langchain==0.1.80 langchain-core==1.8.1";

fn require_python_modules(modules: &[&str]) {
    let code = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    match Command::new("python3").args(["-c", &code]).output() {
        Err(e) => {
            panic!("python3 is required for this test ({e}): install Python 3, then `{PACKAGES}`")
        }
        Ok(o) if !o.status.success() => panic!(
            "python3 cannot import the OpenTelemetry clients: run `{PACKAGES}`\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `eddy ingest-otlp` on the test's topics, on free ports (receiver, admin).
fn start_receiver(cfg: &eddy::config::Config, dir: &std::path::Path) -> (Worker, String, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let path = dir.join("otlp.toml");
    std::fs::write(
        &path,
        format!(
            "kafka_brokers = {:?}\ninput_topic = {:?}\noutput_topic = {:?}\ndlq_topic = {:?}\n\
             group_id = {:?}\ntopic_partitions = {}\notlp_addr = {addr:?}\notlp_admin_addr = {admin:?}\n",
            cfg.kafka.brokers,
            cfg.kafka.topics.input,
            cfg.kafka.topics.output,
            cfg.kafka.topics.dlq,
            cfg.kafka.group_id,
            cfg.kafka.topics.partitions
        ),
    )
    .expect("write config");
    let mut rx = Worker(
        Command::new(env!("CARGO_BIN_EXE_eddy"))
            .arg("ingest-otlp")
            .arg("--config")
            .arg(&path)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("EDDY_LOG", "warn,eddy=info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn eddy ingest-otlp"),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        if let Ok(Some(status)) = rx.try_wait() {
            panic!("eddy ingest-otlp exited ({status}) before listening on {addr}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "eddy ingest-otlp is not listening on {addr} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (rx, addr, admin)
}

fn python(args: &[&str], envs: &[(&str, String)]) -> serde_json::Value {
    let mut cmd = Command::new("python3");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp_agent.py"))
        .args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run python3 tests/otlp_agent.py");
    assert!(
        out.status.success(),
        "tests/otlp_agent.py {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the agent script prints one JSON report")
}

/// The worker has committed everything on the input topic: what it will ever publish for it is
/// on the output topic.
fn await_caught_up(cfg: &eddy::config::Config, worker: &mut Worker, min_total: i64) -> i64 {
    let mut cc = ClientConfig::new();
    for (k, v) in cfg.kafka.client_props() {
        cc.set(k, v);
    }
    let c: BaseConsumer = cc
        .set("group.id", &cfg.kafka.group_id)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offsets reader");
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = worker.try_wait() {
            panic!("the worker exited ({status})");
        }
        let mut tpl = TopicPartitionList::new();
        let mut ends = 0i64;
        for p in 0..cfg.kafka.topics.partitions {
            let (_, high) = c
                .fetch_watermarks(&cfg.kafka.topics.input, p, Duration::from_secs(5))
                .expect("watermarks");
            ends += high;
            tpl.add_partition(&cfg.kafka.topics.input, p);
        }
        let committed: i64 = c
            .committed_offsets(tpl, Duration::from_secs(5))
            .map(|t| {
                t.elements()
                    .iter()
                    .map(|e| match e.offset() {
                        Offset::Offset(o) => o,
                        _ => 0,
                    })
                    .sum()
            })
            .unwrap_or(0);
        if ends >= min_total && committed == ends {
            return ends;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the worker has committed {committed} of {ends} input messages after 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn output_payloads(cfg: &eddy::config::Config) -> Vec<String> {
    // Caught up means published; reading until idle collects all of it.
    let recs = read_topic_until(
        cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(30),
        None,
        |_| true,
    );
    let mut v: Vec<String> = recs
        .iter()
        .filter_map(|r| r.payload.as_deref())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    v.sort();
    v
}

fn metrics(admin: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("connect to the admin server");
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read /metrics");
    raw
}

#[tokio::test(flavor = "multi_thread")]
async fn otel_traced_agents_get_their_verdict_and_a_second_export_changes_nothing() {
    require_python_modules(&[
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "openinference.instrumentation.langchain",
        "langchain_core.language_models.fake_chat_models",
    ]);
    let ep = endpoints().await;
    let cfg = test_config(&ep, "otlp");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let project = format!("proj-{}", cfg.kafka.group_id.replace('.', "-"));
    let dir = tempfile::tempdir().expect("tempdir");
    let spans_file = dir.path().join("spans.pb");

    let mut worker = spawn_worker(&cfg, &[]);
    let (_rx, addr, admin) = start_receiver(&cfg, dir.path());
    let endpoint = format!("http://{addr}/v1/traces");
    let envs = [
        ("OTLP_ENDPOINT", endpoint.clone()),
        ("EDDY_PROJECT", project.clone()),
    ];
    let report = python(&[spans_file.to_str().expect("utf-8 path")], &envs);
    eprintln!("agents: {report}");
    let run = |name: &str| {
        report[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} missing in {report}"))
            .to_string()
    };
    let looping: BTreeSet<String> = [run("genai_looping"), run("langchain_looping")].into();
    let healthy: BTreeSet<String> = [run("genai_healthy"), run("langchain_healthy")].into();
    for r in looping.iter().chain(&healthy) {
        assert!(r.len() == 32 && r != &"0".repeat(32), "a trace id: {r}");
    }

    // Malformed payloads: 400 with the reason.
    assert_eq!(report["malformed"][0], 400, "{report}");
    assert!(
        report["malformed"][1]
            .as_str()
            .is_some_and(|m| m.contains("protobuf body")),
        "{report}"
    );
    assert_eq!(report["malformed_json"][0], 400, "{report}");
    assert!(
        report["malformed_json"][1]
            .as_str()
            .is_some_and(|m| m.contains("\"code\":3") && m.contains("JSON body")),
        "{report}"
    );

    // The verdicts: every run ends (its root span), only the looping ones are caught.
    let all: BTreeSet<String> = looping.union(&healthy).cloned().collect();
    let recs = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        Some(&mut worker),
        |recs| {
            let outs = outputs(recs);
            let ended: BTreeSet<&str> = outs
                .iter()
                .filter(|o| matches!(o, OutputEvent::RunTerminated(_)))
                .map(|o| o.run_id())
                .collect();
            all.iter().all(|r| ended.contains(r.as_str()))
        },
    );
    let outs = outputs(&recs);
    for o in &outs {
        if let OutputEvent::RunTerminated(t) = o {
            assert_eq!(
                t.project_id, project,
                "the resource attribute names the project"
            );
        }
    }
    let detected: BTreeSet<&str> = outs
        .iter()
        .filter(|o| matches!(o, OutputEvent::LoopDetected(_)))
        .map(|o| o.run_id())
        .collect();
    let signalled: BTreeSet<&str> = outs
        .iter()
        .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
        .map(|o| o.run_id())
        .collect();
    for r in &looping {
        assert!(
            detected.contains(r.as_str()),
            "looping run {r} not caught: {outs:?}"
        );
    }
    for r in &healthy {
        assert!(
            !signalled.contains(r.as_str()),
            "healthy run {r} signalled: {outs:?}"
        );
    }

    // The same spans exported again (reversed, in one batch): nothing new on the output topic.
    let first_total = await_caught_up(&cfg, &mut worker, 1);
    let before = output_payloads(&cfg);
    let replay = python(
        &["--replay", spans_file.to_str().expect("utf-8 path")],
        &envs,
    );
    assert_eq!(replay["replay_status"], 200, "{replay}");
    let second_total = await_caught_up(&cfg, &mut worker, first_total + 1);
    assert!(second_total > first_total, "the replay produced no events");
    let after = output_payloads(&cfg);
    assert_eq!(before, after, "the second export changed the output topic");

    let m = metrics(&admin);
    for want in [
        "eddy_otlp_requests_total{answer=\"bad_request\"} 2",
        "eddy_otlp_spans_total{outcome=\"received\"}",
        "eddy_otlp_events_total",
    ] {
        assert!(m.contains(want), "{want} missing from /metrics:\n{m}");
    }
    // Every span the receiver saw is counted: both exports of every span, plus the retry.
    let received: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("eddy_otlp_spans_total{outcome=\"received\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("received spans counted");
    let spans = report["spans"].as_u64().expect("span count");
    let retried = report["planner_reexported"]
        .as_u64()
        .expect("retried span count");
    assert_eq!(received, 2 * spans + retried, "{m}");
}
