//! Delivering `eddy fleet-watch`'s alerts to its destinations (`[fleet.notify]`).
//!
//! The alert topic is the outbox: a window's alerts and resolutions are committed there with
//! its progress (kafka.rs), and each destination reads them back in order (read_committed) from
//! its own position, delivers each one (notify/), and records its new position in the state
//! topic, in a transaction with the dead letter when the destination kept failing. A restart
//! resumes every destination where its last record says: nothing delivered is sent again
//! unless the process died between a destination's answer and that record; such a repeat
//! carries the same alert id (PagerDuty's dedup key, Alertmanager's labels, the webhook's
//! `X-Eddy-Event-Id`), so it raises no second page. Destinations do not wait for each other.
use super::alert::{FleetAlert, FleetAlertResolved, Metric, Resolution};
use super::kafka::{Notified, NotifiedKind, NotifyLog};
use super::{FleetConfig, FleetError};
use crate::config::KafkaConfig;
use crate::notify::{Destination, Notification, Outcome, Sender, Status};
use futures::StreamExt;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Every destination, with where it resumes.
pub(crate) struct Notifier {
    destinations: Vec<(String, Destination, BTreeMap<i32, i64>)>,
    log: Arc<NotifyLog>,
    sender: Arc<Sender>,
    props: Vec<(String, String)>,
    topic: String,
}

impl Notifier {
    /// Positions from the state topic (`notified`); a destination without any starts at the
    /// alert topic's end as of now, recorded at once: a destination added later is not sent
    /// the alerts that came before it.
    pub(crate) async fn new(
        kafka: &KafkaConfig,
        cfg: &FleetConfig,
        database: &str,
        notified: &BTreeMap<(String, i32), i64>,
    ) -> Result<Self, FleetError> {
        let log = tokio::task::block_in_place(|| NotifyLog::new(kafka, cfg, database))?;
        let sender = Sender::new(&cfg.notify).map_err(|e| FleetError::Notify(e.to_string()))?;
        let props = kafka.client_props();
        let topic = cfg.alert_topic.clone();
        let ends = tokio::task::block_in_place(|| high_watermarks(&props, &topic))?;
        let mut destinations = Vec::new();
        for (name, dest) in &cfg.notify.destinations {
            let mut from = BTreeMap::new();
            for (&partition, &end) in &ends {
                let next = match notified.get(&(name.clone(), partition)) {
                    Some(&o) => o,
                    None => {
                        log.record(&position(&topic, name, partition, end), None)
                            .await?;
                        end
                    }
                };
                from.insert(partition, next);
            }
            tracing::info!(destination = %name, kind = dest.kind(), from = ?from, "fleet-watch: notifying");
            destinations.push((name.clone(), dest.clone(), from));
        }
        Ok(Self {
            destinations,
            log: Arc::new(log),
            sender: Arc::new(sender),
            props,
            topic,
        })
    }

