//! `eddy ingest-otlp`: an OTLP traces receiver in front of the input topic, speaking both
//! transports an OpenTelemetry exporter may use: OTLP/HTTP (`POST /v1/traces`, `http.rs`) and
//! OTLP/gRPC (`TraceService/Export`, `grpc.rs`).
//!
//! Agents already traced with OpenTelemetry (the GenAI semantic conventions, OpenInference's,
//! OpenLLMetry's, the Vercel AI SDK's) point their exporter at it; agent, tool and model spans
//! become v1 events keyed by run id (the trace id). `mapping.rs` holds the rules, docs/otlp.md
//! the table.
//!
//! Both transports share one core (`Receiver::export`): the same key check, size limits,
//! mapping, acknowledgement rule and metrics. Answers are a collector's: success with an
//! `ExportTraceServiceResponse` (its `partial_success` counts spans rejected for invalid ids),
//! a refusal with the reason for a body that is not an export request or is too large, and a
//! retryable answer (429/503 with `Retry-After`; RESOURCE_EXHAUSTED/UNAVAILABLE with
//! `RetryInfo`) when Kafka does not take the events. Success is answered only after the broker
//! acknowledged every event of the batch, through the same group-committing publisher as
//! `ingest-http`.
mod attrs;
mod conventions;
pub(crate) mod decode;
mod encoding;
mod error;
mod grpc;
mod http;
pub(crate) mod mapping;

pub(crate) use error::OtlpError;

use crate::config::{IngestConfig, KafkaConfig};
use crate::contract::Event;
use crate::ingest::{Job, MAX_BODY_BYTES};
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A compressed request may expand to this much at most; on the wire a request may take
/// `MAX_BODY_BYTES` (as for `ingest-http`), over either transport.
pub(crate) const MAX_DECODED_BYTES: usize = 16 * MAX_BODY_BYTES;

/// The resource attribute naming a span's project when no API key does.
pub(crate) const PROJECT_ATTRIBUTE: &str = "eddy.project.id";

struct Receiver {
    /// Key → project; empty: no key asked, the project comes from the spans.
    keys: crate::auth::SecretTable<Arc<str>>,
    default_project: String,
    jobs: mpsc::Sender<Job>,
}

/// What one export request turned into.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Mapped {
    /// (Kafka key, v1 payload), in a fixed order: by event time, lifecycle around the steps.
    pub(crate) messages: Vec<(String, Vec<u8>)>,
    pub(crate) spans: u64,
    /// Spans with an invalid trace or span id: reported in `partial_success`.
    pub(crate) rejected: u64,
    /// Spans that are no agent, tool or model span: skipped.
    pub(crate) unmapped: u64,
    /// Spans whose event the v1 contract would refuse (an over-long id, say): skipped.
    pub(crate) invalid: u64,
}

fn order(e: &Event) -> (i64, u8, u64) {
    match e {
        Event::RunStarted(s) => (s.ts_ms, 0, 0),
        Event::Step(s) => (s.ts_ms, 1, s.step_index),
        Event::RunFinished(s) => (s.ts_ms, 2, 0),
    }
}

/// The request's spans as v1 messages; `key_project` (the API key's) wins over the resource's.
pub(crate) fn map_request(
    req: &ExportTraceServiceRequest,
    key_project: Option<&str>,
    default_project: &str,
) -> Mapped {
    let mut m = Mapped::default();
    let mut events = Vec::new();
    for rs in &req.resource_spans {
        let resource_project = rs
            .resource
            .as_ref()
            .and_then(|r| attrs::text(&r.attributes, PROJECT_ATTRIBUTE));
        let project = key_project
            .or(resource_project.as_deref())
            .unwrap_or(default_project);
        for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
            m.spans += 1;
            match mapping::events(project, span) {
                Ok(evs) => events.extend(evs),
                Err(mapping::Skip::InvalidIds) => m.rejected += 1,
                Err(mapping::Skip::Unmapped) => m.unmapped += 1,
            }
        }
    }
    events.sort_by_key(order);
    for e in &events {
        let bytes = match crate::contract::encode(e) {
            Ok(b) => b,
            Err(_) => {
                m.invalid += 1;
                continue;
            }
        };
        // What the worker would dead-letter is not sent: the exporter cannot fix it anyway.
        if let Err(why) = crate::contract::decode(&bytes) {
            tracing::debug!(error = %why, "ingest-otlp: span skipped");
            m.invalid += 1;
            continue;
        }
        m.messages.push((e.key().run_id.clone(), bytes));
    }
    m
}

