//! One delivery mode of the soak: its topics, group and database, its simulated fleet (fed in
//! chunks, one per step, through the direct listener), its two workers (through the proxies),
//! and what is measured of it: the group's lag from committed offsets, and each worker's
//! `/livez` and `/metrics`.
use super::http::Http;
use crate::common::{self, Endpoints, Fleet, Worker};
use eddy::config::{Config, Delivery};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Input partitions: two each for the two workers.
pub const PARTITIONS: i32 = 4;
/// The brokers' minimum: a worker that stops heartbeating is out of the group after 6 s.
pub const SESSION_TIMEOUT_MS: u32 = 6_000;
/// librdkafka's wait before it bootstraps again when it knows no broker, for the soak's own
/// clients only.
const REBOOTSTRAP: (&str, &str) = ("metadata.recovery.rebootstrap.trigger.ms", "5000");
/// The workers' `watchdog_timeout_ms` (default 120 s).
const WATCHDOG_TIMEOUT_MS: u64 = 45_000;
/// Past this, a SIGTERMed worker is SIGKILLed (eddy's own grace period is 25 s).
const TERM_WAIT: Duration = Duration::from_secs(40);

/// One worker process slot, restarted in place (as an orchestrator restarts a pod).
pub struct Slot {
    pub name: String,
    pub admin: u16,
    proc: Option<Worker>,
    pub generation: u32,
    pub log: PathBuf,
    /// Consecutive failed `/livez` checks.
    pub livez_failures: u32,
}

impl Slot {
    /// The Kafka `client.id` of this generation, which the group's member list shows (a killed
    /// generation stays a member until its session times out).
    pub fn client_id(&self) -> String {
        format!("{}.g{}", self.name, self.generation)
    }
}

/// How a worker ended, when the soak did not SIGKILL it itself.
pub struct Exit {
    pub slot: String,
    pub how: String,
}

pub struct Lane {
    pub name: &'static str,
    pub delivery: Delivery,
    /// The soak's own view: direct listener, ClickHouse without the proxy.
    pub cfg: Config,
    /// The workers' view: both through Toxiproxy.
    wcfg: Config,
    pub fleet: Fleet,
    chunks: VecDeque<Vec<(String, String)>>,
    pub slots: Vec<Slot>,
    lag: Arc<BaseConsumer>,
    http: Http,
    kafka_debug: String,
    /// More librdkafka properties for both clients of every worker (`EDDY_SOAK_KAFKA_PROPS`).
    kafka_props: Vec<(String, String)>,
    /// Fleet events sent a second time after a failed delivery (they may be in twice).
    pub resent: usize,
}

pub struct Proxied<'a> {
    pub kafka: &'a str,
    pub clickhouse: &'a str,
}

