//! Shared test plumbing: real Kafka and ClickHouse endpoints, unique names, readers.
//!
//! Endpoints come from `EDDY_KAFKA_BROKERS` / `EDDY_CLICKHOUSE_URL` (set by `scripts/stack up`,
//! which `scripts/test` and `.ci/run` call). Without them, and with a Docker engine answering,
//! testcontainers starts both. Otherwise the test fails with instructions: never a silent skip.
#![allow(dead_code)]
pub mod bridge;
pub mod daemon;
pub mod fleet;
pub mod python_agent;
pub mod receiver;
use eddy::config::Config;
use eddy::contract::OutputEvent;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use testcontainers::runners::AsyncRunner;
use testcontainers::ContainerAsync;

pub struct Endpoints {
    pub kafka: String,
    pub clickhouse: String,
    _kafka: Option<ContainerAsync<testcontainers_modules::kafka::apache::Kafka>>,
    _clickhouse: Option<ContainerAsync<testcontainers_modules::clickhouse::ClickHouse>>,
}

impl Endpoints {
    /// Servers the caller started itself (the soak's private stack).
    pub fn given(kafka: &str, clickhouse: &str) -> Self {
        Self {
            kafka: kafka.into(),
            clickhouse: clickhouse.into(),
            _kafka: None,
            _clickhouse: None,
        }
    }
}

