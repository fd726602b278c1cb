//! The Python agent package (clients/python, `eddy_agent`) against a real `eddy run`: a looping
//! agent is stopped before its next tool call, a healthy one never is, and after `kill -9` of
//! the worker the stop still arrives while its re-published copies do not stop the run twice.
//!
//! The agents are tests/agent_python.py. Needs python3 with the package installed
//! (`pip install ./clients/python langchain-core`); without it the tests fail and say so.
mod common;

use common::python_agent::{require_eddy_agent, Agent};
use common::*;
use eddy::config::Config;
use eddy::contract::OutputEvent;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn run_events(
    cfg: &Config,
    run_id: &str,
    done: impl FnMut(&[OutputEvent]) -> bool,
) -> Vec<OutputEvent> {
    let mut done = done;
    let recs = read_topic_until(
        cfg,
        &cfg.kafka.topics.output,
        Duration::from_secs(120),
        None,
        |r| {
            let mine: Vec<OutputEvent> = outputs(r)
                .into_iter()
                .filter(|o| o.run_id() == run_id)
                .collect();
            done(&mine)
        },
    );
    outputs(&recs)
        .into_iter()
        .filter(|o| o.run_id() == run_id)
        .collect()
}

fn assert_stopped(report: &Value, max_steps: u64) {
    assert_eq!(report["stopped"], true, "{report}");
    assert_eq!(report["raised"], 1, "{report}");
    assert_eq!(report["on_stop_calls"], 1, "{report}");
    assert_eq!(report["severity"], "stop", "{report}");
    assert_eq!(
        report["async_stop"], report["event_id"],
        "wait_for_stop resolved with the same signal: {report}"
    );
    let tool_calls = report["tool_calls"].as_u64().expect("tool_calls");
    assert!(tool_calls < max_steps, "stopped before giving up: {report}");
    // The verdict was about a step the agent had already taken, and it stopped there.
    let verdict_step = report["stop_step_index"].as_u64().expect("stop_step_index");
    assert!(
        verdict_step <= report["last_step"].as_u64().expect("last_step"),
        "{report}"
    );
}

/// The stop on the topic is the one the agent raised, with the same detector and severity.
fn assert_topic_agrees(cfg: &Config, report: &Value) {
    let run_id = report["run_id"].as_str().expect("run_id");
    let event_id = report["event_id"].as_str().expect("event_id").to_string();
    let mine = run_events(cfg, run_id, |m| m.iter().any(|o| o.event_id() == event_id));
    let stop = mine
        .iter()
        .find_map(|o| match o {
            OutputEvent::LoopDetected(s) if s.event_id == event_id => Some(s),
            _ => None,
        })
        .expect("the agent's stop is a loop_detected on the topic");
    assert_eq!(stop.severity.as_str(), "stop");
    assert_eq!(report["detector"], stop.detector.as_str());
    assert_eq!(report["stop_step_index"], stop.step_index);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_agent_is_stopped_before_its_next_tool_call() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_loop");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let mut agent = Agent::spawn(&cfg, "loop", &["--interval-ms", "50", "--max-steps", "600"]);
    let report = agent.wait_for("report", Duration::from_secs(120));
    eprintln!("{report}");
    assert_stopped(&report, 600);
    assert_topic_agrees(&cfg, &report);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_langchain_agent_is_stopped_inside_its_run() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_lc");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let mut agent = Agent::spawn(
        &cfg,
        "loop",
        &[
            "--framework",
            "langchain",
            "--interval-ms",
            "50",
            "--max-steps",
            "600",
        ],
    );
    let report = agent.wait_for("report", Duration::from_secs(120));
    eprintln!("{report}");
    assert_stopped(&report, 600);
    assert_topic_agrees(&cfg, &report);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_agent_polling_and_retrying_is_never_stopped() {
    require_eddy_agent();
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_ok");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let mut agent = Agent::spawn(&cfg, "healthy", &["--interval-ms", "20"]);
    // The agent reports only after eddy's run_terminated reached its guard: eddy saw it all.
    let report = agent.wait_for("report", Duration::from_secs(120));
    eprintln!("{report}");
    assert_eq!(report["stopped"], false, "{report}");
    assert_eq!(report["raised"], 0, "{report}");
    assert_eq!(report["on_stop_calls"], 0, "{report}");
    assert_eq!(report["tool_calls"], 1 + 12 + 3 + 10, "{report}");
    let run_id = report["run_id"].as_str().expect("run_id");
    let mine = run_events(&cfg, run_id, |m| {
        m.iter().any(|o| matches!(o, OutputEvent::RunTerminated(_)))
    });
    let term = mine
        .iter()
        .find_map(|o| match o {
            OutputEvent::RunTerminated(t) => Some(t),
            _ => None,
        })
        .expect("run_terminated");
    assert!(
        !term.loop_detected,
        "eddy itself calls the healthy run a loop: {term:?}"
    );
    assert_eq!(term.totals.steps, 26);
}

