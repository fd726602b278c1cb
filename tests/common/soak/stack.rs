//! The soak's own servers: a `scripts/stack` instance in its own state dir and ports (never the
//! shared stack), whose Kafka advertises the Toxiproxy port on its plain listener, so every
//! worker connection, bootstrap and after metadata, crosses the proxy. A second, direct
//! listener carries the broker's own connections and the soak's undisturbed clients (the fleet
//! producer, lag and output readers).
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Every port of one soak, from a base (`EDDY_SOAK_PORT_BASE`, default 29300).
#[derive(Clone, Copy)]
pub struct Ports {
    pub base: u16,
}

impl Ports {
    pub fn from_env() -> Self {
        let base = std::env::var("EDDY_SOAK_PORT_BASE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(29300);
        Self { base }
    }
    /// Kafka's plain listener (controller +1, SASL_SSL +2, SASL_PLAINTEXT +3).
    pub fn kafka(self) -> u16 {
        self.base
    }
    pub fn kafka_direct(self) -> u16 {
        self.base + 4
    }
    pub fn kafka_proxy(self) -> u16 {
        self.base + 5
    }
    pub fn ch_http(self) -> u16 {
        self.base + 10
    }
    pub fn ch_tcp(self) -> u16 {
        self.base + 11
    }
    pub fn ch_https(self) -> u16 {
        self.base + 12
    }
    pub fn ch_proxy(self) -> u16 {
        self.base + 13
    }
    pub fn toxiproxy(self) -> u16 {
        self.base + 20
    }
    /// The admin server of worker slot `i`.
    pub fn admin(self, i: u16) -> u16 {
        self.base + 30 + i
    }
}

pub struct Stack {
    pub dir: PathBuf,
    ports: Ports,
    pub env: HashMap<String, String>,
}

impl Stack {
    fn command(dir: &std::path::Path, p: Ports, args: &[&str]) -> Command {
        let mut cmd = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/stack"));
        cmd.args(args)
            .env("EDDY_STACK_DIR", dir)
            .env("EDDY_KAFKA_PORT", p.kafka().to_string())
            .env("EDDY_KAFKA_SASL_SSL_PORT", (p.kafka() + 2).to_string())
            .env("EDDY_KAFKA_SASL_PORT", (p.kafka() + 3).to_string())
            .env("EDDY_KAFKA_ADVERTISED_PORT", p.kafka_proxy().to_string())
            .env("EDDY_KAFKA_DIRECT_PORT", p.kafka_direct().to_string())
            .env("EDDY_CLICKHOUSE_HTTP_PORT", p.ch_http().to_string())
            .env("EDDY_CLICKHOUSE_TCP_PORT", p.ch_tcp().to_string())
            .env("EDDY_CLICKHOUSE_HTTPS_PORT", p.ch_https().to_string())
            .stdin(Stdio::null());
        cmd
    }

    /// `scripts/stack up` on `dir`; the servers are stopped again when this is dropped.
    pub fn up(dir: PathBuf, ports: Ports) -> Self {
        let out = Self::command(&dir, ports, &["up"])
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/stack up");
        assert!(
            out.status.success(),
            "the soak's private stack did not start (state dir {})",
            dir.display()
        );
        let env = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self { dir, ports, env }
    }

    pub fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("the private `scripts/stack up` printed no {name}"))
    }

    /// `scripts/stack ARGS` on this stack, off the async threads (a restart waits for the
    /// broker to answer); panics when it fails.
    pub async fn run(&self, args: &[&str]) {
        let (dir, ports) = (self.dir.clone(), self.ports);
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let shown = args.join(" ");
        let ok = tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            Self::command(&dir, ports, &a)
                .stderr(Stdio::inherit())
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .await
        .expect("stack command task");
        assert!(ok, "`scripts/stack {shown}` failed on the soak's stack");
    }

    /// Output of `scripts/stack kafka TOOL ARGS` (a Kafka CLI against the direct listener).
    pub async fn kafka_tool(&self, args: &[&str]) -> String {
        let (dir, ports) = (self.dir.clone(), self.ports);
        let mut all = vec!["kafka".to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = all.iter().map(String::as_str).collect();
            match Self::command(&dir, ports, &a).output() {
                Ok(o) => format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => format!("cannot run scripts/stack kafka: {e}"),
            }
        })
        .await
        .unwrap_or_default()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // A server left paused by a failed step must act on the stop.
        for sig in ["signal-kafka", "signal-clickhouse"] {
            let _ = Self::command(&self.dir, self.ports, &[sig, "CONT"])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Self::command(&self.dir, self.ports, &["down"]).status();
    }
}
