//! Steering through the real pipeline: a LangChain agent on the Python package
//! (tests/agent_steer.py, `eddy_agent.middleware`) is handed eddy's advice on its first verdict
//! (the stop at conclusive evidence, held for the steer); the
//! guard's `steer` step reaches ClickHouse's `steps`, and `run_terminated` (on the topic and in
//! `runs`) says where it was steered and whether it looped again; the query pack's `steering`
//! answers "did it help". Needs python3 with the package and langchain installed.
mod common;

use common::*;
use eddy::config::Config;
use eddy::contract::{OutputEvent, SteerOutcome};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

fn run_agent(cfg: &Config, heeds: &str) -> Value {
    let out = Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agent_steer.py"))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--steps-topic", &cfg.kafka.topics.input])
        .args(["--signals-topic", &cfg.kafka.topics.output])
        .args(["--heeds", heeds])
        .output()
        .expect("run python3 tests/agent_steer.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "python3 cannot import eddy_agent or langchain: pip install ./clients/python langchain\n{stderr}"
    );
    assert!(
        out.status.success(),
        "agent_steer.py failed ({}):\n{stderr}",
        out.status
    );
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}\n{stderr}"))
}

/// The run's output events, once its `run_terminated` is on the topic.
fn run_outputs(cfg: &Config, run_id: &str) -> Vec<OutputEvent> {
    let recs = read_topic_until(
        cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        None,
        |r| {
            outputs(r)
                .iter()
                .any(|o| o.run_id() == run_id && matches!(o, OutputEvent::RunTerminated(_)))
        },
    );
    outputs(&recs)
        .into_iter()
        .filter(|o| o.run_id() == run_id)
        .collect()
}

