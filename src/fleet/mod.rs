//! `eddy fleet-watch`: fleet regression alerts over the rollups.
//!
//! A run is keyed by run id, so an agent's runs are spread over every input partition and no
//! worker sees an agent whole. Rather than a second keyed Kafka stage (re-keying every run by
//! agent, with its own state, changelog and rebalances), this daemon reads what the workers
//! already made exact and durable: `rollup_minute FINAL`. On a schedule it takes each project's
//! windows that are closed in event time (the newest rollup minute is `settle_seconds` past
//! their end), evaluates each once with a pure function (`eval::evaluate`), and publishes the
//! window's alerts together with the progress past it in one Kafka transaction. Same rows, same
//! alerts, same bytes; a restart resumes after the last committed window (docs/fleet-alerts.md).
pub(crate) mod alert;
pub(crate) mod eval;
mod kafka;
pub(crate) mod notify;
mod store;

pub(crate) use crate::config::FleetConfig;
pub use alert::{FleetAlert, Metric};
pub(crate) use kafka::Progress;

use crate::config::{ClickHouseConfig, KafkaConfig};
use alert::{OpenAlert, Window};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Why fleet-watch stopped.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The Kafka client failed.
    #[error("Kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// Its topics could not be checked or created.
    #[error(transparent)]
    Topics(#[from] crate::source::SourceError),
    /// A ClickHouse query failed.
    #[error("ClickHouse: {0}")]
    ClickHouse(#[from] clickhouse::error::Error),
    /// The ClickHouse connection could not be made.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] crate::admin::AdminError),
    /// An alert could not be serialised.
    #[error("cannot encode an event: {0}")]
    Encode(#[source] serde_json::Error),
    /// The fleet state topic holds a record this version cannot read.
    #[error("unreadable record at offset {offset} of the fleet state topic: {why}")]
    State {
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        why: String,
    },
    /// Reading the fleet state topic back did not finish.
    #[error("the fleet state topic: {0}")]
    StateTimeout(#[from] crate::source::compacted::Stalled),
    /// A notification destination failed.
    #[error("notifications: {0}")]
    Notify(String),
}

impl FleetError {
    /// The producer can publish no more: fenced by a newer instance with the same
    /// transactional id, or broken. Retrying cannot help; exiting lets one instance run.
    pub(crate) fn is_fatal(&self) -> bool {
        matches!(self, FleetError::Kafka(rdkafka::error::KafkaError::Transaction(e)) if e.is_fatal())
    }
}

/// How `eddy fleet-watch` runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchOptions {
    /// One pass over the windows closed now, then exit (a cron job, or a test).
    pub once: bool,
    /// Never evaluate a window ending after this (epoch seconds).
    pub until: Option<u32>,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassStats {
    /// Windows judged.
    pub windows: u64,
    /// Alerts raised.
    pub alerts: u64,
    pub(crate) resolved: u64,
}

/// Run until `shutdown` (or after one pass with `once`). A window's transaction is never cut:
/// shutdown is checked between windows.
///
/// Takes its own section, Kafka for the alert and state topics and ClickHouse for the rollups.
pub async fn serve(
    kafka: KafkaConfig,
    clickhouse: ClickHouseConfig,
    cfg: FleetConfig,
    opts: WatchOptions,
    shutdown: CancellationToken,
) -> Result<PassStats, FleetError> {
    let health =
        crate::daemon::admin_server(cfg.admin_addr.as_deref(), crate::daemon::Readiness::Managed)
            .await?;
    kafka::ensure_topics(&kafka, &cfg).await?;
    let store = store::Store::new(
        crate::sink::reader(&clickhouse).await?,
        &clickhouse.database,
    );
    let publisher =
        tokio::task::block_in_place(|| kafka::Publisher::new(&kafka, &cfg, &clickhouse.database))?;
    let state = tokio::task::block_in_place(|| kafka::read_state(&kafka, &cfg))?;
    let mut progress = state.progress;
    tracing::info!(projects = progress.len(), "fleet-watch: progress restored");
    // Destinations resume from their recorded positions, taken before any new window is
    // published so that a destination added now misses none of them.
    let notifier = if cfg.notify.destinations.is_empty() {
        None
    } else {
        Some(notify::Notifier::new(&kafka, &cfg, &clickhouse.database, &state.notified).await?)
    };
    // A daemon delivers alongside the evaluation; `--once` delivers after its pass.
    let notify_stop = shutdown.child_token();
    let (mut daemon_notifier, mut once_notifier) = (None, None);
    if let Some(n) = notifier {
        if opts.once {
            once_notifier = Some(n);
        } else {
            daemon_notifier = Some(tokio::spawn(n.run(false, notify_stop.clone())));
        }
    }
    health.set_consuming(true);
    let mut total = PassStats::default();
    loop {
        if daemon_notifier.as_ref().is_some_and(|t| t.is_finished()) {
            // It ends early only when its producer was fenced or broke.
            break;
        }
        match pass(&cfg, opts, &store, &publisher, &mut progress, &shutdown).await {
            Ok(s) => {
                health.set_clickhouse_ok(true);
                total.windows += s.windows;
                total.alerts += s.alerts;
                total.resolved += s.resolved;
            }
            Err(e) if !opts.once && !e.is_fatal() => {
                // An outage delays evaluation; nothing is skipped, the next pass resumes.
                health.set_clickhouse_ok(false);
                metrics::counter!("eddy_fleet_errors_total").increment(1);
                tracing::warn!(error = %e, "fleet-watch: pass failed; retrying at the next interval");
            }
            Err(e) => return Err(e),
        }
        if opts.once || shutdown.is_cancelled() {
            break;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(cfg.interval_ms)) => {}
        }
    }
    if let Some(n) = once_notifier {
        n.run(true, notify_stop.clone()).await?;
    }
    if let Some(t) = daemon_notifier {
        notify_stop.cancel();
        t.await
            .map_err(|e| FleetError::Notify(format!("task: {e}")))??;
    }
    health.set_draining();
    tracing::info!(
        windows = total.windows,
        alerts = total.alerts,
        resolved = total.resolved,
        "fleet-watch: stopped"
    );
    Ok(total)
}

async fn pass(
    f: &FleetConfig,
    opts: WatchOptions,
    store: &store::Store,
    publisher: &kafka::Publisher,
    progress: &mut BTreeMap<String, (u32, Vec<OpenAlert>)>,
    shutdown: &CancellationToken,
) -> Result<PassStats, FleetError> {
    let mut stats = PassStats::default();
    for (project, watermark) in store.watermarks().await? {
        let mut closed = watermark.saturating_sub(f.settle_seconds);
        if let Some(u) = opts.until {
            closed = closed.min(u);
        }
        let due = eval::due_windows(
            progress.get(&project).map(|p| p.0),
            closed,
            f.window_seconds,
            f.backfill_windows,
        );
        for start in due {
            if shutdown.is_cancelled() {
                return Ok(stats);
            }
            let window = Window {
                start,
                seconds: f.window_seconds,
            };
            let rows = store
                .minutes(
                    &project,
                    window.baseline_start(f.baseline_windows),
                    window.end(),
                )
                .await?;
            let alerts = eval::evaluate(&project, window, &rows, f);
            let was_open = progress.get(&project).map_or(&[][..], |p| &p.1[..]);
            let (resolved, open) = alert::resolve(&project, window, was_open, &alerts);
            let record = Progress {
                v: 1,
                project_id: project.clone(),
                window_seconds: f.window_seconds,
                evaluated_until: window.end(),
                open,
            };
            publisher.publish(&alerts, &resolved, &record).await?;
            progress.insert(project.clone(), (window.end(), record.open));
            metrics::counter!("eddy_fleet_alerts_resolved_total").increment(resolved.len() as u64);
            for a in &alerts {
                tracing::warn!(
                    project = %a.project_id, agent = %a.agent_name,
                    version = a.agent_version.as_deref().unwrap_or(""),
                    metric = a.metric.as_str(), window_start = %a.window_start,
                    baseline = a.baseline.value, current = a.current.value,
                    "fleet regression"
                );
                metrics::counter!("eddy_fleet_alerts_total", "metric" => a.metric.as_str())
                    .increment(1);
            }
            metrics::counter!("eddy_fleet_windows_evaluated_total").increment(1);
            metrics::gauge!("eddy_fleet_evaluated_until_seconds").set(f64::from(window.end()));
            stats.windows += 1;
            stats.alerts += alerts.len() as u64;
            stats.resolved += resolved.len() as u64;
        }
    }
    Ok(stats)
}
