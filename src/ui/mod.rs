//! `eddy ui`: a read-only loop explorer over the ClickHouse tables.
//!
//! Server-rendered HTML with inline SVG charts, everything compiled into the binary: no writes,
//! no script or stylesheet fetched from anywhere at run time. Pages: the fleet (`/`), one run
//! (`/runs/{project_id}/{run_id}`), the live signals (`/live`, fed by server-sent events from an
//! assign-only reader of the output topic starting at its end) and a search (`/search`).
//! Every query reads with `FINAL` (exact under redelivery) and uses only functions Debian's
//! ClickHouse 18.16 has. Every route requires a token or a trusted proxy's user (`auth.rs`).
//!
//! A page's way through: `params` checks its query string, `queries` runs its SQL into typed
//! rows (`decode`), `fleet_view`/`run_view` shape them, and a template (`templates`, `svg`)
//! renders them, escaping every value it is given.
mod auth;
mod decode;
mod fleet_view;
mod fmt;
mod links;
mod live;
mod palette;
mod params;
mod queries;
mod routes;
mod run_view;
mod svg;
mod templates;

use crate::config::{ClickHouseConfig, KafkaConfig, UiConfig};
use crate::verdict::VerdictConfig;
use crate::verdict::{consumer, VerdictTable, Verdicts};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why `eddy ui` could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// `ui_addr` is not a socket address.
    #[error("ui_addr `{0}` is not a socket address")]
    Addr(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address tried.
        addr: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server stopped with an error.
    #[error("server: {0}")]
    Serve(#[source] std::io::Error),
    /// ClickHouse could not be reached.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    /// The signals topic could not be read.
    #[error(transparent)]
    Verdict(#[from] crate::verdict::VerdictError),
    /// A query failed.
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// A query's result did not fit its row type: the SQL and its struct disagree.
    #[error("reading a query's result: {0}")]
    Decode(#[from] serde::de::value::Error),
    /// A request the UI cannot answer (400).
    #[error("{0}")]
    BadRequest(String),
    /// No authentication is configured, and open access was not asked for.
    #[error(
        "eddy ui serves every run's steps, tools and costs, and no authentication is configured. \
         Set one of: ui_tokens (EDDY_UI_TOKENS=\"<token>=<user>\"; make a token with \
         `openssl rand -hex 32`); ui_trusted_proxies (EDDY_UI_TRUSTED_PROXIES=<proxy address or \
         CIDR>) behind an authenticating proxy that puts the user in ui_proxy_user_header \
         (default X-Forwarded-User); or, to serve without authentication, ui_insecure_open = true \
         (EDDY_UI_INSECURE_OPEN=true, or `eddy ui --insecure-open`)"
    )]
    NoAuth,
    /// The authentication settings are unusable.
    #[error("invalid ui configuration: {0}")]
    Auth(String),
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] crate::admin::AdminError),
}

pub(crate) struct AppState {
    client: clickhouse::Client,
    verdicts: Arc<Verdicts>,
    stop: CancellationToken,
}

/// Serve until `shutdown` is cancelled. Prints the address it listens on (one line on stdout),
/// so a caller binding port 0 learns the port.
/// Takes its own section, ClickHouse for the queries, Kafka and the verdict table's settings for
/// the live signals.
pub async fn serve(
    kafka: KafkaConfig,
    clickhouse: ClickHouseConfig,
    verdicts: VerdictConfig,
    cfg: UiConfig,
    shutdown: CancellationToken,
) -> Result<(), UiError> {
    // Before anything is connected: a UI that would serve everyone does not start by accident.
    let gate = Arc::new(auth::Gate::new(&cfg)?);
    let client = crate::sink::reader(&clickhouse).await?;
    let verdicts = Verdicts::new(VerdictTable::new(verdicts));
    let reader = live_reader(&kafka, verdicts.clone(), shutdown.child_token())?;
    let state = Arc::new(AppState {
        client,
        verdicts,
        stop: shutdown.child_token(),
    });
    let listener = listen(&cfg.addr).await?;
    let bound = listener.local_addr().map_err(UiError::Serve)?;
    // Ready at start: ClickHouse answered (connect checks it) and the pages are served.
    // Probes and scrapes need no token: this server is separate from the pages.
    let health =
        crate::daemon::admin_server(cfg.admin_addr.as_deref(), crate::daemon::Readiness::AtStart)
            .await?;
    println!("eddy ui: http://{bound}/");
    let access = gate.describe();
    if cfg.insecure_open {
        tracing::warn!(%bound, database = %clickhouse.database, access = %access, "eddy ui listening without authentication");
    } else {
        tracing::info!(%bound, database = %clickhouse.database, access = %access, "eddy ui listening");
    }
    let stop = shutdown.clone();
    let app =
        routes::router(state).layer(axum::middleware::from_fn_with_state(gate, auth::require));
    // The peer address decides whether a proxy's user header is believed.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        stop.cancelled().await;
        health.set_draining();
    })
    .await
    .map_err(UiError::Serve)?;
    shutdown.cancel();
    let _ = reader.await;
    Ok(())
}

/// The live page's reader of the output topic. No look-back: the page shows what arrives from
/// the moment it opens.
fn live_reader(
    kafka: &KafkaConfig,
    verdicts: Arc<Verdicts>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, UiError> {
    let subscription = consumer::Subscription {
        props: kafka.client_props(),
        topic: kafka.topics.output.clone(),
        lookback: std::time::Duration::ZERO,
    };
    Ok(consumer::spawn(subscription, verdicts, stop)?)
}

async fn listen(addr: &str) -> Result<tokio::net::TcpListener, UiError> {
    let parsed: SocketAddr = addr.parse().map_err(|_| UiError::Addr(addr.to_string()))?;
    tokio::net::TcpListener::bind(parsed)
        .await
        .map_err(|source| UiError::Bind {
            addr: addr.to_string(),
            source,
        })
}
