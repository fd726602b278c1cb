//! Admin HTTP server: `/metrics` (Prometheus), `/livez` (+ `/healthz`), `/readyz`.
//!
//! `/livez` checks nothing but the process: a ClickHouse or broker outage must grow lag, not
//! trigger a restart storm. `/readyz` is true only while the worker consumes with its state
//! restored and ClickHouse answering, and false from the moment shutdown begins.
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("cannot bind the admin server to {addr}: {source} (set admin_addr / EDDY_ADMIN_ADDR)")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid admin_addr `{0}`: expected host:port, e.g. 127.0.0.1:9464")]
    Addr(String),
}

/// What `/readyz` reports. Shared between the worker and the server.
#[derive(Default)]
pub struct Health {
    consuming: AtomicBool,
    clickhouse_ok: AtomicBool,
    draining: AtomicBool,
}

impl Health {
    pub fn set_consuming(&self, v: bool) {
        self.consuming.store(v, Ordering::Relaxed);
    }
    pub fn set_clickhouse_ok(&self, v: bool) {
        self.clickhouse_ok.store(v, Ordering::Relaxed);
    }
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }
    pub fn ready(&self) -> Result<(), &'static str> {
        if self.draining.load(Ordering::Relaxed) {
            return Err("draining: shutting down");
        }
        if !self.consuming.load(Ordering::Relaxed) {
            return Err("not consuming yet");
        }
        if !self.clickhouse_ok.load(Ordering::Relaxed) {
            return Err("ClickHouse is not answering");
        }
        Ok(())
    }
}

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Install the global metrics recorder once (idempotent; tests may start several workers).
pub fn metrics_handle() -> Option<PrometheusHandle> {
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
pub async fn serve(addr: &str, health: Arc<Health>) -> Result<SocketAddr, AdminError> {
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
        .route("/livez", get(|| async { "ok" }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let h = h.clone();
                async move {
                    match h.ready() {
                        Ok(()) => (StatusCode::OK, "ready").into_response(),
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
