//! End-to-end benchmark against the real local broker and ClickHouse.
//!
//!   eval "$(scripts/stack env)"
//!   cargo bench --bench e2e -- [--events N] [--partitions P] [--repeat K]
//!                              [--rate R] [--latency-secs S] [--skip-eos] [--skip-latency]
//!                              [--eddy PATH]
//!
//! Phase 1, throughput (repeated K times, min/median/max printed): N simulated events are
//! produced to a fresh P-partition input topic, then the same topic is read by
//!   (a) a plain rdkafka consumer that discards every message (the practical ceiling),
//!   (b) `eddy run` (the release binary of this bench build, or `--eddy PATH`, e.g. the
//!       binary of scripts/build-pgo) in at_least_once mode,
//!   (c) `eddy run` in exactly_once mode,
//! each in a fresh consumer group. For eddy, "done" is the moment its committed offsets cover the
//! whole topic (so ClickHouse and the output topic have everything); the rate is N over the time
//! from the first committed offset to the last (start-up, topic creation and migrations are left
//! out, and so is the first flush; the whole-process time including start-up is printed too).
//!
//! Phase 2, detection latency: `eddy run` (at_least_once) on fresh topics, fed the simulated
//! fleet at a fixed offered load of R events/s for S seconds; for every loop signal read from the
//! output topic, latency = read time - send time of the step that triggered it (same process, one
//! monotonic clock). The first 2 s are a warm-up and not counted.
//!
//! Nothing here asserts on timings; tiny loads (`--events 2000 --latency-secs 3`) make a smoke.
use eddy::config::Config;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    events: usize,
    partitions: i32,
    repeat: usize,
    rate: u64,
    latency_secs: u64,
    eos: bool,
    latency: bool,
    eddy: String,
}

fn args() -> Args {
    let mut a = Args {
        events: 1_000_000,
        partitions: 12,
        repeat: 3,
        rate: 10_000,
        latency_secs: 30,
        eos: true,
        latency: true,
        eddy: env!("CARGO_BIN_EXE_eddy").to_owned(),
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let num = |i: usize| -> u64 {
            v.get(i + 1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", v[i]))
        };
        match v[i].as_str() {
            "--events" => a.events = num(i) as usize,
            "--partitions" => a.partitions = num(i) as i32,
            "--repeat" => a.repeat = num(i) as usize,
            "--rate" => a.rate = num(i),
            "--latency-secs" => a.latency_secs = num(i),
            "--eddy" => {
                a.eddy = v
                    .get(i + 1)
                    .cloned()
                    .unwrap_or_else(|| panic!("--eddy needs a path"));
            }
            "--skip-eos" => {
                a.eos = false;
                i += 1;
                continue;
            }
            "--skip-latency" => {
                a.latency = false;
                i += 1;
                continue;
            }
            // cargo bench passes --bench; ignore anything else.
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

fn sim(runs: usize, seed: u64) -> Vec<(i64, String, String)> {
    eddy::simulate::generate(&eddy::simulate::SimulateArgs {
        runs,
        loop_rate: 0.3,
        seed,
        projects: 3,
        start_ms: 1_767_225_600_000,
        out: None,
        unfinished_rate: 0.0,
        ..Default::default()
    })
}

struct Names {
    cfg: Config,
    database: String,
}

fn names(tag: &str, partitions: i32) -> Names {
    let brokers = std::env::var("EDDY_KAFKA_BROKERS")
        .expect("set EDDY_KAFKA_BROKERS (eval \"$(scripts/stack env)\")");
    let p = format!("bench.e2e.{}.{tag}", std::process::id());
    Names {
        cfg: {
            let mut cfg = Config::default();
            cfg.kafka.brokers = brokers;
            cfg.kafka.group_id = format!("{p}.group");
            cfg.kafka.topics.input = format!("{p}.steps");
            cfg.kafka.topics.output = format!("{p}.signals");
            cfg.kafka.topics.dlq = format!("{p}.dlq");
            cfg.kafka.topics.partitions = partitions;
            cfg
        },
        database: format!("bench_e2e_{}_{}", std::process::id(), tag.replace('.', "_")),
    }
}

fn producer(brokers: &str) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "1000000")
        .set("compression.type", "lz4")
        .create()
        .expect("producer")
}

fn produce_all(cfg: &Config, events: &[(i64, String, String)]) {
    let p = producer(&cfg.kafka.brokers);
    for (_, key, line) in events {
        let mut rec = BaseRecord::to(&cfg.kafka.topics.input)
            .key(key.as_bytes())
            .payload(line.as_bytes());
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, r)) => {
                    rec = r;
                    p.poll(Duration::from_millis(5));
                }
            }
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(120)).expect("flush");
}

