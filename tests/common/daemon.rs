//! Any of eddy's HTTP daemons (`ingest-http`, `ingest-otlp`) as a child process on the test's
//! topics: its TOML written from the test config, started, and awaited until it listens.
use super::Worker;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon started by [`start`]; killed when dropped.
pub struct Daemon {
    pub process: Worker,
    log: Option<std::thread::JoinHandle<String>>,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Stop it and return what it logged (empty unless started with `capture_log`).
    pub fn stop(mut self) -> String {
        let log = self.log.take();
        drop(self);
        log.and_then(|l| l.join().ok()).unwrap_or_default()
    }
}

/// The config keys every daemon shares: brokers, topics and group of the test config, and
/// `[ingest_api_keys]` from `keys` (key, project) when there are any.
pub fn base_toml(cfg: &eddy::config::Config, keys: &[(&str, &str)]) -> String {
    let mut toml = format!(
        "kafka_brokers = {:?}\ninput_topic = {:?}\noutput_topic = {:?}\ndlq_topic = {:?}\n\
         group_id = {:?}\ntopic_partitions = {}\n",
        cfg.kafka.brokers,
        cfg.kafka.topics.input,
        cfg.kafka.topics.output,
        cfg.kafka.topics.dlq,
        cfg.kafka.group_id,
        cfg.kafka.topics.partitions,
    );
    // Top-level keys first: a table header ends them.
    let mut keys_table = String::new();
    for (k, p) in keys {
        keys_table.push_str(&format!("{k:?} = {p:?}\n"));
    }
    if !keys_table.is_empty() {
        toml.push_str(&format!("\n[ingest_api_keys]\n{keys_table}"));
    }
    toml
}

/// `eddy <command> --config <toml>`, once `ready_on` accepts connections. `toml` must hold
/// its top-level keys before any table. With `capture_log`, its stderr is kept for
/// [`Daemon::stop`]; otherwise it goes to the test's.
pub fn start(command: &str, toml: &str, ready_on: &str, capture_log: bool) -> Daemon {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{command}.toml"));
    std::fs::write(&path, toml).expect("write config");
    let mut process = Worker(
        Command::new(env!("CARGO_BIN_EXE_eddy"))
            .arg(command)
            .arg("--config")
            .arg(&path)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("EDDY_LOG", "warn,eddy=info")
            .stdout(Stdio::null())
            .stderr(if capture_log {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .unwrap_or_else(|e| panic!("spawn eddy {command}: {e}")),
    );
    let log = process.0.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            let (mut stderr, mut s) = (stderr, String::new());
            let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
            s
        })
    });
    wait_listening(command, ready_on, &mut process);
    Daemon {
        process,
        log,
        _dir: dir,
    }
}

/// Wait until `addr` accepts connections; fail at once if the process exits first.
pub fn wait_listening(command: &str, addr: &str, process: &mut Worker) {
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = process.try_wait() {
            panic!("eddy {command} exited ({status}) before listening on {addr}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "eddy {command} is not listening on {addr} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
