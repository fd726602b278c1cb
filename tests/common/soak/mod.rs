//! The fault soak's driver (tests/soak.rs runs it; bench/soak.sh runs its long schedule).
//!
//! One private stack (`scripts/stack` on its own dir and ports), Toxiproxy in front of its
//! Kafka and ClickHouse, and per delivery mode a "lane": its own topics, group and database, a
//! simulated fleet and two `eddy run` workers of one group. Both modes run at once, so every
//! fault hits both. Each step sends the next chunk of each fleet (spread over the fault, the
//! fleet keeps flowing), injects a fault, holds it, undoes it, and then measures, per mode,
//! the time from the fault's end until the group's committed offsets cover the input topic
//! again (lag 0). Meanwhile the soak acts as an orchestrator would: a worker that exits, or
//! whose `/livez` fails three times in a row, is restarted (and counted). A mode whose lag is
//! not back at zero within `EDDY_SOAK_STUCK_S` is stuck: the soak writes what it sees (lag per
//! partition, the group as the broker describes it, each worker's admin routes) next to the
//! workers' logs, and goes on waiting up to `EDDY_SOAK_GIVE_UP_S`.
//!
//! At the end: the output topic against the offline replay (nothing missing, nothing
//! different, no duplicate in exactly_once), ClickHouse `FINAL` against the fleet, both
//! workers of each mode alive, answering `/livez` and holding partitions; then the table.
pub mod faults;
mod http;
pub mod lane;
mod plan;
mod recover;
mod report;
pub mod stack;
pub mod toxiproxy;
mod verify;

use crate::common::Endpoints;
use eddy::config::Delivery;
use faults::Fault;
use lane::{Lane, Proxied};
pub use plan::Plan;
use report::Outcome;
use stack::{Ports, Stack};
use std::io::Write;
use std::time::{Duration, Instant};
use toxiproxy::Toxiproxy;

/// Now, UTC, as the workers' log lines print it.
pub fn wall_clock() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Everything one soak holds. Field order is drop order: workers, then the proxy, then the
/// servers.
pub struct Soak {
    pub lanes: Vec<Lane>,
    pub toxi: Toxiproxy,
    pub stack: Stack,
    /// Which slot the next worker kill takes (alternates).
    pub victim: usize,
    plan: Plan,
    timeline: std::fs::File,
    t0: Instant,
    outcomes: Vec<Outcome>,
    problems: Vec<String>,
    stalls: usize,
    /// Consecutive steps after which some mode never recovered.
    unrecovered_steps: usize,
}

impl Soak {
    /// A line in the timeline (and on stderr), with the wall clock the worker logs use.
    pub fn note(&mut self, msg: &str) {
        let line = format!(
            "[{} +{:>6.1}s] {msg}",
            wall_clock(),
            self.t0.elapsed().as_secs_f64()
        );
        eprintln!("soak: {line}");
        let _ = writeln!(self.timeline, "{line}");
    }

    /// One fault: the fleet flows, the fault is injected, held, undone; then recovery.
    async fn step(&mut self, n: usize, fault: Fault) {
        let hold = fault.hold(self.plan.long);
        self.note(&format!(
            "step {n}: {} (held {} s)",
            fault.name(),
            hold.as_secs()
        ));
        // Every proxy on and no toxic: each step starts from clean links.
        self.toxi.reset().await;
        let flow = hold.max(Duration::from_secs(5));
        let producers = self
            .lanes
            .iter_mut()
            .map(|l| l.produce_next(flow))
            .collect();
        fault.inject(self).await;
        // The fault's length: a scenario's duration, not a wait for a condition. Halfway, what
        // an orchestrator sees.
        tokio::time::sleep(hold / 2).await;
        self.probe(fault.name()).await;
        tokio::time::sleep(hold - hold / 2).await;
        fault.undo(self).await;
        self.note(&format!("step {n}: {} ended", fault.name()));
        self.recover(fault.name(), producers).await;
    }
}

