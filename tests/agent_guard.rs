//! Rust agents on the real stack: `eddy::agent::Emitter` reports steps, `eddy run` judges them,
//! `eddy::agent::Guard` brings the verdict back before the next tool call.
mod common;

use common::*;
use eddy::agent::{Emitter, Guard};
use eddy::contract::{JsonText, OutputEvent, RunStatus, Severity, Signal, Step};
use std::time::Duration;

/// An agent's tool latency: the pace between its steps.
const TOOL_LATENCY: Duration = Duration::from_millis(50);
/// A looping agent that eddy never stops would make this many calls.
const MAX_CALLS: u64 = 200;

fn signals_of<'a>(out: &'a [OutputEvent], run: &'a str) -> impl Iterator<Item = &'a Signal> {
    out.iter().filter_map(move |o| match o {
        OutputEvent::LoopDetected(s) | OutputEvent::LoopWarning(s) if s.run_id == run => Some(s),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_rust_agent_is_stopped_before_its_next_tool_call() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentguard");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let project = "proj-rust-agents";
    let mut worker = spawn_worker(&cfg, &[]);
    let guard = Guard::start(
        &cfg.kafka.brokers,
        &cfg.kafka.topics.output,
        project,
        Severity::Stop,
    )
    .expect("guard");
    assert!(
        guard.ready(Duration::from_secs(30)).await,
        "the guard holds the signals topic's partitions"
    );
    let mut emitter =
        Emitter::new(&cfg.kafka.brokers, &cfg.kafka.topics.input, project).expect("emitter");
    let looping = format!("loop-{}", cfg.kafka.group_id);
    let healthy = format!("healthy-{}", cfg.kafka.group_id);

    // The looping agent: the same search over and over, checking the guard before each call.
    guard.watch(&looping);
    emitter
        .run_started(&looping, "looping-agent")
        .expect("send");
    let mut calls = 0;
    let stopped = loop {
        if let Err(stop) = guard.check(&looping) {
            break Some(stop);
        }
        if calls == MAX_CALLS {
            break None;
        }
        let index = emitter
            .tool_call(
                &looping,
                "web_search",
                &serde_json::json!({"q": "what is eddy"}),
            )
            .expect("send");
        assert_eq!(index, calls + 1, "steps are numbered from 1");
        emitter.flush().await.expect("step acknowledged");
        calls += 1;
        if let Ok(Some(status)) = worker.try_wait() {
            panic!("the worker exited ({status})");
        }
        tokio::time::sleep(TOOL_LATENCY).await;
    };
    let stop = stopped.unwrap_or_else(|| panic!("never stopped after {MAX_CALLS} calls"));
    let signal = stop.signal.clone();
    assert_eq!(signal.severity, Severity::Stop);
    assert_eq!(
        (signal.project_id.as_str(), signal.run_id.as_str()),
        (project, looping.as_str())
    );
    assert!(signal.pattern.contains("web_search"), "{signal:?}");
    assert!(signal.step_index <= calls, "{signal:?} after {calls} calls");
    assert!(!signal.step_indices.is_empty());
    assert!(stop.to_string().contains(&looping), "{stop}");
    eprintln!(
        "looping agent: stop verdict at step {}, stopped before call {} ({} calls after it)",
        signal.step_index,
        calls + 1,
        calls - signal.step_index
    );
    emitter
        .run_finished(&looping, RunStatus::Failed)
        .expect("send");

    // The healthy agent: distinct searches and one failed call retried; never stopped.
    guard.watch(&healthy);
    emitter
        .run_started(&healthy, "healthy-agent")
        .expect("send");
    let queries = [
        "kafka",
        "flink",
        "spark",
        "eddy",
        "arroyo",
        "materialize",
        "benthos",
    ];
    for (i, q) in queries.iter().enumerate() {
        let attempts = if i == 2 { 2 } else { 1 };
        for attempt in 0..attempts {
            guard
                .check(&healthy)
                .expect("the healthy agent is never stopped");
            let input = serde_json::json!({ "q": q, "page": 1 }).to_string();
            let step = Step {
                step_type: "tool_call".into(),
                tool_name: Some("web_search".into()),
                tool_input: Some(JsonText::parse(&input).expect("json")),
                tool_success: Some(attempt + 1 == attempts),
                ..Step::default()
            };
            emitter.step(&healthy, step).expect("send");
            emitter.flush().await.expect("step acknowledged");
            tokio::time::sleep(TOOL_LATENCY).await;
        }
    }
    guard
        .check(&healthy)
        .expect("the healthy agent is never stopped");
    emitter
        .run_finished(&healthy, RunStatus::Completed)
        .expect("send");
    emitter.flush().await.expect("acknowledged");

    // What the worker published: the guard's verdict, and nothing for the healthy run.
    let ended = |r: &[Record], run: &str| {
        outputs(r)
            .iter()
            .any(|o| matches!(o, OutputEvent::RunTerminated(t) if t.run_id == run))
    };
    let out = outputs(&read_topic_until(
        &cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(90),
        Some(&mut worker),
        |r| ended(r, &looping) && ended(r, &healthy),
    ));
    let published = signals_of(&out, &looping)
        .find(|s| s.event_id == signal.event_id)
        .expect("the guard's verdict is on the signals topic");
    assert_eq!(*published, *signal);
    // The retried call is keelwave's "same input twice" at info: noted, never a stop.
    let flagged: Vec<_> = signals_of(&out, &healthy)
        .filter(|s| s.severity.is_caught())
        .collect();
    assert!(
        flagged.is_empty(),
        "the healthy run is not caught: {flagged:#?}"
    );
    assert!(guard.check(&healthy).is_ok());
    // Still stopped on every later check, with the same verdict.
    assert_eq!(
        guard.check(&looping).map_err(|e| e.signal.event_id.clone()),
        Err(signal.event_id.clone())
    );
}
