//! The faults of the soak: what each does to the servers, the links (Toxiproxy) or the workers,
//! how long it is held, and how it ends. A fault "ends" when the soak has undone it: the server
//! resumed or answers again after its restart, the toxic is gone, the workers are started.
use super::toxiproxy::Toxic;
use super::Soak;
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The broker SIGKILLed, then started again at once.
    BrokerKill,
    /// The broker SIGSTOPped for longer than the session timeout (a hung broker: connections
    /// stay open, nothing answers), then SIGCONT.
    BrokerHang,
    /// The broker SIGSTOPped for 20 s, then SIGKILLed and started again (the stall).
    BrokerHangThenKill,
    /// ClickHouse SIGSTOPped (inserts hang, not refused), then SIGCONT.
    ClickHouseHang,
    /// ClickHouse's proxy off: connections refused.
    ClickHouseRefused,
    /// 500 ms added to every answer of the broker.
    KafkaLatency500Ms,
    /// 5 s added to every answer of the broker (most of the 6 s session timeout).
    KafkaLatency5S,
    /// The broker's answers limited to 32 KB/s.
    KafkaBandwidth,
    /// Every connection to the broker reset (RST) 1 s after it opens, mid-request.
    KafkaResetPeer,
    /// Every connection to the broker stalls (no data) and is closed after 5 s.
    KafkaTimeout,
    /// One worker per mode SIGKILLed while a flush waits on a slow (3 s) ClickHouse insert.
    WorkerKillInFlush,
    /// Both workers of each mode SIGTERMed at once, then started again.
    WorkersRestart,
}

pub const ALL: [Fault; 12] = [
    Fault::BrokerKill,
    Fault::KafkaLatency500Ms,
    Fault::ClickHouseHang,
    Fault::BrokerHang,
    Fault::KafkaResetPeer,
    Fault::WorkerKillInFlush,
    Fault::ClickHouseRefused,
    Fault::KafkaLatency5S,
    Fault::BrokerHangThenKill,
    Fault::KafkaBandwidth,
    Fault::KafkaTimeout,
    Fault::WorkersRestart,
];

const KAFKA: &str = "kafka";
const CLICKHOUSE: &str = "clickhouse";
const TOXIC: &str = "soak";

