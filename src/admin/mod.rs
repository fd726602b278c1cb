//! Admin HTTP server: `/metrics` (Prometheus), `/livez` (+ `/healthz`), `/readyz`.
//!
//! `/livez` fails only when the worker's watchdog found it stuck (no partition, or no input,
//! while its input has lag nobody works off): a ClickHouse or broker outage must grow lag, not
//! trigger a restart storm. `/readyz` is true only while the worker consumes with the state of
//! every assigned partition restored and ClickHouse answering, and false from the moment
//! shutdown begins.
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Why the admin server (health and metrics) could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound (in use, or not ours).
    #[error("cannot bind the admin server to {addr}: {source} (set admin_addr / EDDY_ADMIN_ADDR)")]
    Bind {
        /// The `admin_addr` tried.
        addr: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// `admin_addr` is not a host:port.
    #[error("invalid admin_addr `{0}`: expected host:port, e.g. 127.0.0.1:9464")]
    Addr(String),
}

/// What `/readyz` and `/livez` report. Shared between the worker and the server.
#[derive(Default)]
pub(crate) struct Health {
    consuming: AtomicBool,
    clickhouse_ok: AtomicBool,
    draining: AtomicBool,
    /// A member of its consumer group (workers only; other daemons never clear it).
    not_member: AtomicBool,
    /// Assigned partitions whose state is still being restored from the changelog.
    restoring: AtomicUsize,
    /// Why the watchdog gave up on this process, once it did.
    stuck: Mutex<Option<String>>,
}

impl Health {
    pub(crate) fn set_consuming(&self, v: bool) {
        self.consuming.store(v, Ordering::Relaxed);
    }
    pub(crate) fn set_clickhouse_ok(&self, v: bool) {
        self.clickhouse_ok.store(v, Ordering::Relaxed);
    }
    pub(crate) fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }
    pub(crate) fn set_member(&self, member: bool) {
        self.not_member.store(!member, Ordering::Relaxed);
    }
    pub(crate) fn set_restoring(&self, partitions: usize) {
        self.restoring.store(partitions, Ordering::Relaxed);
    }
    pub(crate) fn set_stuck(&self, why: String) {
        if let Ok(mut s) = self.stuck.lock() {
            *s = Some(why);
        }
    }
    pub(crate) fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Relaxed) {
            return Err("draining: shutting down".into());
        }
        if !self.consuming.load(Ordering::Relaxed) {
            return Err("not consuming yet".into());
        }
        if self.not_member.load(Ordering::Relaxed) {
            return Err("not a member of the consumer group (joining it)".into());
        }
        let restoring = self.restoring.load(Ordering::Relaxed);
        if restoring > 0 {
            return Err(format!(
                "restoring the state of {restoring} assigned partition(s) from the changelog"
            ));
        }
        if !self.clickhouse_ok.load(Ordering::Relaxed) {
            return Err("ClickHouse is not answering".into());
        }
        Ok(())
    }
    /// Err once the watchdog found the process stuck.
    pub(crate) fn live(&self) -> Result<(), String> {
        match self.stuck.lock().ok().and_then(|s| s.clone()) {
            Some(why) => Err(format!("stuck: {why}")),
            None => Ok(()),
        }
    }
}

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the global metrics recorder once (idempotent; tests may start several workers).
pub(crate) fn metrics_handle() -> Option<PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_seconds".into()),
                    &[
                        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    ],
                )
                .ok()?
                .install_recorder()
                .ok()
        })
        .clone()
}

/// Bind and serve in the background; returns the bound address (port 0 picks a free one).
pub(crate) async fn serve(addr: &str, health: Arc<Health>) -> Result<SocketAddr, AdminError> {
    let sock: SocketAddr = addr.parse().map_err(|_| AdminError::Addr(addr.into()))?;
    let listener = tokio::net::TcpListener::bind(sock)
        .await
        .map_err(|source| AdminError::Bind {
            addr: addr.into(),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| AdminError::Bind {
        addr: addr.into(),
        source,
    })?;
    let handle = metrics_handle();
    metrics::gauge!("eddy_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    let h = health.clone();
    let live = move || {
        let h = health.clone();
        async move {
            match h.live() {
                Ok(()) => (StatusCode::OK, "ok".to_string()).into_response(),
                Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
            }
        }
    };
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    match handle {
                        Some(h) => (StatusCode::OK, h.render()).into_response(),
                        None => {
                            (StatusCode::SERVICE_UNAVAILABLE, "no metrics recorder").into_response()
                        }
                    }
                }
            }),
        )
        .route("/livez", get(live.clone()))
        .route("/healthz", get(live))
        .route(
            "/readyz",
            get(move || {
                let h = h.clone();
                async move {
                    match h.ready() {
                        Ok(()) => (StatusCode::OK, "ready".to_string()).into_response(),
                        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
                    }
                }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "admin server stopped");
        }
    });
    tracing::info!(addr = %bound, "admin server: /metrics /livez /readyz");
    Ok(bound)
}