impl Receiver {
    /// The project the request's API key names; `None` when no keys are configured (the spans
    /// name it). HTTP headers and gRPC metadata carry the key alike.
    fn key_project(&self, headers: &HeaderMap) -> Result<Option<Arc<str>>, OtlpError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        crate::ingest::authenticate(&self.keys, headers)
            .map(Some)
            .map_err(|_| OtlpError::Unauthorized)
    }

    async fn publish(&self, messages: Vec<(String, Vec<u8>)>) -> Result<(), OtlpError> {
        let mut acks = Vec::with_capacity(messages.len());
        for (key, payload) in messages {
            let (done, ack) = oneshot::channel();
            self.jobs
                .try_send(Job { key, payload, done })
                .map_err(|e| OtlpError::Busy(format!("publish queue: {e}")))?;
            acks.push(ack);
        }
        for ack in acks {
            ack.await
                .map_err(|_| OtlpError::Unavailable("publisher stopped".into()))?
                .map_err(OtlpError::Unavailable)?;
        }
        Ok(())
    }

    /// One export request, whichever transport brought it: mapped, published, and answered
    /// once the broker acknowledged every event.
    async fn export(
        &self,
        key_project: Option<&str>,
        req: &ExportTraceServiceRequest,
    ) -> Result<ExportTraceServiceResponse, OtlpError> {
        let m = map_request(req, key_project, &self.default_project);
        metrics::counter!("eddy_otlp_spans_total", "outcome" => "rejected").increment(m.rejected);
        metrics::counter!("eddy_otlp_spans_total", "outcome" => "unmapped").increment(m.unmapped);
        metrics::counter!("eddy_otlp_spans_total", "outcome" => "invalid").increment(m.invalid);
        metrics::counter!("eddy_otlp_spans_total", "outcome" => "received").increment(m.spans);
        let events = m.messages.len() as u64;
        self.publish(m.messages).await?;
        metrics::counter!("eddy_otlp_events_total").increment(events);
        let partial_success = (m.rejected > 0).then(|| ExportTracePartialSuccess {
            rejected_spans: i64::try_from(m.rejected).unwrap_or(i64::MAX),
            error_message: format!(
                "{} span(s) rejected: trace id must be 16 non-zero bytes, span id 8",
                m.rejected
            ),
        });
        Ok(ExportTraceServiceResponse { partial_success })
    }
}

/// One answered request in the metrics: `transport` is `http` or `grpc`, `answer` one of
/// `ok`, `bad_request`, `unauthorized`, `retry`, `error`.
fn record(transport: &'static str, answer: &'static str, started: Instant) {
    metrics::counter!("eddy_otlp_requests_total", "transport" => transport, "answer" => answer)
        .increment(1);
    metrics::histogram!("eddy_otlp_request_seconds", "transport" => transport)
        .record(started.elapsed().as_secs_f64());
}

/// A listener for `addr` (the setting `key` names it), or `None` when `addr` is empty.
async fn bind(key: &str, addr: &str) -> Result<Option<tokio::net::TcpListener>, OtlpError> {
    if addr.trim().is_empty() {
        return Ok(None);
    }
    let parsed: SocketAddr = addr
        .parse()
        .map_err(|_| OtlpError::Config(format!("{key} `{addr}`: expected host:port")))?;
    tokio::net::TcpListener::bind(parsed)
        .await
        .map(Some)
        .map_err(|source| OtlpError::Bind {
            addr: addr.to_string(),
            source,
        })
}

