//! The OTLP receiver end to end, with real OpenTelemetry clients from PyPI, over both transports.
//!
//! - OTLP/HTTP: the Python SDK's OTLP/HTTP exporter (GenAI conventions by hand) and
//!   OpenInference's LangChain instrumentor (fake chat model, real tools) export to `eddy
//!   ingest-otlp`; a real `eddy run` catches the looping agents and not the healthy ones; the
//!   very same spans exported a second time change nothing on the output topic.
//! - OTLP/gRPC: the SDK's gRPC exporter (`opentelemetry-exporter-otlp-proto-grpc`) with an API
//!   key in its metadata, carrying GenAI spans by hand, and LangGraph agents
//!   (`create_react_agent`) traced by OpenLLMetry's LangChain instrumentation and by
//!   OpenInference's; the agents are caught or not, named after their graph, and their steps to
//!   catch reach ClickHouse as step counts.
//!
//! Needs python3 with the packages below; without them the test fails and says how to install
//! them. Never skips.
mod common;

use common::daemon::{self, Daemon};
use common::*;
use eddy::contract::OutputEvent;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

const PACKAGES: &str = "pip install -r scripts/python-requirements.txt (opentelemetry-sdk, \
    opentelemetry-exporter-otlp-proto-http, opentelemetry-exporter-otlp-proto-grpc, \
    openinference-instrumentation-langchain, opentelemetry-instrumentation-langchain, \
    langchain-core, langgraph)";

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

/// The receiver's addresses: OTLP/HTTP, OTLP/gRPC, admin.
struct Addrs {
    http: String,
    grpc: String,
    admin: String,
}

/// `eddy ingest-otlp` on the test's topics, on free ports; `keys` are `[ingest_api_keys]`.
fn start_receiver(cfg: &eddy::config::Config, keys: &[(&str, &str)]) -> (Daemon, Addrs) {
    let a = Addrs {
        http: free_addr(),
        grpc: free_addr(),
        admin: free_addr(),
    };
    let toml = format!(
        "otlp_addr = {:?}\notlp_grpc_addr = {:?}\notlp_admin_addr = {:?}\n{}",
        a.http,
        a.grpc,
        a.admin,
        daemon::base_toml(cfg, keys)
    );
    // Both listeners are bound before the process reaches Kafka; the admin server comes last.
    let rx = daemon::start("ingest-otlp", &toml, &a.admin, false);
    for addr in [&a.http, &a.grpc] {
        std::net::TcpStream::connect(addr).expect("both transports listen");
    }
    (rx, a)
}

