//! `eddy ingest-http` as a child process, for the tests that drive agents through the HTTP
//! bridge against the real stack.
use super::Worker;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

pub fn wait_listening(addr: &str, bridge: &mut Worker) {
    let start = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = bridge.try_wait() {
            panic!("eddy ingest-http exited ({status}) before listening on {addr}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "eddy ingest-http is not listening on {addr} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `eddy ingest-http` on the test's topics, listening on a free port.
pub struct Bridge {
    pub process: Worker,
    pub addr: String,
    /// Its admin server (/metrics).
    pub admin: String,
    log: std::thread::JoinHandle<String>,
    _dir: tempfile::TempDir,
}

impl Bridge {
    /// Stop it and return what it logged.
    pub fn stop(self) -> String {
        drop(self.process);
        self.log.join().unwrap_or_default()
    }
}

pub fn start_bridge(cfg: &eddy::config::Config, keys: &[(&str, &str)]) -> Bridge {
    let addr = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    start_bridge_on(cfg, keys, addr, admin)
}

/// The bridge on given addresses (a restart on the address its clients know).
pub fn start_bridge_on(
    cfg: &eddy::config::Config,
    keys: &[(&str, &str)],
    addr: String,
    admin: String,
) -> Bridge {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("bridge.toml");
    let keys: String = keys
        .iter()
        .map(|(k, p)| format!("{k:?} = {p:?}\n"))
        .collect();
    std::fs::write(
        &config_path,
        format!(
            "kafka_brokers = {:?}\ninput_topic = {:?}\noutput_topic = {:?}\ndlq_topic = {:?}\n\
             group_id = {:?}\ntopic_partitions = {}\ningest_addr = {addr:?}\n\
             ingest_admin_addr = {admin:?}\n\n\
             [ingest_api_keys]\n{keys}",
            cfg.kafka.brokers,
            cfg.kafka.topics.input,
            cfg.kafka.topics.output,
            cfg.kafka.topics.dlq,
            cfg.kafka.group_id,
            cfg.kafka.topics.partitions
        ),
    )
    .expect("write config");
    let mut process = Worker(
        Command::new(env!("CARGO_BIN_EXE_eddy"))
            .arg("ingest-http")
            .arg("--config")
            .arg(&config_path)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("EDDY_LOG", "warn,eddy=info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn eddy ingest-http"),
    );
    let stderr = process.0.stderr.take().expect("bridge stderr");
    let log = std::thread::spawn(move || {
        let (mut stderr, mut s) = (stderr, String::new());
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    wait_listening(&addr, &mut process);
    Bridge {
        process,
        addr,
        admin,
        log,
        _dir: dir,
    }
}
