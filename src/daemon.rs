//! What every long-running command (`run`, `ingest-http`, `ingest-otlp`, `ui`, `fleet-watch`)
//! shares around its own work: the stop token that the first SIGINT/SIGTERM cancels, with the
//! grace period after which the process exits anyway, and the admin server (`/livez`,
//! `/readyz`, `/metrics`). One place, so that every daemon stops and is probed the same way.
use crate::admin::{self, AdminError, Health};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// When a daemon's `/readyz` turns true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Once the admin server is up: the daemon keeps no state and depends on no server that it
    /// did not reach while starting (ingest, OTLP receiver, UI).
    AtStart,
    /// When the daemon says so through the returned `Health` (the worker: restored and in its
    /// group; fleet-watch: caught up).
    Managed,
}

/// Start the admin server on `addr` (none or empty: no admin server) and return the health that
/// it reports.
pub(crate) async fn admin_server(
    addr: Option<&str>,
    readiness: Readiness,
) -> Result<Arc<Health>, AdminError> {
    let health = Arc::new(Health::default());
    if let Some(addr) = addr.filter(|a| !a.is_empty()) {
        if readiness == Readiness::AtStart {
            health.set_consuming(true);
            health.set_clickhouse_ok(true);
        }
        admin::serve(addr, health.clone()).await?;
    }
    Ok(health)
}

/// A token cancelled on the first SIGINT/SIGTERM. A second signal, or the grace period running
/// out, exits the process at once: a stuck flush must not outlive the orchestrator's patience.
pub fn shutdown_on_signal(grace: Duration) -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut signals = Signals::new();
        signals.next().await;
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutdown requested: flushing and committing"
        );
        t.cancel();
        tokio::select! {
            _ = signals.next() => {
                tracing::warn!("second signal: exiting without a final flush");
                std::process::exit(130);
            }
            _ = tokio::time::sleep(grace) => {
                tracing::error!("shutdown grace period exceeded: exiting without a final commit");
                std::process::exit(1);
            }
        }
    });
    token
}

/// SIGINT or SIGTERM, as a stream of arrivals.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        Self {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(term) = self.term.as_mut() {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