/// Runs the soak of `plan` and panics, after printing the table, if anything failed.
pub async fn run(plan: Plan) {
    let ports = Ports::from_env();
    std::fs::create_dir_all(&plan.dir).expect("soak dir");
    eprintln!(
        "soak: {} schedule, seed {}, logs in {}",
        if plan.long { "long" } else { "short" },
        plan.seed,
        plan.dir.display()
    );
    let toxi = Toxiproxy::start(
        ports.toxiproxy(),
        plan.seed,
        &plan.dir.join("toxiproxy.log"),
    )
    .await;
    let at = |p: u16| format!("127.0.0.1:{p}");
    toxi.create("kafka", &at(ports.kafka_proxy()), &at(ports.kafka()))
        .await;
    toxi.create("clickhouse", &at(ports.ch_proxy()), &at(ports.ch_http()))
        .await;
    let stack_dir = plan.stack_dir.clone();
    let stack = tokio::task::spawn_blocking(move || Stack::up(stack_dir, ports))
        .await
        .expect("stack up");
    assert_eq!(
        stack.var("EDDY_KAFKA_BROKERS"),
        at(ports.kafka_proxy()),
        "the private broker must advertise the proxy"
    );
    let direct = Endpoints::given(
        stack.var("EDDY_TEST_KAFKA_DIRECT_BROKERS"),
        &format!("http://{}", at(ports.ch_http())),
    );
    let (kafka_proxy, ch_proxy) = (
        at(ports.kafka_proxy()),
        format!("http://{}", at(ports.ch_proxy())),
    );
    let schedule = plan.schedule();
    let mut lanes = Vec::new();
    for (k, &mode) in plan.modes.iter().enumerate() {
        let name = match mode {
            Delivery::AtLeastOnce => "alo",
            Delivery::ExactlyOnce => "eos",
        };
        let k = k as u16 * 2;
        lanes.push(Lane::new(
            name,
            mode,
            &direct,
            Proxied {
                kafka: &kafka_proxy,
                clickhouse: &ch_proxy,
            },
            (plan.runs, plan.seed, plan.chunks()),
            [ports.admin(k), ports.admin(k + 1)],
            &plan.dir,
            &plan.kafka_debug,
        ));
    }
    let timeline = std::fs::File::create(plan.dir.join("timeline.log")).expect("timeline");
    let mut soak = Soak {
        lanes,
        toxi,
        stack,
        victim: 0,
        plan,
        timeline,
        t0: Instant::now(),
        outcomes: Vec::new(),
        problems: Vec::new(),
        stalls: 0,
        unrecovered_steps: 0,
    };
    for l in &soak.lanes {
        l.create_topics().await;
    }
    let mut first = Vec::new();
    for l in &mut soak.lanes {
        first.push(l.produce_next(Duration::ZERO));
        l.spawn_all();
    }
    soak.note("workers started; first chunk of each fleet sent");
    soak.recover("start-up (first chunk)", first).await;

    let minutes = soak.plan.minutes;
    for (n, fault) in schedule.into_iter().enumerate() {
        if soak.plan.long && soak.t0.elapsed() > Duration::from_secs(minutes * 60) {
            break;
        }
        // A mode that did not recover may be unwedged by the next step's input (a refused
        // commit is only repeated by a later flush); twice in a row, the schedule stops.
        if soak.unrecovered_steps >= 2 {
            soak.note("a mode did not recover after two steps in a row: the schedule stops here");
            break;
        }
        soak.step(n + 1, fault).await;
    }

    let left: usize = soak.lanes.iter().map(Lane::chunks_left).sum();
    let rest = soak.lanes.iter_mut().map(Lane::produce_rest).collect();
    soak.note(&format!(
        "schedule done; the rest of each fleet sent ({left} chunks)"
    ));
    soak.recover("end (rest of the fleet)", rest).await;
    for l in 0..soak.lanes.len() {
        let p = soak.verify(l).await;
        soak.problems.extend(p);
    }

    let table = report::table(&soak.outcomes, soak.plan.stuck_after);
    let _ = std::fs::write(soak.plan.dir.join("table.txt"), &table);
    eprintln!("\n{table}");
    let problems = std::mem::take(&mut soak.problems);
    for p in &problems {
        soak.note(&format!("PROBLEM: {p}"));
    }
    soak.note(&format!("done in {:.0} s", soak.t0.elapsed().as_secs_f64()));
    assert!(
        problems.is_empty(),
        "the soak found {} problem(s) (logs in {}):\n{}",
        problems.len(),
        soak.plan.dir.display(),
        problems.join("\n")
    );
}