fn consume_only(cfg: &Config, n: usize) -> f64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set(
            "group.id",
            format!("{}.ceiling.{}", cfg.kafka.group_id, rand::random::<u32>()),
        )
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    c.subscribe(&[&cfg.kafka.topics.input]).expect("subscribe");
    let mut got = 0usize;
    let mut bytes = 0usize;
    let mut t0 = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while got < n && Instant::now() < deadline {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            t0.get_or_insert_with(Instant::now);
            bytes += m.payload().map_or(0, <[u8]>::len);
            got += 1;
        }
    }
    let dt = t0.map_or(f64::NAN, |t| t.elapsed().as_secs_f64());
    std::hint::black_box(bytes);
    got as f64 / dt
}

fn spawn_eddy(bin: &str, names: &Names, exactly_once: bool, admin_port: u16) -> Child {
    let cfg = &names.cfg;
    let mut cmd = Command::new(bin);
    cmd.arg("run")
        .env("EDDY_KAFKA_BROKERS", &cfg.kafka.brokers)
        .env("EDDY_INPUT_TOPIC", &cfg.kafka.topics.input)
        .env("EDDY_OUTPUT_TOPIC", &cfg.kafka.topics.output)
        .env("EDDY_DLQ_TOPIC", &cfg.kafka.topics.dlq)
        .env("EDDY_GROUP_ID", &cfg.kafka.group_id)
        .env(
            "EDDY_TOPIC_PARTITIONS",
            cfg.kafka.topics.partitions.to_string(),
        )
        .env(
            "EDDY_CLICKHOUSE_URL",
            std::env::var("EDDY_CLICKHOUSE_URL").expect("set EDDY_CLICKHOUSE_URL"),
        )
        .env("EDDY_CLICKHOUSE_DATABASE", &names.database)
        .env("EDDY_ADMIN_ADDR", format!("127.0.0.1:{admin_port}"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if exactly_once {
        cmd.env("EDDY_DELIVERY", "exactly_once").env(
            "EDDY_TRANSACTIONAL_ID",
            format!("{}.tx", cfg.kafka.group_id),
        );
    }
    cmd.spawn().expect("spawn eddy run")
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Sum of the group's committed offsets over the input topic's partitions.
fn committed(probe: &BaseConsumer, topic: &str, partitions: i32) -> i64 {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    match probe.committed_offsets(tpl, Duration::from_secs(5)) {
        Ok(t) => t
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => o,
                _ => 0,
            })
            .sum(),
        Err(_) => 0,
    }
}

struct EddyRun {
    sustained: f64,
    whole: f64,
    peak_rss_kib: u64,
}

fn eddy_throughput(bin: &str, names: &Names, n: usize, exactly_once: bool, port: u16) -> EddyRun {
    let cfg = &names.cfg;
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cfg.kafka.brokers)
        .set("group.id", &cfg.kafka.group_id)
        .set("enable.auto.commit", "false")
        .create()
        .expect("probe");
    let t_spawn = Instant::now();
    let child = spawn_eddy(bin, names, exactly_once, port);
    let pid = child.id();
    let mut first: Option<(Instant, i64)> = None;
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut done = None;
    while Instant::now() < deadline {
        let c = committed(&probe, &cfg.kafka.topics.input, cfg.kafka.topics.partitions);
        if c > 0 && first.is_none() {
            first = Some((Instant::now(), c));
        }
        if c >= n as i64 {
            done = Some(Instant::now());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let peak = rss_kib(pid, "VmHWM:");
    stop(child);
    let done = done.expect("eddy run did not commit the whole topic in time");
    let (t1, c1) = first.expect("first commit");
    let sustained = if done > t1 {
        (n as i64 - c1) as f64 / (done - t1).as_secs_f64()
    } else {
        f64::NAN
    };
    EddyRun {
        sustained,
        whole: n as f64 / (done - t_spawn).as_secs_f64(),
        peak_rss_kib: peak,
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn mmm(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[(v.len() - 1) / 2], v[v.len() - 1])
}

fn latency(a: &Args, rt: &tokio::runtime::Runtime) {
    let names = names("lat", a.partitions);
    let cfg = &names.cfg;
    rt.block_on(eddy::source::ensure_topics(&cfg.kafka))
        .expect("topics");
    let port = free_port();
    let child = spawn_eddy(&a.eddy, &names, false, port);
    // Wait until the worker answers /readyz (assigned and restored), at most 60 s.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        let ok = Command::new("curl")
            .args(["-fs", "-o", "/dev/null"])
            .arg(format!("http://127.0.0.1:{port}/readyz"))
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let total = (a.rate * a.latency_secs) as usize;
    let events = sim((total / 14).max(10), 11);
    let sent: Arc<Mutex<HashMap<(String, u64), Instant>>> = Arc::default();
    let lat: Arc<Mutex<Vec<(Instant, f64)>>> = Arc::default();
    let stop_flag = Arc::new(AtomicBool::new(false));
    let reader = {
        let (sent, lat, stop_flag) = (sent.clone(), lat.clone(), stop_flag.clone());
        let brokers = cfg.kafka.brokers.clone();
        let topic = cfg.kafka.topics.output.clone();
        std::thread::spawn(move || {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .set("group.id", format!("lat-reader-{}", rand::random::<u32>()))
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set("fetch.wait.max.ms", "5")
                .create()
                .expect("reader");
            c.subscribe(&[&topic]).expect("subscribe");
            while !stop_flag.load(Ordering::Relaxed) {
                let Some(Ok(m)) = c.poll(Duration::from_millis(50)) else {
                    continue;
                };
                let now = Instant::now();
                let Some(v) = m
                    .payload()
                    .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
                else {
                    continue;
                };
                let kind = v["kind"].as_str().unwrap_or("");
                if kind != "loop_warning" && kind != "loop_detected" {
                    continue;
                }
                let key = (
                    v["run_id"].as_str().unwrap_or("").to_string(),
                    v["step_index"].as_u64().unwrap_or(0),
                );
                if let Some(t) = sent.lock().expect("lock").get(&key) {
                    lat.lock()
                        .expect("lock")
                        .push((*t, (now - *t).as_secs_f64() * 1000.0));
                }
            }
        })
    };
    // Paced producer: R events/s, checked every millisecond.
    let p = producer(&cfg.kafka.brokers);
    let start = Instant::now();
    for (i, (_, run_id, line)) in events.iter().enumerate() {
        let due = start + Duration::from_secs_f64(i as f64 / a.rate as f64);
        let now = Instant::now();
        if due > now {
            p.poll(Duration::ZERO);
            std::thread::sleep(due - now);
        }
        if line.contains("\"kind\":\"step\"") {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            let idx = v["step_index"].as_u64().unwrap_or(0);
            sent.lock()
                .expect("lock")
                .insert((run_id.clone(), idx), Instant::now());
        }
        let mut rec = BaseRecord::to(&cfg.kafka.topics.input)
            .key(run_id.as_bytes())
            .payload(line.as_bytes());
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, r)) => {
                    rec = r;
                    p.poll(Duration::from_millis(1));
                }
            }
        }
    }
    let offered = events.len() as f64 / start.elapsed().as_secs_f64();
    p.flush(Duration::from_secs(30)).expect("flush");
    std::thread::sleep(Duration::from_secs(2));
    stop_flag.store(true, Ordering::Relaxed);
    reader.join().expect("reader");
    stop(child);
    let warm = start + Duration::from_secs(2);
    let mut l: Vec<f64> = lat
        .lock()
        .expect("lock")
        .iter()
        .filter(|(t, _)| *t >= warm)
        .map(|(_, l)| *l)
        .collect();
    if l.is_empty() {
        println!("latency: no loop signals observed");
        return;
    }
    l.sort_by(f64::total_cmp);
    let q = |p: f64| l[((l.len() as f64 * p).ceil() as usize).clamp(1, l.len()) - 1];
    println!(
        "latency at_least_once, offered {offered:.0} events/s for {} s ({} events): {} signals, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        a.latency_secs,
        events.len(),
        l.len(),
        q(0.50),
        q(0.99),
        l[l.len() - 1]
    );
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let runs = (a.events / 14).max(10);
    let events = sim(runs, 7);
    let n = events.len();
    let bytes: usize = events.iter().map(|e| e.2.len()).sum();
    println!(
        "trace: {runs} runs, {n} events, {} bytes/event, {} partitions, eddy {}",
        bytes / n,
        a.partitions,
        a.eddy
    );
    let (mut ceil, mut alo, mut eos, mut alo_ratio, mut eos_ratio) =
        (vec![], vec![], vec![], vec![], vec![]);
    // One measurement: a fresh topic and group, the consume-only ceiling on it, then eddy.
    let measure = |label: &str, k: usize, exactly_once: bool| -> (f64, f64) {
        let names = names(&format!("{label}{k}"), a.partitions);
        rt.block_on(eddy::source::ensure_topics(&names.cfg.kafka))
            .expect("topics");
        produce_all(&names.cfg, &events);
        let c = consume_only(&names.cfg, n);
        let r = eddy_throughput(&a.eddy, &names, n, exactly_once, free_port());
        let mode = if exactly_once {
            "exactly_once "
        } else {
            "at_least_once"
        };
        println!(
            "  run {k}: consume-only {c:.0} ev/s | eddy {mode} {:.0} ev/s sustained ({:.0} whole process incl. start-up), peak RSS {} MiB",
            r.sustained,
            r.whole,
            r.peak_rss_kib / 1024
        );
        (c, r.sustained)
    };
    for k in 0..a.repeat {
        let (c, r) = measure("alo", k, false);
        ceil.push(c);
        alo.push(r);
        alo_ratio.push(r / c);
        if a.eos {
            let (c, r) = measure("eos", k, true);
            ceil.push(c);
            eos.push(r);
            eos_ratio.push(r / c);
        }
    }
    let show = |name: &str, v: &mut Vec<f64>, unit: &str| {
        if v.is_empty() {
            return;
        }
        let (lo, mid, hi) = mmm(v);
        if unit == "x" {
            println!("{name:<44} min {lo:>8.2}  median {mid:>8.2}  max {hi:>8.2}");
        } else {
            println!("{name:<44} min {lo:>8.0}  median {mid:>8.0}  max {hi:>8.0}  {unit}");
        }
    };
    show(
        "consume-only ceiling (rdkafka, discard)",
        &mut ceil,
        "events/s",
    );
    show("eddy run at_least_once", &mut alo, "events/s");
    show(
        "  ratio to ceiling (same topic, same run)",
        &mut alo_ratio,
        "x",
    );
    show("eddy run exactly_once", &mut eos, "events/s");
    show(
        "  ratio to ceiling (same topic, same run)",
        &mut eos_ratio,
        "x",
    );
    if a.latency {
        latency(&a, &rt);
    }
}