pub async fn endpoints() -> Endpoints {
    if let (Ok(k), Ok(c)) = (
        std::env::var("EDDY_KAFKA_BROKERS"),
        std::env::var("EDDY_CLICKHOUSE_URL"),
    ) {
        return Endpoints {
            kafka: k,
            clickhouse: c,
            _kafka: None,
            _clickhouse: None,
        };
    }
    let docker = Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        docker,
        "no Kafka/ClickHouse for integration tests: run `eval \"$(scripts/stack up)\"` \
         (sets EDDY_KAFKA_BROKERS and EDDY_CLICKHOUSE_URL), or use scripts/test, or start a \
         Docker engine so testcontainers can start them"
    );
    let kafka = testcontainers_modules::kafka::apache::Kafka::default()
        .start()
        .await
        .expect("start Kafka container");
    let kport = kafka
        .get_host_port_ipv4(testcontainers_modules::kafka::apache::KAFKA_PORT)
        .await
        .expect("Kafka port");
    let ch = testcontainers_modules::clickhouse::ClickHouse::default()
        .start()
        .await
        .expect("start ClickHouse container");
    let cport = ch
        .get_host_port_ipv4(testcontainers_modules::clickhouse::CLICKHOUSE_PORT)
        .await
        .expect("ClickHouse port");
    Endpoints {
        kafka: format!("127.0.0.1:{kport}"),
        clickhouse: format!("http://127.0.0.1:{cport}"),
        _kafka: Some(kafka),
        _clickhouse: Some(ch),
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// When this test process started (seconds since the epoch): with the process id, unique to
/// this run. Process ids alone wrap (at 32768 by default) and a broker's state outlives a run, so
/// a later run could meet an earlier one's topics, committed offsets and changelog.
fn run_stamp() -> u64 {
    static STAMP: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *STAMP.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

/// A config with topics, group and database unique to this test, so tests run in parallel.
pub fn test_config(ep: &Endpoints, name: &str) -> Config {
    let nonce = format!(
        "{}_{}_{}_{}",
        name,
        std::process::id(),
        run_stamp(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    );
    let mut cfg = Config::default();
    cfg.kafka.brokers = ep.kafka.clone();
    cfg.kafka.group_id = format!("t.{nonce}.group");
    cfg.kafka.session_timeout_ms = 6_000;
    cfg.kafka.topics.input = format!("t.{nonce}.steps");
    cfg.kafka.topics.output = format!("t.{nonce}.signals");
    cfg.kafka.topics.dlq = format!("t.{nonce}.dlq");
    cfg.kafka.topics.partitions = 3;
    cfg.clickhouse.url = ep.clickhouse.clone();
    cfg.clickhouse.database = format!("eddy_t_{nonce}");
    cfg.worker.flush_interval_ms = 100;
    cfg.worker.progress_interval_s = 0;
    cfg
}

/// A loopback port no one listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A loopback address no one listens on now.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// (status, body) of a GET, or None while nothing listens.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    http_get_with(addr, path, None)
}

/// [`http_get`] with a bearer token.
pub fn http_get_with(addr: &str, path: &str, bearer: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = bearer.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.split_whitespace().nth(1)?.parse().ok()?;
    let body = resp
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// A worker process that is killed when the test ends, however it ends.
pub struct Worker(pub Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Worker {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// `eddy run` in a clean environment holding only the test config's endpoints and names (and
/// a free admin port: several workers share this machine). Callers add the rest.
pub fn run_command(cfg: &Config) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eddy"));
    cmd.arg("run")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("EDDY_KAFKA_BROKERS", &cfg.kafka.brokers)
        .env("EDDY_CLICKHOUSE_URL", &cfg.clickhouse.url)
        .env("EDDY_CLICKHOUSE_DATABASE", &cfg.clickhouse.database)
        .env("EDDY_INPUT_TOPIC", &cfg.kafka.topics.input)
        .env("EDDY_OUTPUT_TOPIC", &cfg.kafka.topics.output)
        .env("EDDY_DLQ_TOPIC", &cfg.kafka.topics.dlq)
        .env("EDDY_GROUP_ID", &cfg.kafka.group_id)
        .env("EDDY_ADMIN_ADDR", "127.0.0.1:0");
    cmd
}

/// [`run_command`] with the test config's tuning too (partitions, session, flush, batch), and
/// no progress lines.
pub fn worker_command(cfg: &Config) -> Command {
    let mut cmd = run_command(cfg);
    cmd.env("EDDY_LOG", "warn,eddy=info")
        .env(
            "EDDY_TOPIC_PARTITIONS",
            cfg.kafka.topics.partitions.to_string(),
        )
        .env(
            "EDDY_SESSION_TIMEOUT_MS",
            cfg.kafka.session_timeout_ms.to_string(),
        )
        .env(
            "EDDY_FLUSH_INTERVAL_MS",
            cfg.worker.flush_interval_ms.to_string(),
        )
        .env(
            "EDDY_BATCH_MAX_MESSAGES",
            cfg.worker.batch_max_messages.to_string(),
        )
        .env("EDDY_PROGRESS_INTERVAL_S", "0");
    cmd
}

/// Start `eddy run` as a real process with the config passed through the environment.
pub fn spawn_worker(cfg: &Config, extra_env: &[(&str, String)]) -> Worker {
    let mut cmd = worker_command(cfg);
    cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    Worker(cmd.spawn().expect("spawn eddy run"))
}

/// Produce JSON lines keyed by run id (as a real agent fleet does), creating the topics first.
pub async fn produce(cfg: &Config, lines: &[(String, String)]) {
    eddy::source::ensure_topics(&cfg.kafka)
        .await
        .expect("create topics");
    produce_existing(cfg, lines).await;
}

/// [`produce`] into topics that exist: no admin request, which fails while the cluster's
/// controller fails over (an agent only produces, and its producer waits out the election).
pub async fn produce_existing(cfg: &Config, lines: &[(String, String)]) {
    let mut e = eddy::emit::Producer::plain(&cfg.kafka).expect("producer");
    for (key, line) in lines {
        e.send_raw(&cfg.kafka.topics.input, key.as_bytes(), line.as_bytes())
            .expect("send");
    }
    e.flush().await.expect("delivered");
}

/// A raw record read back from a topic.
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: HashMap<String, String>,
}

/// A `read_committed` consumer of `topic` assigned every partition from its beginning, and how
/// many partitions that is (0 when the topic does not exist). `extra` adds client settings.
pub fn topic_reader(cfg: &Config, topic: &str, extra: &[(&str, &str)]) -> (BaseConsumer, usize) {
    let mut cc = ClientConfig::new();
    // Brokers plus whatever security the config carries (SASL/TLS tests read that way too).
    for (k, v) in cfg.kafka.client_props() {
        cc.set(k, v);
    }
    cc.set("group.id", "eddy-test-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed");
    for (k, v) in extra {
        cc.set(*k, *v);
    }
    let c: BaseConsumer = cc.create().expect("reader");
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let mut tpl = TopicPartitionList::new();
    for t in md.topics() {
        for p in t.partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .expect("tpl");
        }
    }
    let n = tpl.count();
    if n > 0 {
        c.assign(&tpl).expect("assign");
    }
    (c, n)
}

/// Read every record of `topic` from the beginning until `done(records)` holds or `timeout`.
pub fn read_topic_until(
    cfg: &Config,
    topic: &str,
    timeout: Duration,
    mut worker: Option<&mut Child>,
    mut done: impl FnMut(&[Record]) -> bool,
) -> Vec<Record> {
    let (c, _) = topic_reader(cfg, topic, &[]);
    let start = Instant::now();
    let mut out = Vec::new();
    let mut since_check = 0usize;
    // The condition is checked whenever the reader is idle (caught up) or every 2000 records,
    // so an expensive condition over a large topic stays cheap.
    let mut check = true;
    loop {
        if check {
            if done(&out) {
                break;
            }
            since_check = 0;
        }
        if let Some(w) = worker.as_deref_mut() {
            if let Ok(Some(status)) = w.try_wait() {
                panic!("the worker exited ({status}) while the test waited on {topic}");
            }
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} reading {topic}: {} records so far",
            out.len()
        );
        let polled = c.poll(Duration::from_millis(200));
        check = polled.is_none() || since_check >= 2000;
        if let Some(Ok(m)) = polled {
            since_check += 1;
            let mut headers = HashMap::new();
            if let Some(h) = m.headers() {
                for hd in h.iter() {
                    headers.insert(
                        hd.key.to_string(),
                        String::from_utf8_lossy(hd.value.unwrap_or_default()).into_owned(),
                    );
                }
            }
            out.push(Record {
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().map(<[u8]>::to_vec),
                headers,
            });
        }
    }
    out
}

pub fn outputs(records: &[Record]) -> Vec<OutputEvent> {
    records
        .iter()
        .filter_map(|r| r.payload.as_deref())
        .map(|p| serde_json::from_slice(p).expect("output events are valid JSON"))
        .collect()
}

pub fn terminated_count(records: &[Record]) -> usize {
    outputs(records)
        .iter()
        .filter(|o| matches!(o, OutputEvent::RunTerminated(_)))
        .count()
}

/// A ClickHouse client on the test's database.
pub fn clickhouse(cfg: &Config) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(&cfg.clickhouse.url)
        .with_validation(false)
}

