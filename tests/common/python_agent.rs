//! tests/agent_python.py (agents on the `eddy_agent` package) as a child process, for the tests
//! that drive Python agents against a real worker.
use eddy::config::Config;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub fn require_eddy_agent() {
    let out = Command::new("python3")
        .args(["-c", "import eddy_agent, confluent_kafka, langchain_core"])
        .output();
    match out {
        Err(e) => panic!("python3 is required ({e}): install Python 3, then `pip install ./clients/python langchain-core`"),
        Ok(o) if !o.status.success() => panic!(
            "python3 cannot import eddy_agent (or langchain_core): run \
             `pip install ./clients/python langchain-core` from the repository root\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
}

/// The agent process; its JSON lines arrive on a channel.
pub struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
}

impl Agent {
    pub fn spawn(cfg: &Config, scenario: &str, extra: &[&str]) -> Self {
        let mut cmd = Command::new("python3");
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/agent_python.py"
        ))
        .args(["--brokers", &cfg.kafka.brokers])
        .args(["--steps-topic", &cfg.kafka.topics.input])
        .args(["--signals-topic", &cfg.kafka.topics.output])
        .args(["--scenario", scenario])
        .args(extra);
        Self::spawn_command(cmd)
    }

    /// Any script that prints JSON lines and reads the test's lines on stdin.
    pub fn spawn_command(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run a python3 agent script");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("agent printed a non-JSON line ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Agent {
            child,
            stdin,
            lines: rx,
        }
    }

    /// The next line whose `event` is `name` (earlier lines are passed over).
    pub fn wait_for(&mut self, name: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) if v["event"] == name => return v,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("the agent printed no `{name}` within {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().expect("wait agent");
                    if status.code() == Some(3) {
                        panic!("python3 cannot import eddy_agent: pip install ./clients/python");
                    }
                    panic!("the agent exited ({status}) before printing `{name}` (see its stderr)")
                }
            }
        }
    }

    pub fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write to the agent");
        stdin.flush().expect("flush");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