/// Serve until `shutdown` is cancelled; in-flight exports finish and their events are flushed.
/// Takes its own section (`otlp_*`, and the API keys it shares with ingest-http) and Kafka to
/// publish through. OTLP/HTTP listens on `otlp_addr`, OTLP/gRPC on `otlp_grpc_addr`; either
/// may be turned off with an empty address, not both.
pub async fn serve(
    kafka: KafkaConfig,
    cfg: IngestConfig,
    shutdown: CancellationToken,
) -> Result<(), OtlpError> {
    let keys = crate::ingest::key_table(&cfg)?;
    if cfg.otlp_default_project.trim().is_empty() {
        return Err(OtlpError::Config("otlp_default_project is empty".into()));
    }
    if cfg.otlp_addr.trim().is_empty() && cfg.otlp_grpc_addr.trim().is_empty() {
        return Err(OtlpError::Config(
            "otlp_addr and otlp_grpc_addr are both empty: set at least one".into(),
        ));
    }
    // Bound before Kafka is touched: a port in use fails the start at once.
    let http = bind("otlp_addr", &cfg.otlp_addr).await?;
    let grpc = bind("otlp_grpc_addr", &cfg.otlp_grpc_addr).await?;
    // Answer 503 well before an exporter's 10 s timeout when Kafka is unreachable.
    let (tx, publisher) = crate::ingest::start_publisher(&kafka, 8_000).await?;
    // Ready means accepting exports; ClickHouse is none of the receiver's business.
    let health = crate::daemon::admin_server(
        cfg.otlp_admin_addr.as_deref(),
        crate::daemon::Readiness::AtStart,
    )
    .await?;
    let local = |l: &Option<tokio::net::TcpListener>| {
        l.as_ref()
            .and_then(|l| l.local_addr().ok())
            .map_or_else(|| "off".to_string(), |a| a.to_string())
    };
    tracing::info!(
        http = %local(&http),
        grpc = %local(&grpc),
        topic = %kafka.topics.input,
        api_keys = keys.len(),
        default_project = %cfg.otlp_default_project,
        "ingest-otlp: OTLP traces receiver listening (HTTP: POST /v1/traces; gRPC: TraceService/Export)"
    );
    let rx = Arc::new(Receiver {
        keys,
        default_project: cfg.otlp_default_project.clone(),
        jobs: tx,
    });
    let stop = shutdown.clone();
    let draining = health.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        draining.set_draining();
    });
    let http = http.map(|l| {
        let served = http::serve(l, rx.clone(), shutdown.clone());
        tokio::spawn(stop_all_on_error(served, shutdown.clone()))
    });
    let grpc = grpc.map(|l| {
        let served = grpc::serve(l, rx.clone(), shutdown.clone());
        tokio::spawn(stop_all_on_error(served, shutdown.clone()))
    });
    // The listeners hold the last senders: once both stopped, the publisher drains and exits.
    drop(rx);
    let mut failed = None;
    for task in [http, grpc].into_iter().flatten() {
        let result = task
            .await
            .unwrap_or_else(|e| Err(OtlpError::Internal(format!("listener task: {e}"))));
        if let Err(e) = result {
            failed.get_or_insert(e);
        }
    }
    let _ = publisher.await;
    tracing::info!("ingest-otlp stopped");
    failed.map_or(Ok(()), Err)
}

/// One transport failing stops the other too: a half-served receiver would look healthy while
/// the exporters of the other kind fail.
async fn stop_all_on_error(
    served: impl std::future::Future<Output = Result<(), OtlpError>>,
    shutdown: CancellationToken,
) -> Result<(), OtlpError> {
    let result = served.await;
    if result.is_err() {
        shutdown.cancel();
    }
    result
}

#[cfg(test)]
mod conventions_tests;
#[cfg(test)]
mod grpc_tests;
#[cfg(test)]
mod tests;