pub async fn ch_count(cfg: &Config, sql: &str) -> u64 {
    let sql = sql.replace("{db}", &cfg.clickhouse.database);
    clickhouse(cfg)
        .query(&sql)
        .fetch_one::<u64>()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Poll a ClickHouse count until it equals `want` (a condition, not a sleep) or time out.
pub async fn await_ch_count(cfg: &Config, sql: &str, want: u64, timeout: Duration) -> u64 {
    let start = Instant::now();
    loop {
        let sql2 = sql.replace("{db}", &cfg.clickhouse.database);
        let got = clickhouse(cfg).query(&sql2).fetch_one::<u64>().await.ok();
        if got == Some(want) || start.elapsed() > timeout {
            return got.unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn kill_hard(child: &mut Child) {
    // Child::kill is SIGKILL on Unix: no flush, no commit, exactly like a crashed pod.
    let _ = child.kill();
    let _ = child.wait();
}

pub fn stop_gracefully(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
}

/// A simulated fleet and what the undisturbed engine makes of it.
pub struct Fleet {
    /// (key = run_id, JSON line), in event-time order.
    pub lines: Vec<(String, String)>,
    /// Output events of the offline replay, by event id.
    pub want: std::collections::BTreeMap<String, OutputEvent>,
    /// Number of step events.
    pub steps: u64,
    pub runs: usize,
}

impl Fleet {
    pub fn new(cfg: &Config, runs: usize, seed: u64, projects: usize) -> Self {
        let sim = eddy::simulate::SimulateArgs {
            runs,
            loop_rate: 0.3,
            seed,
            projects,
            start_ms: 1_767_225_600_000,
            out: None,
            unfinished_rate: 0.0,
            ..Default::default()
        };
        let lines: Vec<(String, String)> = eddy::simulate::generate(&sim)
            .into_iter()
            .map(|(_, k, l)| (k, l))
            .collect();
        let input: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
        let (outs, _) = eddy::replay::replay_to_vec(
            input.as_bytes(),
            std::sync::Arc::new(cfg.engine.clone()),
            cfg.kafka.topics.partitions as u32,
        );
        Self {
            steps: step_count(&lines),
            want: outs
                .into_iter()
                .map(|o| (o.event_id().to_string(), o))
                .collect(),
            lines,
            runs,
        }
    }

    pub fn signals(&self) -> u64 {
        self.want
            .values()
            .filter(|o| !matches!(o, OutputEvent::RunTerminated(_)))
            .count() as u64
    }
}

pub fn step_count(lines: &[(String, String)]) -> u64 {
    lines
        .iter()
        .filter(|(_, l)| l.contains("\"kind\":\"step\""))
        .count() as u64
}

/// Every event received is one the undisturbed replay produced, with the same content; returns
/// how many were exact duplicates. Panics naming the differing fields otherwise.
pub fn assert_exact_or_duplicate(
    got: &[OutputEvent],
    want: &std::collections::BTreeMap<String, OutputEvent>,
) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut dupes = 0;
    for o in got {
        let w = want
            .get(o.event_id())
            .unwrap_or_else(|| panic!("event not produced by the undisturbed replay: {o:?}"));
        if o != w {
            let (a, b) = (
                serde_json::to_value(o).unwrap_or_default(),
                serde_json::to_value(w).unwrap_or_default(),
            );
            let diff: Vec<String> = a
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| b.get(k.as_str()) != Some(v))
                .map(|(k, v)| format!("{k}: got {v}, want {}", b[k.as_str()]))
                .collect();
            panic!(
                "{} differs from the undisturbed result: {diff:?}",
                o.event_id()
            );
        }
        if !seen.insert(o.event_id().to_string()) {
            dupes += 1;
        }
    }
    dupes
}

/// Read the output topic until every expected event id is there.
pub fn read_all_expected(
    cfg: &Config,
    want: &std::collections::BTreeMap<String, OutputEvent>,
    timeout: Duration,
    worker: Option<&mut Child>,
) -> Vec<OutputEvent> {
    let recs = read_topic_until(cfg, &cfg.kafka.topics.output, timeout, worker, |r| {
        let ids: std::collections::HashSet<String> = outputs(r)
            .iter()
            .map(|o| o.event_id().to_string())
            .collect();
        want.keys().all(|k| ids.contains(k))
    });
    outputs(&recs)
}