impl Fault {
    /// The name `EDDY_SOAK_FAULTS` takes.
    pub fn id(self) -> &'static str {
        match self {
            Fault::BrokerKill => "broker-kill",
            Fault::BrokerHang => "broker-hang",
            Fault::BrokerHangThenKill => "broker-hang-kill",
            Fault::ClickHouseHang => "clickhouse-hang",
            Fault::ClickHouseRefused => "clickhouse-refused",
            Fault::KafkaLatency500Ms => "kafka-latency-500ms",
            Fault::KafkaLatency5S => "kafka-latency-5s",
            Fault::KafkaBandwidth => "kafka-bandwidth",
            Fault::KafkaResetPeer => "kafka-reset-peer",
            Fault::KafkaTimeout => "kafka-timeout",
            Fault::WorkerKillInFlush => "worker-kill-in-flush",
            Fault::WorkersRestart => "workers-restart",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fault::BrokerKill => "broker SIGKILL + restart",
            Fault::BrokerHang => "broker SIGSTOP > session",
            Fault::BrokerHangThenKill => "broker SIGSTOP 20s, KILL",
            Fault::ClickHouseHang => "ClickHouse SIGSTOP",
            Fault::ClickHouseRefused => "ClickHouse refused",
            Fault::KafkaLatency500Ms => "Kafka latency 500 ms",
            Fault::KafkaLatency5S => "Kafka latency 5 s",
            Fault::KafkaBandwidth => "Kafka bandwidth 32 KB/s",
            Fault::KafkaResetPeer => "Kafka reset_peer 1 s",
            Fault::KafkaTimeout => "Kafka timeout 5 s",
            Fault::WorkerKillInFlush => "worker SIGKILL in flush",
            Fault::WorkersRestart => "both workers restarted",
        }
    }

    /// How long the fault lasts once injected (the short schedule keeps CI to minutes; each
    /// hang still outlasts the 6 s session timeout). Zero: the fault is an event.
    pub fn hold(self, long: bool) -> Duration {
        let s = match self {
            Fault::BrokerKill | Fault::WorkerKillInFlush | Fault::WorkersRestart => 0,
            Fault::BrokerHangThenKill => 20,
            Fault::BrokerHang => {
                if long {
                    30
                } else {
                    15
                }
            }
            Fault::ClickHouseHang | Fault::ClickHouseRefused => {
                if long {
                    45
                } else {
                    15
                }
            }
            _ => {
                if long {
                    30
                } else {
                    10
                }
            }
        };
        Duration::from_secs(s)
    }

    fn toxic(self) -> Option<Toxic> {
        let (kind, attributes) = match self {
            Fault::KafkaLatency500Ms => ("latency", json!({"latency": 500})),
            Fault::KafkaLatency5S => ("latency", json!({"latency": 5000})),
            Fault::KafkaBandwidth => ("bandwidth", json!({"rate": 32})),
            Fault::KafkaResetPeer => ("reset_peer", json!({"timeout": 1000})),
            Fault::KafkaTimeout => ("timeout", json!({"timeout": 5000})),
            _ => return None,
        };
        Some(Toxic {
            name: TOXIC,
            kind,
            stream: "downstream",
            attributes,
        })
    }

    pub async fn inject(self, s: &mut Soak) {
        if let Some(t) = self.toxic() {
            s.toxi.add(KAFKA, &t).await;
            return;
        }
        match self {
            Fault::BrokerKill => s.stack.run(&["signal-kafka", "KILL"]).await,
            Fault::BrokerHang | Fault::BrokerHangThenKill => {
                s.stack.run(&["signal-kafka", "STOP"]).await
            }
            Fault::ClickHouseHang => s.stack.run(&["signal-clickhouse", "STOP"]).await,
            Fault::ClickHouseRefused => s.toxi.set_enabled(CLICKHOUSE, false).await,
            Fault::WorkerKillInFlush => kill_in_flush(s).await,
            Fault::WorkersRestart => {
                for lane in &s.lanes {
                    for i in 0..lane.slots.len() {
                        lane.term(i);
                    }
                }
                for l in 0..s.lanes.len() {
                    for i in 0..s.lanes[l].slots.len() {
                        let exit = s.lanes[l].reap(i).await;
                        s.note(&format!("{} stopped: {}", exit.slot, exit.how));
                    }
                }
            }
            _ => unreachable!("toxics are handled above"),
        }
    }

    pub async fn undo(self, s: &mut Soak) {
        if self.toxic().is_some() {
            s.toxi.remove(KAFKA, TOXIC).await;
            return;
        }
        match self {
            Fault::BrokerKill => s.stack.run(&["start-kafka"]).await,
            Fault::BrokerHang => s.stack.run(&["signal-kafka", "CONT"]).await,
            Fault::BrokerHangThenKill => {
                s.stack.run(&["signal-kafka", "KILL"]).await;
                s.stack.run(&["start-kafka"]).await;
            }
            Fault::ClickHouseHang => s.stack.run(&["signal-clickhouse", "CONT"]).await,
            Fault::ClickHouseRefused => s.toxi.set_enabled(CLICKHOUSE, true).await,
            Fault::WorkerKillInFlush => {
                s.toxi.remove(CLICKHOUSE, TOXIC).await;
                let victim = s.victim % 2;
                for lane in &mut s.lanes {
                    lane.spawn(victim);
                }
            }
            Fault::WorkersRestart => {
                for lane in &mut s.lanes {
                    lane.spawn_all();
                }
            }
            _ => unreachable!("toxics are handled above"),
        }
    }
}

/// Slows ClickHouse inserts to 3 s, waits until the victim worker of each mode has taken new
/// input since (its next flush starts within `flush_interval_ms`, 250 ms, and then waits on
/// the insert), and SIGKILLs it 1 s later: inside that insert, before its commit. The modes
/// are watched together, so each victim dies at its own first chance.
async fn kill_in_flush(s: &mut Soak) {
    s.victim += 1;
    let victim = s.victim % 2;
    let slow = Toxic {
        name: TOXIC,
        kind: "latency",
        stream: "downstream",
        attributes: json!({"latency": 3000}),
    };
    s.toxi.add(CLICKHOUSE, &slow).await;
    const METRIC: &str = "eddy_events_consumed_total";
    let n = s.lanes.len();
    let mut before = Vec::new();
    for lane in &s.lanes {
        before.push(lane.metric(victim, METRIC).await.unwrap_or(0.0));
    }
    let mut took: Vec<Option<Instant>> = vec![None; n];
    let mut killed = vec![false; n];
    let t0 = Instant::now();
    while killed.iter().any(|k| !k) {
        for l in 0..n {
            if killed[l] {
                continue;
            }
            if took[l].is_none()
                && s.lanes[l].metric(victim, METRIC).await.unwrap_or(0.0) > before[l]
            {
                took[l] = Some(Instant::now());
            }
            let due = took[l].is_some_and(|t| t.elapsed() >= Duration::from_secs(1));
            let late = t0.elapsed() > Duration::from_secs(30);
            if due || late {
                let name = s.lanes[l].slots[victim].name.clone();
                s.lanes[l].kill(victim);
                killed[l] = true;
                s.note(&format!(
                    "{name} SIGKILLed {}",
                    if due {
                        "1 s into a flush that waits on a 3 s insert"
                    } else {
                        "after 30 s without new input (so not mid-flush)"
                    }
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