fn python(script: &str, args: &[&str], envs: &[(&str, String)]) -> serde_json::Value {
    let mut cmd = Command::new("python3");
    cmd.arg(format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run python3");
    assert!(
        out.status.success(),
        "tests/{script} {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the agent script prints one JSON report")
}

/// The value of the counter `name` whose labels include all of `labels` (0 when absent).
fn counter(metrics: &str, name: &str, labels: &[&str]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<u64>().ok())
        .sum()
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
    let (_rx, addrs) = start_receiver(&cfg, &[]);
    let endpoint = format!("http://{}/v1/traces", addrs.http);
    let envs = [
        ("OTLP_ENDPOINT", endpoint.clone()),
        ("EDDY_PROJECT", project.clone()),
    ];
    let report = python(
        "otlp_agent.py",
        &[spans_file.to_str().expect("utf-8 path")],
        &envs,
    );
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
        "otlp_agent.py",
        &["--replay", spans_file.to_str().expect("utf-8 path")],
        &envs,
    );
    assert_eq!(replay["replay_status"], 200, "{replay}");
    let second_total = await_caught_up(&cfg, &mut worker, first_total + 1);
    assert!(second_total > first_total, "the replay produced no events");
    let after = output_payloads(&cfg);
    assert_eq!(before, after, "the second export changed the output topic");

    let m = metrics(&addrs.admin);
    let http = "transport=\"http\"";
    assert_eq!(
        counter(
            &m,
            "eddy_otlp_requests_total",
            &[http, "answer=\"bad_request\""]
        ),
        2,
        "{m}"
    );
    assert!(
        counter(&m, "eddy_otlp_requests_total", &[http, "answer=\"ok\""]) > 0,
        "{m}"
    );
    for want in [
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

/// (run id, agent name it must get, whether it loops) of a report's runs.
fn runs_of(report: &serde_json::Value, runs: &[(&str, &str, bool)]) -> Vec<(String, String, bool)> {
    runs.iter()
        .map(|(field, agent, loops)| {
            let id = report[*field]
                .as_str()
                .unwrap_or_else(|| panic!("{field} missing in {report}"))
                .to_string();
            assert!(id.len() == 32 && id != "0".repeat(32), "a trace id: {id}");
            (id, agent.to_string(), *loops)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn grpc_exporters_and_langgraph_agents_under_two_instrumentations_are_caught() {
    require_python_modules(&[
        "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
        "opentelemetry.instrumentation.langchain",
        "openinference.instrumentation.langchain",
        "langgraph.prebuilt",
    ]);
    let ep = endpoints().await;
    let cfg = test_config(&ep, "otlp_grpc");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let project = format!("keyed-{}", cfg.kafka.group_id.replace('.', "-"));
    let key = "kw_otlp_grpc_test_key";
    let mut worker = spawn_worker(&cfg, &[]);
    let (_rx, addrs) = start_receiver(&cfg, &[(key, &project)]);
    let envs = [
        ("OTLP_GRPC_ENDPOINT", format!("http://{}", addrs.grpc)),
        ("EDDY_KEY", key.to_string()),
    ];

    let genai = python("otlp_grpc_agent.py", &["genai"], &envs);
    eprintln!("genai: {genai}");
    // The receiver's refusals, as the real gRPC stack reports them.
    assert_eq!(genai["wrong_key_result"], "FAILURE", "{genai}");
    assert_eq!(genai["no_key"][0], "UNAUTHENTICATED", "{genai}");
    assert_eq!(genai["malformed"][0], "INTERNAL", "{genai}");
    let openllmetry = python("otlp_grpc_agent.py", &["openllmetry"], &envs);
    eprintln!("openllmetry: {openllmetry}");
    let openinference = python("otlp_grpc_agent.py", &["openinference"], &envs);
    eprintln!("openinference: {openinference}");
    let mut runs = runs_of(
        &genai,
        &[
            ("genai_looping", "researcher", true),
            ("genai_healthy", "planner", false),
        ],
    );
    // Both LangGraph instrumentations: the default graph is "LangGraph", the other was
    // compiled with a name; never create_react_agent's "agent" node.
    for report in [&openllmetry, &openinference] {
        runs.extend(runs_of(
            report,
            &[
                ("looping", "LangGraph", true),
                ("healthy", "order_helper", false),
            ],
        ));
    }

    let all: BTreeSet<&str> = runs.iter().map(|(r, _, _)| r.as_str()).collect();
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
            all.iter().all(|r| ended.contains(r))
        },
    );
    let outs = outputs(&recs);
    let mut caught = 0;
    for (run, agent, loops) in &runs {
        let end = outs
            .iter()
            .find_map(|o| match o {
                OutputEvent::RunTerminated(t) if &t.run_id == run => Some(t),
                _ => None,
            })
            .unwrap_or_else(|| panic!("run {run} never ended: {outs:?}"));
        assert_eq!(end.project_id, project, "the API key names the project");
        assert_eq!(end.agent_name.as_deref(), Some(agent.as_str()), "{end:?}");
        let signalled = outs
            .iter()
            .any(|o| !matches!(o, OutputEvent::RunTerminated(_)) && o.run_id() == run);
        assert_eq!(end.loop_detected, *loops, "{agent} run {run}: {end:?}");
        if !loops {
            assert!(!signalled, "healthy run {run} signalled: {outs:?}");
            continue;
        }
        caught += 1;
        // Step numbers, apart from the start-time indices: small, ordered, within the run.
        let began = end.loop_step_number.expect("the loop's step number");
        let at = end
            .loop_caught_step_number
            .expect("the catch's step number");
        assert!(
            1 <= began && began <= at && at <= end.totals.steps,
            "step numbers {began}..{at} of {} steps: {end:?}",
            end.totals.steps
        );
        assert!(
            end.loop_step_index.expect("index") > 1_000_000_000_000_000,
            "OTLP indices are start times: {end:?}"
        );
    }
    assert_eq!(caught, 3, "one looping agent per instrumentation");

    // ClickHouse: the catches' steps counted, and averaged as counts.
    let t = Duration::from_secs(120);
    let sql = format!("SELECT count() FROM {{db}}.runs FINAL WHERE project_id = '{project}'");
    assert_eq!(
        await_ch_count(&cfg, &sql, runs.len() as u64, t).await,
        runs.len() as u64
    );
    let sql = format!(
        "SELECT toUInt64(sum(loops_caught)) FROM {{db}}.rollup_minute FINAL WHERE project_id = '{project}'"
    );
    assert_eq!(
        await_ch_count(&cfg, &sql, 3, t).await,
        3,
        "every catch in the rollup"
    );
    let client = clickhouse(&cfg).with_database(&cfg.clickhouse.database);
    let rows: Vec<(String, u8, u8, u64, u64)> = client
        .query(&format!(
            "SELECT run_id, loops_caught, loops_counted, steps_to_catch, caught_after_steps \
             FROM rollup_minute FINAL WHERE project_id = '{project}' AND loops_caught = 1"
        ))
        .fetch_all()
        .await
        .expect("rollup rows");
    let mut counts: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for (run, _, counted, to_catch, caught_after) in &rows {
        let end = outs
            .iter()
            .find_map(|o| match o {
                OutputEvent::RunTerminated(t) if &t.run_id == run => Some(t),
                _ => None,
            })
            .expect("the caught run ended");
        let (began, at) = (
            end.loop_step_number.unwrap_or(0),
            end.loop_caught_step_number.unwrap_or(0),
        );
        assert_eq!(*counted, 1, "{run}: steps counted");
        assert_eq!(
            *to_catch,
            at - began,
            "{run}: the catch's step numbers apart"
        );
        assert_eq!(caught_after, to_catch, "{run}");
        counts
            .entry(end.agent_name.clone().unwrap_or_default())
            .or_default()
            .push(*to_catch as f64);
    }
    assert_eq!(rows.len(), 3, "{rows:?}");
    let numbers: Vec<(u64, u64)> = client
        .query(&format!(
            "SELECT loop_step_number, loop_caught_step_number FROM runs FINAL \
             WHERE project_id = '{project}' AND loop_detected = 1"
        ))
        .fetch_all()
        .await
        .expect("runs rows");
    assert_eq!(numbers.len(), 3);
    assert!(
        numbers.iter().all(|&(b, c)| 1 <= b && b <= c),
        "{numbers:?}"
    );
    let rollup = eddy::query::execute(
        &client,
        "agent_rollup",
        &[
            ("project_id", project.as_str()),
            ("from", "2020-01-01T00:00:00Z"),
            ("to", "2100-01-01T00:00:00Z"),
            ("bucket_seconds", "3153600000"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    )
    .await
    .expect("agent_rollup");
    let col = |row: &[String], c: &str| row[rollup.column(c).expect(c)].clone();
    let averages: std::collections::BTreeMap<String, f64> = rollup
        .rows
        .iter()
        .filter(|r| col(r, "loops_caught") != "0")
        .map(|r| {
            let avg = col(r, "avg_caught_after_steps").parse().expect("a number");
            (col(r, "agent_name"), avg)
        })
        .collect();
    assert_eq!(
        averages.keys().collect::<Vec<_>>(),
        counts.keys().collect::<Vec<_>>(),
        "{averages:?}"
    );
    for (agent, c) in &counts {
        let mean = c.iter().sum::<f64>() / c.len() as f64;
        assert!(
            (averages[agent] - (mean * 100.0 + 0.5).floor() / 100.0).abs() < 1e-9 && mean < 20.0,
            "{agent}: the average of counted steps ({mean}), not of start-time differences: \
             {averages:?}"
        );
    }

    let m = metrics(&addrs.admin);
    let grpc = "transport=\"grpc\"";
    assert!(
        counter(&m, "eddy_otlp_requests_total", &[grpc, "answer=\"ok\""]) > 0,
        "{m}"
    );
    assert_eq!(
        counter(
            &m,
            "eddy_otlp_requests_total",
            &[grpc, "answer=\"unauthorized\""]
        ),
        2,
        "{m}"
    );
    assert_eq!(
        counter(
            &m,
            "eddy_otlp_requests_total",
            &[grpc, "answer=\"bad_request\""]
        ),
        1,
        "{m}"
    );
}
