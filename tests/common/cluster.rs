//! Local clusters for the scale-out tests (`tests/cluster_*.rs`), started through
//! `scripts/stack kafka-cluster` and `scripts/stack clickhouse-cluster`.
#![allow(dead_code)]
use std::collections::HashMap;
use std::process::{Command, Stdio};

fn stack_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/stack"));
    cmd.args(args).stderr(Stdio::inherit());
    cmd
}

/// Runs `scripts/stack ARGS` and returns the `export K=V` lines it printed, as a map (never
/// applied to this process: the single-node stack's variables stay what they are).
pub fn stack(args: &[&str]) -> HashMap<String, String> {
    let out = stack_command(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/stack: {e}"));
    assert!(
        out.status.success(),
        "`scripts/stack {}` failed ({})",
        args.join(" "),
        out.status
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A cluster for one test target: started by `up` when it was not running (and stopped again
/// when dropped, even after a failed assertion; its logs stay in its state dir), or found
/// running (left as it was).
pub struct Cluster {
    kind: &'static str,
    pub env: HashMap<String, String>,
    started: bool,
}

impl Cluster {
    /// `kind` is `kafka-cluster` or `clickhouse-cluster`. `None` (with a loud message) only
    /// when `EDDY_TEST_NO_CLUSTERS=1` says this machine cannot hold one; CI never sets it.
    pub fn up(kind: &'static str) -> Option<Self> {
        if std::env::var("EDDY_TEST_NO_CLUSTERS").is_ok_and(|v| v == "1") {
            eprintln!(
                "\n*** SKIPPED: EDDY_TEST_NO_CLUSTERS=1, so no {kind} is started and this test \
                 checks nothing. Unset it to run the test. ***\n"
            );
            return None;
        }
        let running = stack_command(&[kind, "status"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let t0 = std::time::Instant::now();
        let env = stack(&[kind, "up"]);
        eprintln!("{kind} up in {:.1}s", t0.elapsed().as_secs_f64());
        Some(Self {
            kind,
            env,
            started: !running,
        })
    }

    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("`scripts/stack {} up` printed no {name}", self.kind))
    }

    /// `scripts/stack <kind> ARGS...` (kill a broker, stop a replica, run a Kafka tool).
    pub fn run(&self, args: &[&str]) {
        let mut all = vec![self.kind];
        all.extend_from_slice(args);
        stack(&all);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started {
            let _ = stack_command(&[self.kind, "down"]).status();
        }
    }
}

/// Every row a query returns, as TabSeparated text: the row-for-row comparison.
pub async fn dump(client: &clickhouse::Client, sql: &str) -> String {
    let bytes = client
        .query(&format!("{sql} FORMAT TabSeparated"))
        .fetch_bytes("TabSeparated")
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// eddy's tables and the order that makes a dump of each deterministic.
pub const TABLES: [(&str, &str); 4] = [
    ("steps", "project_id, run_id, step_index"),
    ("runs", "project_id, run_id"),
    ("signals", "project_id, run_id, event_id"),
    ("rollup_minute", "project_id, bucket, run_id"),
];

/// How many runs a cluster test feeds (`EDDY_CLUSTER_RUNS`, default 500).
pub fn runs() -> usize {
    std::env::var("EDDY_CLUSTER_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// Waits until every database in `cfgs` holds `steps` steps and `runs` runs under `FINAL`.
pub async fn await_rows(cfgs: &[&eddy::config::Config], steps: u64, runs: u64) {
    let t = std::time::Duration::from_secs(120);
    for c in cfgs {
        let q = "SELECT count() FROM {db}.steps FINAL";
        assert_eq!(crate::common::await_ch_count(c, q, steps, t).await, steps);
        let q = "SELECT count() FROM {db}.runs FINAL";
        assert_eq!(crate::common::await_ch_count(c, q, runs, t).await, runs);
    }
}