    /// Deliver until `shutdown`; with `to_end`, only until every destination has dealt with
    /// everything committed on the alert topic (a `--once` pass).
    pub(crate) async fn run(
        self,
        to_end: bool,
        shutdown: CancellationToken,
    ) -> Result<(), FleetError> {
        let mut tasks = tokio::task::JoinSet::new();
        for (name, dest, from) in self.destinations {
            let d = Delivery {
                name,
                dest,
                log: self.log.clone(),
                sender: self.sender.clone(),
                topic: self.topic.clone(),
            };
            let props = self.props.clone();
            let stop = shutdown.clone();
            tasks.spawn(async move { d.run(&props, from, to_end, stop).await });
        }
        let mut first_err = None;
        while let Some(r) = tasks.join_next().await {
            let r = r.unwrap_or_else(|e| Err(FleetError::Notify(format!("task: {e}"))));
            if let Err(e) = r {
                // One destination's producer fenced or broken: the others stop too.
                shutdown.cancel();
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn position(topic: &str, destination: &str, partition: i32, next_offset: i64) -> Notified {
    Notified {
        v: 1,
        kind: NotifiedKind::Notified,
        topic: topic.into(),
        destination: destination.into(),
        partition,
        next_offset,
    }
}

fn consumer_config(props: &[(String, String)]) -> ClientConfig {
    let mut cc = ClientConfig::new();
    for (k, v) in props {
        cc.set(k, v);
    }
    cc.set("group.id", "eddy-fleet-notify-unused")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        // A position below the log start (alerts past retention) starts at what is left.
        .set("auto.offset.reset", "earliest");
    cc
}

/// Each partition of `topic` and its high watermark.
fn high_watermarks(
    props: &[(String, String)],
    topic: &str,
) -> Result<BTreeMap<i32, i64>, FleetError> {
    let c: rdkafka::consumer::BaseConsumer = consumer_config(props).create()?;
    let md = c.fetch_metadata(Some(topic), TIMEOUT)?;
    let mut out = BTreeMap::new();
    for t in md.topics() {
        for p in t.partitions() {
            let (_, high) = c.fetch_watermarks(topic, p.id(), TIMEOUT)?;
            out.insert(p.id(), high);
        }
    }
    if out.is_empty() {
        return Err(FleetError::Notify(format!(
            "topic {topic} has no partitions"
        )));
    }
    Ok(out)
}

struct Delivery {
    name: String,
    dest: Destination,
    log: Arc<NotifyLog>,
    sender: Arc<Sender>,
    topic: String,
}

impl Delivery {
    async fn run(
        self,
        props: &[(String, String)],
        from: BTreeMap<i32, i64>,
        to_end: bool,
        shutdown: CancellationToken,
    ) -> Result<(), FleetError> {
        let mut cc = consumer_config(props);
        if to_end {
            cc.set("enable.partition.eof", "true");
        }
        let consumer: StreamConsumer = cc.create()?;
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &from {
            tpl.add_partition_offset(&self.topic, p, Offset::Offset(o))?;
        }
        consumer.assign(&tpl)?;
        // Partitions read to their end (with `to_end`); a message arriving after takes its
        // partition out again.
        let mut at_end = std::collections::BTreeSet::new();
        let mut stream = consumer.stream();
        while !(to_end && at_end.len() == from.len()) {
            let msg = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                m = stream.next() => m,
            };
            let msg = match msg {
                None => return Ok(()),
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    at_end.insert(p);
                    continue;
                }
                Some(Err(e)) => {
                    // Transient (a broker failing over): librdkafka retries on its own.
                    tracing::warn!(destination = %self.name, error = %e, "fleet-watch: reading alerts");
                    continue;
                }
                Some(Ok(m)) => m,
            };
            let (partition, offset) = (msg.partition(), msg.offset());
            at_end.remove(&partition);
            let payload = msg.payload().unwrap_or_default().to_vec();
            let outcome = match notification(&payload) {
                Ok(Some(n)) => {
                    let o = self
                        .sender
                        .deliver(&self.name, &self.dest, &n, &shutdown)
                        .await;
                    if let Outcome::Delivered { attempts } = &o {
                        tracing::info!(destination = %self.name, alert = %n.alert_id, kind = %n.kind, attempts, "notified");
                    }
                    o
                }
                // Another kind of event: nothing to tell anyone.
                Ok(None) => Outcome::Delivered { attempts: 0 },
                Err(why) => Outcome::DeadLetter {
                    reason: "unreadable",
                    detail: why,
                    attempts: 0,
                },
            };
            let dead_letter = match outcome {
                Outcome::Cancelled => return Ok(()),
                Outcome::Delivered { .. } => None,
                Outcome::DeadLetter {
                    reason,
                    detail,
                    attempts,
                } => {
                    metrics::counter!("eddy_notify_dead_letters_total",
                        "destination" => self.name.clone(), "reason" => reason)
                    .increment(1);
                    tracing::error!(destination = %self.name, kind = self.dest.kind(), partition, offset,
                        reason, error = %detail, "notification dead-lettered");
                    Some(self.dead_letter(&payload, partition, offset, reason, &detail, attempts))
                }
            };
            let pos = position(&self.topic, &self.name, partition, offset + 1);
            self.record(&pos, dead_letter, &shutdown).await?;
        }
        Ok(())
    }

    /// Record a position, retrying what may pass (a broker outage); a fenced producer ends
    /// the notifier (another instance runs).
    async fn record(
        &self,
        pos: &Notified,
        dead_letter: Option<(String, Vec<u8>)>,
        shutdown: &CancellationToken,
    ) -> Result<(), FleetError> {
        let mut delay = Duration::from_secs(1);
        loop {
            let dl = dead_letter.as_ref().map(|(k, v)| (k.as_str(), v.clone()));
            match self.log.record(pos, dl).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_fatal() => return Err(e),
                Err(e) => {
                    tracing::warn!(destination = %self.name, error = %e, "fleet-watch: cannot record a delivery; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    /// The dead letter: the event as it was, where it came from, which destination gave up on
    /// it and why. Key = the event's id.
    fn dead_letter(
        &self,
        payload: &[u8],
        partition: i32,
        offset: i64,
        reason: &str,
        detail: &str,
        attempts: u32,
    ) -> (String, Vec<u8>) {
        let event: serde_json::Value = serde_json::from_slice(payload)
            .unwrap_or_else(|_| String::from_utf8_lossy(payload).into_owned().into());
        let key = event["event_id"].as_str().unwrap_or_default().to_string();
        let now = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let body = serde_json::json!({
            "kind": "notify_dead_letter",
            "destination": self.name,
            "destination_kind": self.dest.kind(),
            "reason": reason,
            "detail": detail,
            "attempts": attempts,
            "at": now,
            "topic": self.topic,
            "partition": partition,
            "offset": offset,
            "event": event,
        });
        (key, serde_json::to_vec(&body).unwrap_or_default())
    }
}

/// The notification for an event of the alert topic; `None` for kinds people are not told of.
pub(crate) fn notification(payload: &[u8]) -> Result<Option<Notification>, String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: String,
    }
    let k: Kind = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    match k.kind.as_str() {
        "fleet_alert" => {
            let a: FleetAlert = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            Ok(Some(of_alert(&a, payload)))
        }
        "fleet_alert_resolved" => {
            let r: FleetAlertResolved =
                serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            Ok(Some(of_resolution(&r, payload)))
        }
        _ => Ok(None),
    }
}

fn series(agent: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("{agent} v{v}"),
        None => agent.to_string(),
    }
}

fn value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::LoopRate => format!("{:.1}%", v * 100.0),
        Metric::LoopCostPerRun => format!("${v:.4}"),
    }
}

/// `2026-01-01T06:00:00Z`, `2026-01-01T07:00:00Z` → `2026-01-01 06:00–07:00 UTC`.
fn span(start: &str, end: &str) -> String {
    let day = start.get(..10).unwrap_or(start);
    let hm = |t: &str| t.get(11..16).unwrap_or(t).to_string();
    if end.get(..10) == Some(day) {
        format!("{day} {}–{} UTC", hm(start), hm(end))
    } else {
        format!("{start} – {end}")
    }
}

fn labels(
    project: &str,
    agent: &str,
    version: Option<&str>,
    metric: Metric,
) -> BTreeMap<String, String> {
    [
        ("project", project),
        ("agent", agent),
        ("version", version.unwrap_or("")),
        ("metric", metric.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn of_alert(a: &FleetAlert, payload: &[u8]) -> Notification {
    let who = series(&a.agent_name, a.agent_version.as_deref());
    let what = match a.metric {
        Metric::LoopRate => format!(
            "{who} loops in {} of its runs, against {} before",
            value(a.metric, a.current.value),
            value(a.metric, a.baseline.value)
        ),
        Metric::LoopCostPerRun => format!(
            "{who} spends {} per run inside loops, against {} before",
            value(a.metric, a.current.value),
            value(a.metric, a.baseline.value)
        ),
    };
    let mut details = vec![
        ("project".to_string(), a.project_id.clone()),
        ("agent".to_string(), who.clone()),
        ("metric".to_string(), a.metric.as_str().to_string()),
        ("window".to_string(), span(&a.window_start, &a.window_end)),
        (
            "current".to_string(),
            format!(
                "{} over {} runs",
                value(a.metric, a.current.value),
                a.current.runs
            ),
        ),
        (
            "baseline".to_string(),
            format!(
                "{} over {} runs since {}",
                value(a.metric, a.baseline.value),
                a.baseline.runs,
                a.baseline_start
            ),
        ),
    ];
    if !a.example_run_ids.is_empty() {
        details.push(("example_runs".to_string(), a.example_run_ids.join(", ")));
    }
    Notification {
        alert_id: a.event_id.clone(),
        event_id: a.event_id.clone(),
        kind: "fleet_alert".into(),
        status: Status::Firing,
        summary: format!(
            "Fleet regression in {}: {what} ({})",
            a.project_id,
            span(&a.window_start, &a.window_end)
        ),
        details,
        labels: labels(
            &a.project_id,
            &a.agent_name,
            a.agent_version.as_deref(),
            a.metric,
        ),
        starts_at: a.window_end.clone(),
        event: payload.to_vec(),
    }
}

fn of_resolution(r: &FleetAlertResolved, payload: &[u8]) -> Notification {
    let who = series(&r.agent_name, r.agent_version.as_deref());
    let why = match r.reason {
        Resolution::Recovered => format!(
            "{} did not raise it again",
            span(&r.window_start, &r.window_end)
        ),
        Resolution::Superseded => format!(
            "superseded by the alert of {}",
            span(&r.window_start, &r.window_end)
        ),
    };
    Notification {
        alert_id: r.resolves.clone(),
        event_id: r.event_id.clone(),
        kind: "fleet_alert_resolved".into(),
        status: Status::Resolved,
        summary: format!(
            "Resolved in {}: {who} {} ({why})",
            r.project_id,
            r.metric.as_str()
        ),
        details: vec![
            ("project".to_string(), r.project_id.clone()),
            ("agent".to_string(), who),
            ("metric".to_string(), r.metric.as_str().to_string()),
            ("reason".to_string(), why),
        ],
        labels: labels(
            &r.project_id,
            &r.agent_name,
            r.agent_version.as_deref(),
            r.metric,
        ),
        // The alert began where the window that resolves it begins.
        starts_at: r.window_start.clone(),
        event: payload.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alerts_and_resolutions_read_as_people_read_them() {
        let alert =
            br#"{"kind":"fleet_alert","event_id":"a1","project_id":"proj-0","agent_name":"coder",
            "agent_version":"2","metric":"loop_rate","window_start":"2026-01-01T06:00:00Z",
            "window_end":"2026-01-01T07:00:00Z","baseline_start":"2026-01-01T00:00:00Z",
            "baseline":{"value":0.0875,"runs":240},"current":{"value":0.85,"runs":40},
            "example_run_ids":["r1","r2"]}"#;
        let n = notification(alert).unwrap().unwrap();
        assert_eq!(
            n.summary,
            "Fleet regression in proj-0: coder v2 loops in 85.0% of its runs, against 8.8% \
             before (2026-01-01 06:00–07:00 UTC)"
        );
        assert_eq!((n.alert_id.as_str(), n.status), ("a1", Status::Firing));
        assert_eq!(n.starts_at, "2026-01-01T07:00:00Z");
        assert_eq!(n.event, alert.to_vec());
        assert_eq!(n.labels["version"], "2");
        let resolved = br#"{"kind":"fleet_alert_resolved","event_id":"r1","project_id":"proj-0",
            "resolves":"a1","agent_name":"coder","metric":"loop_cost_per_run","reason":"recovered",
            "window_start":"2026-01-01T07:00:00Z","window_end":"2026-01-01T08:00:00Z"}"#;
        let n = notification(resolved).unwrap().unwrap();
        assert_eq!((n.alert_id.as_str(), n.event_id.as_str()), ("a1", "r1"));
        assert_eq!(n.status, Status::Resolved);
        assert_eq!(
            n.summary,
            "Resolved in proj-0: coder loop_cost_per_run (2026-01-01 07:00–08:00 UTC did not \
             raise it again)"
        );
        assert!(notification(br#"{"kind":"other"}"#).unwrap().is_none());
        assert!(notification(b"not json").is_err());
    }
}
