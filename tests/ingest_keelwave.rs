//! The keelwave bridge end to end, with the real `keelwave` SDK from PyPI: agents instrumented
//! for keelwave point their `endpoint` at `eddy ingest-http`, and `eddy run` catches the loop.
//!
//! Needs python3 with `keelwave` (0.1.1) installed; without them the test fails and says how to
//! install them. Never skips.
mod common;

use common::bridge::*;
use common::*;
use eddy::contract::{decode, Event, OutputEvent};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

fn require_python_module(module: &str, install: &str) {
    match Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
    {
        Err(e) => {
            panic!("python3 is required for this test ({e}): install Python 3, then `{install}`")
        }
        Ok(o) if !o.status.success() => panic!(
            "python3 cannot import `{module}`: run `{install}`\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
}

fn str_at<'a>(v: &'a serde_json::Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str()
        .unwrap_or_else(|| panic!("{path:?} is not a string in {v}"))
}

/// A keelwave-format key: kw_ + 52 base32 characters.
fn keelwave_key() -> String {
    const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let tail: String = (0..52)
        .map(|_| B32[rand::random_range(0..B32.len())] as char)
        .collect();
    format!("kw_{tail}")
}

#[tokio::test(flavor = "multi_thread")]
async fn keelwave_sdk_agents_switch_to_eddy_by_endpoint() {
    require_python_module("keelwave", "pip install keelwave==0.1.1");
    let ep = endpoints().await;
    let cfg = test_config(&ep, "keelwave");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");

    let key = keelwave_key();
    let project = format!("proj-{}", cfg.kafka.group_id.replace('.', "-"));
    let t0 = Instant::now();
    let bridge = start_bridge(&cfg, &[(&key, &project)]);
    let addr = bridge.addr.clone();

    // The agents: the real SDK, only the endpoint changed.
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/keelwave_agent.py"
        ))
        .env("KEELWAVE_ENDPOINT", format!("http://{addr}"))
        .env("KEELWAVE_API_KEY", &key)
        .output()
        .expect("run python3 tests/keelwave_agent.py");
    assert!(
        out.status.success(),
        "tests/keelwave_agent.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the agent script prints one JSON report");
    eprintln!("agents done in {:?}: {report}", t0.elapsed());
    assert_eq!(
        report["sdk_version"], "0.1.1",
        "the contract was read from keelwave 0.1.1: pip install keelwave==0.1.1"
    );
    assert_eq!(report["health"]["status"], "ok");

    // What the SDK itself decided: the second identical call marked the loop at step 1.
    let looping = str_at(&report, &["looping", "run_id"]).to_string();
    let healthy = str_at(&report, &["healthy", "run_id"]).to_string();
    assert_eq!(report["looping"]["sdk_loop_detected"], true);
    assert_eq!(report["looping"]["sdk_loop_step_index"], 1);
    assert_eq!(report["looping"]["steps"], 5);
    assert_eq!(report["healthy"]["sdk_loop_detected"], false);
    // Run ids are UUIDv7, as keelwave's.
    assert_eq!(&looping[14..15], "7", "{looping}");

    // keelwave's error contract, as the SDK surfaces it.
    let errors = &report["errors"];
    let err = |name: &str| -> (String, String) {
        let e = &errors[name];
        (
            e[0].as_str()
                .unwrap_or_else(|| panic!("{name}: accepted, keelwave rejects it ({errors})"))
                .to_string(),
            e[1].as_str().unwrap_or_default().to_string(),
        )
    };
    let want: &[(&str, &str, &str)] = &[
        ("bad_key", "KeelwaveAuthError", "unauthorized"),
        ("key_without_kw_prefix", "KeelwaveAuthError", "unauthorized"),
        (
            "unknown_field",
            "KeelwaveValidationError",
            "json: unknown field \"output\"",
        ),
        (
            "bad_step_type",
            "KeelwaveValidationError",
            "Key: 'ingestAgentStepPayload.StepType' Error:Field validation for 'StepType' failed on the 'oneof' tag",
        ),
        (
            "negative_tokens",
            "KeelwaveValidationError",
            "Key: 'ingestAgentStepPayload.Tokens' Error:Field validation for 'Tokens' failed on the 'gte' tag",
        ),
        (
            "missing_agent_name",
            "KeelwaveValidationError",
            "Key: 'ingestAgentRunStartPayload.AgentName' Error:Field validation for 'AgentName' failed on the 'required' tag",
        ),
        (
            "body_over_1mib",
            "KeelwaveValidationError",
            "http: request body too large",
        ),
        (
            "bad_status",
            "KeelwaveValidationError",
            "Key: 'ingestAgentRunFinishPayload.Status' Error:Field validation for 'Status' failed on the 'oneof' tag",
        ),
        ("finish_wrong_timestamp", "KeelwaveError", "404: not found"),
    ];
    for (name, exc, msg) in want {
        assert_eq!(err(name), (exc.to_string(), msg.to_string()), "{name}");
    }
    // The other two key spellings authenticate (then fail validation: 400, not 401).
    assert_eq!(report["status"]["x_api_key"], 400);
    assert_eq!(report["status"]["authorization_no_bearer"], 400);

    // What reached Kafka: v1 events, keyed by run id, nothing from the rejected requests.
    let records = read_topic_until(
        &cfg,
        &cfg.kafka.topics.input,
        Duration::from_secs(30),
        None,
        |r| r.len() >= 14,
    );
    assert_eq!(records.len(), 14, "7 events per run, none for bad requests");
    let mut by_run: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for r in &records {
        let e = decode(r.payload.as_deref().expect("payload")).expect("a valid v1 event");
        assert_eq!(
            r.key.as_deref(),
            Some(e.key().run_id.as_bytes()),
            "key = run_id"
        );
        assert_eq!(e.key().project_id, project, "project from the API key");
        by_run.entry(e.key().run_id.clone()).or_default().push(e);
    }
    let loop_events = &by_run[&looping];
    let steps: Vec<_> = loop_events
        .iter()
        .filter_map(|e| match e {
            Event::Step(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps.iter().map(|s| s.step_index).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    // tool_input keeps the exact bytes httpx sent (keelwave's fingerprint of record hashes them).
    assert_eq!(
        steps[0].tool_input.as_ref().map(|r| r.get()),
        Some(r#"{"q":"what is keelwave","max_results":"3"}"#)
    );
    let Some(Event::RunFinished(fin)) = loop_events.last() else {
        panic!("the looping run ends with run_finished: {loop_events:?}")
    };
    assert_eq!(fin.reported_loop_detected, Some(true));
    assert_eq!(fin.reported_loop_step_index, Some(1));
    let totals = fin.reported_totals.clone().expect("finish totals recorded");
    assert_eq!(totals.total_steps, Some(5));
    assert!(totals.duration_ms.is_some());
    let Some(Event::RunStarted(start)) = by_run[&healthy].first() else {
        panic!("the healthy run starts with run_started")
    };
    assert_eq!(start.agent_name, "healthy-agent");
    assert_eq!(
        start.metadata.as_ref().map(|m| m.get()),
        Some(r#"{"team":"research"}"#)
    );

    // The worker, on the same topics.
    let mut worker = spawn_worker(&cfg, &[]);
    let done = |r: &[Record]| {
        outputs(r)
            .iter()
            .any(|o| matches!(o, OutputEvent::RunTerminated(t) if t.run_id == looping))
            && outputs(r)
                .iter()
                .any(|o| matches!(o, OutputEvent::RunTerminated(t) if t.run_id == healthy))
    };
    let out = outputs(&read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(90),
        Some(&mut worker),
        done,
    ));
    let terminated = |run: &str| {
        out.iter()
            .find_map(|o| match o {
                OutputEvent::RunTerminated(t) if t.run_id == run => Some(t.clone()),
                _ => None,
            })
            .expect("run_terminated")
    };
    let caught = |run: &str| {
        out.iter()
            .filter_map(|o| match o {
                OutputEvent::LoopDetected(s) if s.run_id == run => Some(s.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };

    let l = terminated(&looping);
    assert!(l.loop_detected, "eddy catches the looping agent: {l:?}");
    assert_eq!(
        l.loop_step_index,
        Some(1),
        "repetition began at the first call"
    );
    assert_eq!(
        l.reported_loop_detected,
        Some(true),
        "what the SDK reported"
    );
    assert_eq!(l.agent_name.as_deref(), Some("looping-agent"));
    assert_eq!(l.project_id, project);
    assert_eq!(l.status, "completed");
    let signals = caught(&looping);
    assert!(
        !signals.is_empty(),
        "a loop_detected signal for the looping run"
    );
    assert_eq!(signals[0].first_step_index, 1, "{signals:?}");

    let h = terminated(&healthy);
    assert!(!h.loop_detected, "the healthy agent is not flagged: {h:?}");
    assert_eq!(h.reported_loop_detected, Some(false));
    assert!(caught(&healthy).is_empty());
    assert_eq!(h.totals.steps, 5);

    let log = bridge.stop();
    assert!(
        !log.contains(&key[3..]),
        "the API key leaked into the log:\n{log}"
    );
    eprintln!("bridge test done in {:?}", t0.elapsed());
}

/// (status, JSON body) of a GET with the API key.
fn get_json(addr: &str, path: &str, key: &str) -> (u16, serde_json::Value) {
    let (status, body) = http_get_with(addr, path, Some(key)).expect("the bridge answers");
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn keelwave_sdk_agents_ask_eddys_verdict_between_steps() {
    require_python_module("keelwave", "pip install keelwave==0.1.1");
    let ep = endpoints().await;
    let cfg = test_config(&ep, "kwverdict");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let (key_a, key_b) = (keelwave_key(), keelwave_key());
    let project_a = format!("proj-a-{}", cfg.kafka.group_id.replace('.', "-"));
    let project_b = format!("proj-b-{}", cfg.kafka.group_id.replace('.', "-"));
    let bridge = start_bridge(&cfg, &[(&key_a, &project_a), (&key_b, &project_b)]);
    let mut worker = spawn_worker(&cfg, &[]);

    let max_calls = 200;
    let t0 = Instant::now();
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/keelwave_agent.py"
        ))
        .env("KEELWAVE_AGENT_MODE", "verdict")
        .env("KEELWAVE_ENDPOINT", format!("http://{}", bridge.addr))
        .env("KEELWAVE_API_KEY", &key_a)
        .env("KEELWAVE_OTHER_API_KEY", &key_b)
        .env("KEELWAVE_MAX_CALLS", max_calls.to_string())
        .output()
        .expect("run python3 tests/keelwave_agent.py");
    assert!(
        out.status.success(),
        "tests/keelwave_agent.py (verdict mode) failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the agent script prints one JSON report");
    eprintln!("agents done in {:?}: {report}", t0.elapsed());
    if let Ok(Some(status)) = worker.try_wait() {
        panic!("the worker exited ({status}) while the agents ran");
    }

    // The looping agent was stopped by eddy's verdict, before its next call.
    let looping = &report["looping"];
    let looping_run = str_at(&report, &["looping", "run_id"]).to_string();
    let calls = looping["calls"].as_u64().expect("calls made");
    let verdict = &looping["verdict"];
    assert_eq!(
        verdict["severity"], "stop",
        "stopped by a stop verdict: {looping}"
    );
    assert!(calls < max_calls, "the agent was stopped: {looping}");
    assert_eq!(verdict["run_id"], looping_run.as_str());
    assert_eq!(verdict["project_id"], project_a.as_str());
    assert_eq!(verdict["agent_name"], "looping-agent");
    assert!(
        verdict["pattern"]
            .as_str()
            .is_some_and(|p| p.contains("web_search")),
        "{verdict}"
    );
    let trigger = verdict["step_index"].as_u64().expect("step_index");
    assert!(
        trigger <= calls,
        "the verdict is about a step the agent made: {verdict}"
    );
    eprintln!(
        "looping agent: verdict at step {trigger}, stopped before call {} ({} calls after the verdict's step)",
        calls + 1,
        calls - trigger
    );
    // The verdict is the one the worker published.
    let published = |r: &[Record]| {
        outputs(r).into_iter().filter_map(|o| match o {
            OutputEvent::LoopDetected(s) | OutputEvent::LoopWarning(s) => Some(s),
            _ => None,
        })
    };
    let healthy_run = str_at(&report, &["healthy", "run_id"]).to_string();
    let ended = |r: &[Record], run: &str| {
        outputs(r)
            .iter()
            .any(|o| matches!(o, OutputEvent::RunTerminated(t) if t.run_id == run))
    };
    let records = read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(90),
        Some(&mut worker),
        |r| ended(r, &looping_run) && ended(r, &healthy_run),
    );
    let stop = published(&records)
        .find(|s| Some(s.event_id.as_str()) == verdict["event_id"].as_str())
        .expect("the verdict's event_id is on the signals topic");
    assert_eq!(serde_json::to_value(&stop).unwrap(), *verdict);

    // The stream pushed the looping run's signals as they came, then its end.
    let stream = &looping["stream"];
    assert_eq!(stream["status"], 200, "{stream}");
    let events = stream["events"].as_array().expect("events");
    assert!(
        events.iter().any(|e| e[1] == verdict["event_id"]),
        "the stop was pushed: {stream}"
    );
    assert_eq!(
        events.last().map(|e| &e[0]),
        Some(&serde_json::json!("run_terminated"))
    );
    let pushed: Vec<&serde_json::Value> = events.iter().map(|e| &e[1]).collect();
    let distinct: std::collections::HashSet<_> = pushed.iter().collect();
    assert_eq!(
        distinct.len(),
        pushed.len(),
        "no signal pushed twice: {stream}"
    );

    // The healthy agent asked before every call and never got a verdict; none exists.
    let healthy = &report["healthy"];
    let seen = healthy["verdicts"].as_array().expect("verdicts");
    assert!(seen.len() >= 9, "checked before every call: {healthy}");
    assert!(seen.iter().all(|v| v.is_null()), "{healthy}");
    assert!(
        published(&records).all(|s| s.run_id != healthy_run || !s.severity.is_caught()),
        "the healthy run is not caught"
    );
    // (Its retried call is keelwave's "same input twice", an info: below every stop.)
    let path = format!("/v1/ingest/agent/runs/{healthy_run}/verdict?min_severity=alert");
    let (status, body) = get_json(&bridge.addr, &path, &key_a);
    assert_eq!(
        (status, &body["data"]["verdict"]),
        (200, &serde_json::Value::Null)
    );

    // Project scoping: A's key never reads B's run, nor B's A's.
    let cross = &report["cross_project"];
    for route in ["verdict", "signals"] {
        assert_eq!(cross[route][0], 404, "{route}: {cross}");
        assert_eq!(cross[route][1], serde_json::json!({"error": "not found"}));
    }
    assert_eq!(
        cross["sdk_error"],
        serde_json::json!(["KeelwaveError", "404: not found"])
    );
    assert!(cross["owner_verdict"].is_null(), "{cross}");
    assert_eq!(cross["reverse_status"], 404, "{cross}");

    // The bridge's metrics: every route, and what the verdict routes answered.
    let (_, metrics) = http_get(&bridge.admin, "/metrics").expect("admin server");
    for want in [
        r#"eddy_ingest_verdict_requests_total{route="verdict",answer="verdict"}"#,
        r#"eddy_ingest_verdict_requests_total{route="verdict",answer="not_found"}"#,
        r#"eddy_ingest_requests_total{route="step",status="201"}"#,
        r#"eddy_verdict_signals_total{result="new"}"#,
    ] {
        assert!(
            metrics.contains(want),
            "{want} missing from /metrics:\n{metrics}"
        );
    }

    let log = bridge.stop();
    assert!(
        !log.contains(&key_a[3..]) && !log.contains(&key_b[3..]),
        "a key leaked:\n{log}"
    );

    // A restarted bridge reads the signals topic back (its look-back window): the verdict is
    // still there. Until it has caught up it answers 503, never a verdict-less 200.
    let bridge = start_bridge(&cfg, &[(&key_a, &project_a), (&key_b, &project_b)]);
    let path = format!("/v1/ingest/agent/runs/{looping_run}/verdict");
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        match get_json(&bridge.addr, &path, &key_a) {
            (200, body) => break body,
            (503, _) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => panic!("after a restart: {other:?}"),
        }
    };
    assert_eq!(body["data"]["verdict"], *verdict, "{body}");
    assert_eq!(body["data"]["finished"], true, "{body}");
    drop(bridge);
}