async fn steer_rows(cfg: &Config, run_id: &str) -> Vec<(u64, String, u32)> {
    clickhouse(cfg)
        .query(&format!(
            "SELECT step_index, signal_event_id, content_len FROM {}.steps FINAL \
             WHERE run_id = ? AND step_type = 'steer' ORDER BY step_index",
            cfg.clickhouse.database
        ))
        .bind(run_id)
        .fetch_all()
        .await
        .expect("steer steps")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steered_run_is_marked_in_clickhouse_and_on_the_topic() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agent_steer");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);

    // An agent that changes its call once it reads eddy's message: it answers.
    let heeded = run_agent(&cfg, "yes");
    eprintln!("{heeded}");
    assert_eq!(heeded["outcome"], "answered", "{heeded}");
    assert_eq!(heeded["undelivered"], 0);
    assert_eq!(
        heeded["calls"],
        serde_json::json!([
            "eddy release date",
            "eddy release date",
            "eddy release date",
            "eddy changelog"
        ]),
        "the model changed its call right after the message"
    );
    let run_h = heeded["run_id"].as_str().expect("run_id").to_string();
    let outs = run_outputs(&cfg, &run_h);
    // The first verdict: the third identical search is conclusive, a stop with no alert
    // before it, which the guard held for a steer because the agent's hook asks for steers.
    let alert = outs
        .iter()
        .find_map(|o| match o {
            OutputEvent::LoopDetected(s) if s.severity >= eddy::contract::Severity::Alert => {
                Some(s)
            }
            _ => None,
        })
        .expect("a verdict for the third identical search");
    assert!(alert.advice.starts_with("eddy: "), "{alert:?}");
    assert_eq!(heeded["steers"], serde_json::json!([alert.event_id]));
    let term = outs
        .iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t),
            _ => None,
        })
        .expect("run_terminated");
    let steered_at = term.steered_step_index.expect("steered_step_index");
    assert!(steered_at > alert.step_index, "{term:?}");
    assert_eq!(term.steers, 1);
    assert_eq!(term.steer_outcome, Some(SteerOutcome::Recovered));
    assert_eq!(term.status, "completed");

    // An agent that ignores it: stopped at its fourth identical search (the first one after the
    // steer), looped again.
    let ignored = run_agent(&cfg, "no");
    eprintln!("{ignored}");
    assert_eq!(ignored["outcome"], "stopped", "{ignored}");
    assert_eq!(ignored["tool_calls"], 4);
    let run_i = ignored["run_id"].as_str().expect("run_id").to_string();
    let outs_i = run_outputs(&cfg, &run_i);
    let term_i = outs_i
        .iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t),
            _ => None,
        })
        .expect("run_terminated");
    assert_eq!(term_i.steer_outcome, Some(SteerOutcome::LoopedAgain));
    assert_eq!(term_i.termination_reason, "loop_detected");

    // ClickHouse: the steer step in `steps` (naming the signal; the message's length only, no
    // text), the signal's advice in `signals`, the steering columns in `runs`.
    let t = Duration::from_secs(120);
    let both =
        format!("SELECT count() FROM {{db}}.runs FINAL WHERE run_id IN ('{run_h}', '{run_i}')");
    assert_eq!(await_ch_count(&cfg, &both, 2, t).await, 2, "both runs");
    let steps = steer_rows(&cfg, &run_h).await;
    assert_eq!(
        steps,
        vec![(
            steered_at,
            alert.event_id.clone(),
            alert.advice.len() as u32
        )]
    );
    assert_eq!(steer_rows(&cfg, &run_i).await.len(), 1);
    let advice: String = clickhouse(&cfg)
        .query(&format!(
            "SELECT advice FROM {}.signals FINAL WHERE event_id = ?",
            cfg.clickhouse.database
        ))
        .bind(alert.event_id.as_str())
        .fetch_one()
        .await
        .expect("the alert's row");
    assert_eq!(advice, alert.advice);
    let runs: Vec<(String, u32, u8, u64, String)> = clickhouse(&cfg)
        .query(&format!(
            "SELECT run_id, steers, has_steered_step_index, steered_step_index, steer_outcome \
             FROM {}.runs FINAL WHERE run_id IN (?, ?) ORDER BY run_id",
            cfg.clickhouse.database
        ))
        .bind(run_h.as_str())
        .bind(run_i.as_str())
        .fetch_all()
        .await
        .expect("runs");
    let by_run: BTreeMap<String, (u32, u8, u64, String)> = runs
        .into_iter()
        .map(|(r, a, b, c, d)| (r, (a, b, c, d)))
        .collect();
    assert_eq!(by_run[&run_h], (1, 1, steered_at, "recovered".to_string()));
    assert_eq!(by_run[&run_i].3, "looped_again");

    // Did steering help: the query pack answers per agent.
    let window = [
        ("project_id".to_string(), "steer".to_string()),
        ("from".to_string(), "2000-01-01T00:00:00Z".to_string()),
        ("to".to_string(), "2100-01-01T00:00:00Z".to_string()),
    ]
    .into_iter()
    .collect();
    let client = clickhouse(&cfg).with_database(&cfg.clickhouse.database);
    let table = eddy::query::execute(&client, "steering", &window)
        .await
        .expect("steering");
    let row = |agent: &str| -> BTreeMap<String, String> {
        let r = table
            .rows
            .iter()
            .find(|r| r[table.column("agent_name").expect("agent_name")] == agent)
            .unwrap_or_else(|| panic!("{agent} in {:?}", table.rows));
        table
            .columns
            .iter()
            .cloned()
            .zip(r.iter().cloned())
            .collect()
    };
    let h = row("steer-yes");
    assert_eq!(
        (
            h["steered_runs"].as_str(),
            h["recovered"].as_str(),
            h["recovery_rate"].as_str()
        ),
        ("1", "1", "1")
    );
    assert_eq!(h["recovered_completed"], "1");
    let i = row("steer-no");
    assert_eq!(
        (i["steered_runs"].as_str(), i["looped_again"].as_str()),
        ("1", "1")
    );
}
