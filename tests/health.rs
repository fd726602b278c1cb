//! The worker's health endpoints tell the truth: `/readyz` turns 200 only once the state of every
//! assigned partition is restored, and the watchdog gives up on a worker that is locked out of a
//! lagging topic (exit non-zero, saying why) while a spare worker beside a busy one stays.
mod common;

use common::*;
use eddy::config::Config;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A worker whose stderr lines are collected as they come.
struct Watched {
    worker: Worker,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watched {
    fn spawn(cfg: &Config, env: &[(&str, String)]) -> Self {
        let mut cmd = worker_command(cfg);
        cmd.env("EDDY_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn eddy run");
        let stderr = child.stderr.take().expect("stderr");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            worker: Worker(child),
            lines,
        }
    }

    fn count(&self, needle: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }
}

/// A fleet whose runs never finish, so every run stays in the changelog.
fn open_runs(runs: usize, seed: u64) -> Vec<(String, String)> {
    let sim = eddy::simulate::SimulateArgs {
        runs,
        seed,
        projects: 2,
        unfinished_rate: 1.0,
        ..Default::default()
    };
    eddy::simulate::generate(&sim)
        .into_iter()
        .map(|(_, k, l)| (k, l))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_200_only_after_every_assigned_partition_is_restored() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "readyz");
    cfg.engine.idle_timeout_ms = 24 * 3_600_000;
    let lines = open_runs(3000, 11);
    produce(&cfg, &lines).await;
    let idle = cfg.engine.idle_timeout_ms.to_string();
    let env = |addr: &str| {
        vec![
            ("EDDY_ADMIN_ADDR", addr.to_string()),
            ("EDDY_ENGINE__IDLE_TIMEOUT_MS", idle.clone()),
        ]
    };

    // A first worker builds the changelog, then stops cleanly.
    let addr = free_addr();
    let mut first = Watched::spawn(&cfg, &env(&addr));
    let steps = step_count(&lines);
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.steps FINAL",
            steps,
            Duration::from_secs(120)
        )
        .await,
        steps
    );
    stop_gracefully(&mut first.worker);

    // The second restores that changelog: its /readyz is watched from its first answer.
    let addr = free_addr();
    let second = Watched::spawn(&cfg, &env(&addr));
    let start = Instant::now();
    let mut not_ready = Vec::new();
    let restored_when_ready = loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "never ready; answers: {not_ready:?}"
        );
        match http_get(&addr, "/readyz") {
            Some((200, _)) => break second.count("state restored from changelog"),
            Some((st, body)) => not_ready.push(format!("{st} {body}")),
            None => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let partitions = cfg.kafka.topics.partitions as usize;
    assert_eq!(
        restored_when_ready, partitions,
        "ready before every partition's state was restored (answers before: {not_ready:?})"
    );
    assert!(
        not_ready.iter().all(|a| a.starts_with("503")),
        "{not_ready:?}"
    );
}

/// A plain group member that takes the only partition first and keeps it (it polls, so it
/// stays in the group, but never processes or commits).
fn squatter(cfg: &Config) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set("group.id", &cfg.kafka.group_id)
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("squatter");
    c.subscribe(&[&cfg.kafka.topics.input]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.assignment().map(|a| a.count()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the squatter got no partition");
        let _ = c.poll(Duration::from_millis(100));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let t = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            let _ = c.poll(Duration::from_millis(100));
        }
    });
    (stop, t)
}

fn one_partition(cfg: &mut Config) {
    cfg.kafka.topics.partitions = 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_locked_out_of_a_lagging_topic_exits_non_zero_saying_why() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "watchdog");
    one_partition(&mut cfg);
    let fleet = Fleet::new(&cfg, 50, 5, 1);
    produce(&cfg, &fleet.lines).await;
    let (stop, squat) = squatter(&cfg);

    let addr = free_addr();
    let mut w = Watched::spawn(
        &cfg,
        &[
            ("EDDY_ADMIN_ADDR", addr.clone()),
            ("EDDY_WATCHDOG_TIMEOUT_MS", "5000".into()),
        ],
    );
    let start = Instant::now();
    let status = loop {
        if let Some(st) = w.worker.try_wait().expect("wait") {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "a worker with no partition beside lag nobody works off must give up"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::Relaxed);
    squat.join().unwrap();
    assert!(!status.success(), "exit status {status:?}");
    assert!(w.count("watchdog") >= 1, "the error line");
    assert!(
        w.count("no partition assigned") >= 1,
        "says why: {:?}",
        w.lines.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_worker_beside_a_busy_one_stays() {
    let ep = endpoints().await;
    let mut cfg = test_config(&ep, "spare");
    one_partition(&mut cfg);
    let fleet = Fleet::new(&cfg, 400, 6, 1);
    let (first, rest) = fleet.lines.split_at(50);
    produce(&cfg, first).await;
    let env = |addr: &str| {
        vec![
            ("EDDY_ADMIN_ADDR", addr.to_string()),
            ("EDDY_WATCHDOG_TIMEOUT_MS", "5000".to_string()),
        ]
    };
    let (a, b) = (free_addr(), free_addr());
    // Either may get the partition; the other is spare.
    let mut busy = Watched::spawn(&cfg, &env(&a));
    let mut spare = Watched::spawn(&cfg, &env(&b));
    // Traffic for well over the watchdog's timeout plus two of its probes (10 s apart).
    let started = Instant::now();
    for chunk in rest.chunks(rest.len() / 20 + 1) {
        produce_existing(&cfg, chunk).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(busy.worker.try_wait().expect("wait").is_none());
        assert!(
            spare.worker.try_wait().expect("wait").is_none(),
            "a worker gave up although its sibling works the lag off"
        );
    }
    assert!(started.elapsed() >= Duration::from_secs(30));
    let steps = fleet.steps;
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.steps FINAL",
            steps,
            Duration::from_secs(60)
        )
        .await,
        steps
    );
    assert!(spare.worker.try_wait().expect("wait").is_none());
    assert!(busy.worker.try_wait().expect("wait").is_none());
    assert_eq!(spare.count("watchdog") + busy.count("watchdog"), 0);
    stop_gracefully(&mut busy.worker);
    stop_gracefully(&mut spare.worker);
}