impl Lane {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &'static str,
        delivery: Delivery,
        direct: &Endpoints,
        proxied: Proxied<'_>,
        (runs, seed, chunks): (usize, u64, usize),
        admin_ports: [u16; 2],
        log_dir: &Path,
        kafka_debug: &str,
    ) -> Self {
        let mut cfg = common::test_config(direct, &format!("soak_{name}"));
        cfg.kafka.delivery = delivery;
        cfg.kafka.session_timeout_ms = SESSION_TIMEOUT_MS;
        cfg.kafka.topics.partitions = PARTITIONS;
        cfg.worker.flush_interval_ms = 250;
        cfg.worker.batch_max_messages = 2_000;
        let mut wcfg = cfg.clone();
        // The watchdog is part of what is soaked: a worker that stays out of the group while
        // its input has lag exits and is restarted (counted under restarts), so its timeout
        // must end inside the time after which the soak calls a mode stuck (90 s short,
        // 120 s long). librdkafka has been seen to stay in `query-coord` with no usable
        // broker for over 90 s after a broker frozen past the session timeout came back.
        wcfg.worker.watchdog_timeout_ms = WATCHDOG_TIMEOUT_MS;
        wcfg.kafka.brokers = proxied.kafka.into();
        wcfg.clickhouse.url = proxied.clickhouse.into();
        // The soak's own clients must outlive what the workers are tested against: after a
        // hang, librdkafka can drop the only broker it knows and only looks again after this
        // (default 5 min). Never set for the workers.
        cfg.kafka
            .producer
            .insert(REBOOTSTRAP.0.into(), REBOOTSTRAP.1.into());
        let fleet = Fleet::new(&cfg, runs, seed, 4);
        let per = fleet.lines.len().div_ceil(chunks.max(1)).max(1);
        let chunks = fleet.lines.chunks(per).map(<[_]>::to_vec).collect();
        let lag = ClientConfig::new()
            .set("bootstrap.servers", &cfg.kafka.brokers)
            .set("group.id", &cfg.kafka.group_id)
            .set("enable.auto.commit", "false")
            // Read the last stable commit: read_committed would make the offset fetch wait
            // for every open transaction of an exactly_once worker.
            .set("isolation.level", "read_uncommitted")
            .set(REBOOTSTRAP.0, REBOOTSTRAP.1)
            .create()
            .expect("lag client");
        let slots = ["a", "b"]
            .iter()
            .zip(admin_ports)
            .map(|(s, admin)| Slot {
                name: format!("{name}-{s}"),
                admin,
                proc: None,
                generation: 0,
                log: log_dir.join(format!("worker-{name}-{s}.log")),
                livez_failures: 0,
            })
            .collect();
        Self {
            name,
            delivery,
            cfg,
            wcfg,
            fleet,
            chunks,
            slots,
            lag: Arc::new(lag),
            http: Http::new(),
            kafka_debug: kafka_debug.into(),
            kafka_props: std::env::var("EDDY_SOAK_KAFKA_PROPS")
                .unwrap_or_default()
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
            resent: 0,
        }
    }

    pub async fn create_topics(&self) {
        eddy::source::ensure_topics(&self.cfg.kafka)
            .await
            .expect("create the soak's topics");
    }

    /// Starts slot `i`'s worker (a new generation, its log appended to the slot's file).
    pub fn spawn(&mut self, i: usize) {
        let mode = match self.delivery {
            Delivery::AtLeastOnce => "at_least_once",
            Delivery::ExactlyOnce => "exactly_once",
        };
        let slot = &mut self.slots[i];
        slot.generation += 1;
        slot.livez_failures = 0;
        // client.id (and librdkafka's debug contexts) through a config file: a dotted
        // librdkafka key cannot be an EDDY_* variable.
        let conf = slot.log.with_extension("toml");
        let mut props = format!("\"client.id\" = \"{}\"\n", slot.client_id());
        if !self.kafka_debug.is_empty() {
            props.push_str(&format!("debug = \"{}\"\n", self.kafka_debug));
        }
        for (k, v) in &self.kafka_props {
            props.push_str(&format!("\"{k}\" = \"{v}\"\n"));
        }
        std::fs::write(
            &conf,
            format!("[kafka_consumer]\n{props}\n[kafka_producer]\n{props}"),
        )
        .expect("worker config");
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&slot.log)
            .expect("worker log");
        use std::io::Write;
        let _ = writeln!(
            log,
            "===== soak: {} generation {} starts at {} =====",
            slot.name,
            slot.generation,
            super::wall_clock()
        );
        let mut cmd = common::run_command(&self.wcfg);
        // librdkafka's debug contexts, when asked for, reach the log at debug level.
        let filter = if self.kafka_debug.is_empty() {
            "info".to_string()
        } else {
            "info,librdkafka=debug".to_string()
        };
        cmd.env("EDDY_DELIVERY", mode)
            .env("EDDY_TOPIC_PARTITIONS", PARTITIONS.to_string())
            .env("EDDY_SESSION_TIMEOUT_MS", SESSION_TIMEOUT_MS.to_string())
            .env(
                "EDDY_FLUSH_INTERVAL_MS",
                self.wcfg.worker.flush_interval_ms.to_string(),
            )
            .env(
                "EDDY_BATCH_MAX_MESSAGES",
                self.wcfg.worker.batch_max_messages.to_string(),
            )
            .env(
                "EDDY_WATCHDOG_TIMEOUT_MS",
                self.wcfg.worker.watchdog_timeout_ms.to_string(),
            )
            // The line the stuck workers kept printing: it shows `partitions=0`.
            .env("EDDY_PROGRESS_INTERVAL_S", "10")
            .env("EDDY_ADMIN_ADDR", format!("127.0.0.1:{}", slot.admin))
            // Stable across restarts, as a pod name is: a restarted worker fences its zombie.
            .env(
                "EDDY_TRANSACTIONAL_ID",
                format!("{}-{}", self.wcfg.kafka.group_id, slot.name),
            )
            .env("EDDY_CONFIG", &conf)
            .env("EDDY_LOG", filter)
            // Plain text in the log files.
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log);
        slot.proc = Some(Worker(cmd.spawn().expect("spawn eddy run")));
    }

    pub fn spawn_all(&mut self) {
        for i in 0..self.slots.len() {
            self.spawn(i);
        }
    }

    /// SIGKILL slot `i` (no flush, no commit: a crashed pod).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut w) = self.slots[i].proc.take() {
            common::kill_hard(&mut w);
        }
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        self.slots[i].proc.as_ref().map(|w| w.id())
    }

    /// Sends SIGTERM to slot `i` without waiting.
    pub fn term(&self, i: usize) {
        if let Some(pid) = self.pid(i) {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }

    /// Waits for slot `i` to exit after [`Lane::term`] (SIGKILL past [`TERM_WAIT`]); says how
    /// it ended.
    pub async fn reap(&mut self, i: usize) -> Exit {
        let slot = &mut self.slots[i];
        let Some(mut w) = slot.proc.take() else {
            return Exit {
                slot: slot.name.clone(),
                how: "not running".into(),
            };
        };
        let t0 = Instant::now();
        let how = loop {
            match w.try_wait() {
                Ok(Some(s)) => {
                    break format!("{s} after SIGTERM ({:.1} s)", t0.elapsed().as_secs_f64())
                }
                Ok(None) if t0.elapsed() > TERM_WAIT => {
                    common::kill_hard(&mut w);
                    break format!("still running {TERM_WAIT:?} after SIGTERM: SIGKILLed");
                }
                Ok(None) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => break format!("wait failed: {e}"),
            }
        };
        Exit {
            slot: slot.name.clone(),
            how,
        }
    }

    /// Slots whose worker exited by itself since the last look, and how.
    pub fn exited(&mut self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if let Some(w) = s.proc.as_mut() {
                if let Ok(Some(status)) = w.try_wait() {
                    out.push((i, status.to_string()));
                    s.proc = None;
                }
            }
        }
        out
    }

    /// Hands the next chunk of the fleet to the broker, spread over `over` (the fleet keeps
    /// flowing through the fault); empty once the fleet is all sent.
    pub fn produce_next(&mut self, over: Duration) -> tokio::task::JoinHandle<usize> {
        let chunk = self.chunks.pop_front().unwrap_or_default();
        self.produce(chunk, over)
    }

    /// Every chunk left, at once.
    pub fn produce_rest(&mut self) -> tokio::task::JoinHandle<usize> {
        let rest: Vec<_> = self.chunks.drain(..).flatten().collect();
        self.produce(rest, Duration::ZERO)
    }

    pub fn chunks_left(&self) -> usize {
        self.chunks.len()
    }

    /// Sends `chunk` in parts, one every 500 ms, so that the last part goes out at `over`
    /// (later only if the broker holds it back): the backlog is complete when the fault ends.
    /// Each part gets a new producer, and a part whose delivery fails is sent again by another
    /// (as an agent's producer retries): after a hang, librdkafka can be left with no broker
    /// (the bug the soak finds in the workers), and the fleet must keep flowing regardless. A
    /// resent part may land twice; the count is returned so the end check knows.
    fn produce(
        &self,
        chunk: Vec<(String, String)>,
        over: Duration,
    ) -> tokio::task::JoinHandle<usize> {
        let cfg = self.cfg.clone();
        tokio::spawn(async move {
            const PACE: Duration = Duration::from_millis(500);
            let parts = (over.as_millis() / PACE.as_millis()) as usize + 1;
            let per = chunk.len().div_ceil(parts).max(1);
            let t0 = tokio::time::Instant::now();
            let mut resent = 0;
            for (i, part) in chunk.chunks(per).enumerate() {
                tokio::time::sleep_until(t0 + PACE * i as u32).await;
                for attempt in 0.. {
                    match send_part(&cfg, part).await {
                        Ok(()) => break,
                        Err(e) if attempt < 5 => {
                            resent += part.len();
                            eprintln!("soak: fleet part not delivered ({e}); sending it again");
                        }
                        Err(e) => panic!("the broker took none of 6 sends of a fleet part: {e}"),
                    }
                }
            }
            resent
        })
    }
    /// Messages of the input topic not yet covered by the group's committed offsets (a
    /// partition without a commit counts whole); `Err` while the broker does not answer.
    pub async fn lag(&self) -> Result<i64, String> {
        let c = self.lag.clone();
        let topic = self.cfg.kafka.topics.input.clone();
        tokio::task::spawn_blocking(move || group_lag(&c, &topic))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Messages in the input topic (high less low watermarks): the whole fleet, once sent.
    pub async fn input_len(&self) -> Result<i64, String> {
        let c = self.lag.clone();
        let topic = self.cfg.kafka.topics.input.clone();
        tokio::task::spawn_blocking(move || {
            let mut n = 0;
            for p in 0..PARTITIONS {
                let (low, high) = c
                    .fetch_watermarks(&topic, p, Duration::from_secs(5))
                    .map_err(|e| format!("watermarks: {e}"))?;
                n += high - low;
            }
            Ok(n)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Per partition: (committed, high watermark), for a stall report.
    pub async fn lag_detail(&self) -> String {
        let c = self.lag.clone();
        let topic = self.cfg.kafka.topics.input.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = String::new();
            for p in 0..PARTITIONS {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(&topic, p);
                let committed = c
                    .committed_offsets(tpl, Duration::from_secs(5))
                    .map(|t| format!("{:?}", t.elements()[0].offset()))
                    .unwrap_or_else(|e| e.to_string());
                let wm = c
                    .fetch_watermarks(&topic, p, Duration::from_secs(5))
                    .map(|w| format!("{w:?}"))
                    .unwrap_or_else(|e| e.to_string());
                out.push_str(&format!(
                    "partition {p}: committed {committed}, watermarks {wm}\n"
                ));
            }
            out
        })
        .await
        .unwrap_or_default()
    }

    /// `GET /livez` of slot `i`: `Ok` for a 200.
    pub async fn livez(&self, i: usize) -> Result<(), String> {
        let url = format!("http://127.0.0.1:{}/livez", self.slots[i].admin);
        match self.http.get(&url, Duration::from_secs(5)).await {
            Ok((200, _)) => Ok(()),
            Ok((s, body)) => Err(format!("{s} {body}")),
            Err(e) => Err(e),
        }
    }

    /// A route of slot `i`'s admin server, as text (for reports).
    pub async fn admin_text(&self, i: usize, path: &str) -> String {
        let url = format!("http://127.0.0.1:{}{path}", self.slots[i].admin);
        match self.http.get(&url, Duration::from_secs(5)).await {
            Ok((s, body)) => format!("{s}\n{body}"),
            Err(e) => e,
        }
    }

    /// The sum of every series of `metric` in slot `i`'s `/metrics` (`None`: no answer).
    pub async fn metric(&self, i: usize, metric: &str) -> Option<f64> {
        let url = format!("http://127.0.0.1:{}/metrics", self.slots[i].admin);
        let (status, body) = self.http.get(&url, Duration::from_secs(5)).await.ok()?;
        (status == 200).then(|| metric_sum(&body, metric))
    }

    pub fn running(&self, i: usize) -> bool {
        self.slots[i].proc.is_some()
    }

    /// The group's members as the broker lists them: (client.id, partitions assigned).
    pub async fn members(&self) -> Result<Vec<(String, usize)>, String> {
        let c = self.lag.clone();
        let group = self.cfg.kafka.group_id.clone();
        tokio::task::spawn_blocking(move || {
            let list = c
                .fetch_group_list(Some(&group), Duration::from_secs(5))
                .map_err(|e| format!("group list: {e}"))?;
            Ok(list
                .groups()
                .iter()
                .flat_map(|g| g.members())
                .map(|m| {
                    let n = m.assignment().and_then(assigned_partitions).unwrap_or(0);
                    (m.client_id().to_string(), n)
                })
                .collect())
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Running workers that are not a member holding a partition, by slot name (the issue's
    /// stuck workers were alive, in no assignment, while the other did all the work or none
    /// did); `Err` while the broker does not answer.
    pub async fn idle(&self) -> Result<Vec<String>, String> {
        let members = self.members().await?;
        Ok(self
            .slots
            .iter()
            .filter(|s| s.proc.is_some())
            .filter(|s| {
                let id = s.client_id();
                !members.iter().any(|(m, n)| *m == id && *n > 0)
            })
            .map(|s| s.name.clone())
            .collect())
    }
}

/// Partitions in a consumer group member's assignment, as the consumer protocol encodes it
/// (every version eddy's librdkafka speaks starts alike): version i16, then an i32 count of
/// topics, each a string (i16 length, bytes) and an i32 count of i32 partitions; user data
/// follows. `None` when the bytes end early.
fn assigned_partitions(b: &[u8]) -> Option<usize> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    fn int(b: &mut &[u8], n: usize) -> Option<i64> {
        Some(
            take(b, n)?
                .iter()
                .fold(0i64, |acc, &x| (acc << 8) | i64::from(x)),
        )
    }
    let mut b = b;
    take(&mut b, 2)?;
    let topics = int(&mut b, 4)?;
    let mut total = 0;
    for _ in 0..topics.max(0) {
        let len = int(&mut b, 2)? as usize;
        take(&mut b, len)?;
        let parts = int(&mut b, 4)?.max(0) as usize;
        take(&mut b, parts * 4)?;
        total += parts;
    }
    Some(total)
}

/// One part of the fleet through a new producer (60 s to deliver it).
async fn send_part(cfg: &Config, part: &[(String, String)]) -> Result<(), String> {
    let mut kafka = cfg.kafka.clone();
    kafka
        .producer
        .insert("message.timeout.ms".into(), "60000".into());
    let mut e = eddy::emit::Producer::plain(&kafka).map_err(|e| e.to_string())?;
    for (key, line) in part {
        e.send_raw(&kafka.topics.input, key.as_bytes(), line.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    e.flush().await.map(|_| ()).map_err(|e| e.to_string())
}

fn group_lag(c: &BaseConsumer, topic: &str) -> Result<i64, String> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let committed = c
        .committed_offsets(tpl, Duration::from_secs(5))
        .map_err(|e| format!("committed offsets: {e}"))?;
    let mut lag = 0;
    for e in committed.elements() {
        let (low, high) = c
            .fetch_watermarks(topic, e.partition(), Duration::from_secs(5))
            .map_err(|e| format!("watermarks: {e}"))?;
        let at = match e.offset() {
            Offset::Offset(o) => o,
            _ => low,
        };
        lag += (high - at).max(0);
    }
    Ok(lag)
}

/// Prometheus text: the sum of the samples named `metric` (any labels).
pub fn metric_sum(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(metric)?;
            if !(rest.starts_with(' ') || rest.starts_with('{')) {
                return None;
            }
            l.rsplit(' ').next()?.parse::<f64>().ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{assigned_partitions, metric_sum};

    #[test]
    fn assignment_bytes() {
        // Version 1; topics "t" with partitions 0 and 2, "uv" with 1; user data null.
        let mut b = vec![
            0, 1, 0, 0, 0, 2, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2,
        ];
        b.extend([
            0, 2, b'u', b'v', 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
        ]);
        assert_eq!(assigned_partitions(&b), Some(3));
        // No topics: a member that holds nothing.
        assert_eq!(assigned_partitions(&[0, 1, 0, 0, 0, 0]), Some(0));
        // Cut short.
        assert_eq!(assigned_partitions(&b[..10]), None);
    }

    #[test]
    fn metric_sums_every_series() {
        let text = "# TYPE eddy_x counter\neddy_x{a=\"1\"} 2\neddy_x 3\neddy_xy 100\n";
        assert_eq!(metric_sum(text, "eddy_x"), 5.0);
    }
}