/// A TCP relay to ClickHouse that can refuse: while it does, the worker's inserts fail, so it
/// commits no offset and a `kill -9` makes its successor re-publish every signal.
struct Relay {
    addr: String,
    open: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(upstream: &str) -> Self {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
        let addr = format!("http://{}", listener.local_addr().expect("addr"));
        let open = Arc::new(AtomicBool::new(true));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (o, c) = (open.clone(), conns.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if !o.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let mut held = c.lock().expect("lock");
                for s in [&client, &server] {
                    held.push(s.try_clone().expect("clone"));
                }
                drop(held);
                for (mut from, mut to) in [
                    (
                        client.try_clone().expect("clone"),
                        server.try_clone().expect("clone"),
                    ),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Relay { addr, open, conns }
    }

    fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
        if !open {
            // Pooled keep-alive connections would go on carrying inserts.
            for s in self.conns.lock().expect("lock").drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }
}

/// `eddy run` through the relay; returns once its ClickHouse migrations are done, the relay
/// then closed (`hold`) or left open.
fn start_worker_via(cfg: &Config, relay: &Relay, hold: bool) -> Worker {
    relay.set_open(true);
    let mut cmd = worker_command(cfg);
    cmd.env("EDDY_CLICKHOUSE_URL", &relay.addr)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn eddy run");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[worker] {line}");
            if line.contains("ClickHouse ready") {
                let _ = tx.send(());
            }
        }
    });
    let mut worker = Worker(child);
    let start = Instant::now();
    while rx.recv_timeout(Duration::from_millis(200)).is_err() {
        if let Ok(Some(s)) = worker.try_wait() {
            panic!("the worker exited ({s}) before ClickHouse was ready");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "worker not ready in 60 s"
        );
    }
    relay.set_open(!hold);
    worker
}

#[tokio::test(flavor = "multi_thread")]
async fn after_kill_9_the_stop_still_arrives_and_its_copies_stop_nothing_twice() {
    require_eddy_agent();
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "agentpy_crash");
    // Long batches: a worker that cannot flush still publishes signals for 2 x 2.5 s of input
    // before it stops taking more (at most two batches are held), enough to see the run end.
    cfg.worker.flush_interval_ms = 2_500;
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let relay = Relay::start(&cfg.clickhouse.url);

    // Generation 1 commits nothing; it dies while the agent loops, before any stop.
    let mut w1 = start_worker_via(&cfg, &relay, true);
    let mut agent = Agent::spawn(
        &cfg,
        "crash",
        &["--interval-ms", "100", "--max-steps", "900"],
    );
    agent.wait_for("ready", Duration::from_secs(60));
    agent.wait_for("step", Duration::from_secs(30));
    agent.wait_for("step", Duration::from_secs(30));
    kill_hard(&mut w1);

    // Generation 2 starts over from the first step (nothing was committed) and finds the loop.
    let mut w2 = start_worker_via(&cfg, &relay, true);
    let stopped = agent.wait_for("stopped", Duration::from_secs(120));
    let stop_id = stopped["event_id"].as_str().expect("event_id").to_string();
    let run_id = stopped["run_id"].as_str().expect("run_id").to_string();

    // Generation 3 re-publishes everything generation 2 did, the stop included.
    kill_hard(&mut w2);
    let _w3 = start_worker_via(&cfg, &relay, false);
    let copies = |m: &[OutputEvent], id: &str| m.iter().filter(|o| o.event_id() == id).count();
    let mine = run_events(&cfg, &run_id, |m| {
        // Generation 2 published the stop once: a second copy is generation 3's.
        copies(m, &stop_id) >= 2 && m.iter().any(|o| matches!(o, OutputEvent::RunTerminated(_)))
    });
    let distinct: std::collections::HashSet<&str> = mine.iter().map(|o| o.event_id()).collect();
    let duplicates = mine.len() - distinct.len();
    assert!(copies(&mine, &stop_id) >= 2, "the stop was re-published");
    agent.say(&format!("report {duplicates}"));
    let report = agent.wait_for("report", Duration::from_secs(90));
    eprintln!("{report}");
    assert_stopped(&report, 900);
    assert_eq!(report["event_id"], stop_id.as_str());
    let stats = &report["stats"];
    assert!(
        stats["duplicates"].as_u64().expect("duplicates") >= duplicates as u64,
        "the guard saw every copy: {report}"
    );
    // Each distinct signal once, in the guard's record of the run.
    let signals: Vec<&str> = report["signals"]
        .as_array()
        .expect("signals")
        .iter()
        .map(|s| s.as_str().expect("id"))
        .collect();
    let want: HashMap<&str, ()> = mine
        .iter()
        .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
        .map(|o| (o.event_id(), ()))
        .collect();
    assert_eq!(signals.len(), want.len(), "{signals:?}");
    assert!(signals.iter().all(|s| want.contains_key(s)));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rl_example_truncates_stuck_episodes_only() {
    require_eddy_agent();
    let gym = Command::new("python3")
        .args(["-c", "import gymnasium"])
        .output()
        .expect("python3");
    assert!(
        gym.status.success(),
        "python3 cannot import gymnasium: pip install gymnasium\n{}",
        String::from_utf8_lossy(&gym.stderr)
    );
    let ep = endpoints().await;
    let cfg = test_config(&ep, "agentpy_rl");
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("topics");
    let _worker = spawn_worker(&cfg, &[]);
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/clients/python/examples/rl_truncate.py"
        ))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--steps-topic", &cfg.kafka.topics.input])
        .args(["--signals-topic", &cfg.kafka.topics.output])
        .args(["--episodes", "4", "--max-steps", "400", "--step-ms", "50"])
        .output()
        .expect("run clients/python/examples/rl_truncate.py");
    assert!(
        out.status.success(),
        "rl_truncate.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let episodes: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON line per episode"))
        .collect();
    eprintln!("{episodes:?}");
    assert_eq!(episodes.len(), 4);
    for e in &episodes {
        if e["stuck"] == true {
            assert_eq!(e["ended"], "eddy_stop", "{e}");
            // FrozenLake's own limit is 100 steps: eddy ended it well before.
            assert!(e["steps"].as_u64().expect("steps") < 100, "{e}");
        } else {
            assert_eq!(e["ended"], "goal", "{e}");
        }
    }
}
