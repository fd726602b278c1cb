//! `eddy ingest-otlp`: an OTLP/HTTP traces receiver in front of the input topic.
//!
//! Agents already traced with OpenTelemetry (the GenAI semantic conventions, or OpenInference's)
//! point their exporter at `POST /v1/traces`; agent, tool and model spans become v1 events keyed
//! by run id (the trace id). `mapping.rs` holds the rules, docs/otlp.md the table.
//!
//! Answers are a collector's: 200 with an `ExportTraceServiceResponse` (its `partial_success`
//! counts spans rejected for invalid ids), 400 with the reason for a body that is not an export
//! request, 413/415 for size and media type, 429 or 503 with `Retry-After` when Kafka does not
//! take the events. A 200 is sent only after the broker acknowledged every event of the batch,
//! through the same group-committing publisher as `ingest-http`.
mod attrs;
pub mod decode;
mod encoding;
mod error;
pub mod mapping;

pub use error::OtlpError;

use crate::config::{IngestConfig, KafkaConfig};
use crate::contract::Event;
use crate::emit::Emitter;
use crate::ingest::{Job, MAX_BODY_BYTES, QUEUE_DEPTH};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use decode::Encoding;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A gzip body may expand to this much at most (the wire limit is `MAX_BODY_BYTES`, as for
/// `ingest-http`).
pub const MAX_DECODED_BYTES: usize = 16 * MAX_BODY_BYTES;

/// The resource attribute naming a span's project when no API key does.
pub const PROJECT_ATTRIBUTE: &str = "eddy.project.id";

struct Receiver {
    /// sha256(key) → project; empty: no key asked, the project comes from the spans.
    keys: HashMap<[u8; 32], Arc<str>>,
    default_project: String,
    jobs: mpsc::Sender<Job>,
}

/// What one export request turned into.
#[derive(Debug, Default, PartialEq)]
pub struct Mapped {
    /// (Kafka key, v1 payload), in a fixed order: by event time, lifecycle around the steps.
    pub messages: Vec<(String, Vec<u8>)>,
    pub spans: u64,
    /// Spans with an invalid trace or span id: reported in `partial_success`.
    pub rejected: u64,
    /// Spans that are no agent, tool or model span: skipped.
    pub unmapped: u64,
    /// Spans whose event the v1 contract would refuse (an over-long id, say): skipped.
    pub invalid: u64,
}

fn order(e: &Event) -> (i64, u8, u64) {
    match e {
        Event::RunStarted(s) => (s.ts_ms, 0, 0),
        Event::Step(s) => (s.ts_ms, 1, s.step_index),
        Event::RunFinished(s) => (s.ts_ms, 2, 0),
    }
}

/// The request's spans as v1 messages; `key_project` (the API key's) wins over the resource's.
pub fn map_request(
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

    async fn export(
        &self,
        headers: &HeaderMap,
        body: Body,
        enc: Encoding,
    ) -> Result<Response, OtlpError> {
        let key_project = if self.keys.is_empty() {
            None
        } else {
            Some(
                crate::ingest::authenticate(&self.keys, headers)
                    .map_err(|_| OtlpError::Unauthorized)?,
            )
        };
        let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| OtlpError::TooLarge(MAX_BODY_BYTES))?;
        let encoding = headers
            .get(header::CONTENT_ENCODING)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let bytes = decode::decompress(&body, encoding.as_deref(), MAX_DECODED_BYTES)?;
        let req = decode::decode(&bytes, enc)?;
        let m = map_request(&req, key_project.as_deref(), &self.default_project);
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
        let mut r = (
            StatusCode::OK,
            decode::encode(&ExportTraceServiceResponse { partial_success }, enc),
        )
            .into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(enc.content_type()),
        );
        Ok(r)
    }
}

async fn traces(State(rx): State<Arc<Receiver>>, headers: HeaderMap, body: Body) -> Response {
    let started = std::time::Instant::now();
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let result = match Encoding::from_content_type(ct) {
        Some(enc) => rx.export(&headers, body, enc).await.map_err(|e| (e, enc)),
        None => {
            let e = OtlpError::UnsupportedMediaType(ct.unwrap_or_default().to_string());
            Err((e, Encoding::Json))
        }
    };
    let (resp, answer) = match result {
        Ok(r) => (r, "ok"),
        Err((e, enc)) => (e.response(enc), e.label()),
    };
    metrics::counter!("eddy_otlp_requests_total", "answer" => answer).increment(1);
    metrics::histogram!("eddy_otlp_request_seconds").record(started.elapsed().as_secs_f64());
    resp
}

fn router(rx: Arc<Receiver>) -> Router {
    Router::new()
        .route("/v1/traces", post(traces))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(rx)
}

/// Serve until `shutdown` is cancelled; in-flight exports finish and their events are flushed.
/// Takes its own section (`otlp_*`, and the API keys it shares with ingest-http) and Kafka to
/// publish through.
pub async fn serve(
    kafka: KafkaConfig,
    cfg: IngestConfig,
    shutdown: CancellationToken,
) -> Result<(), OtlpError> {
    let keys = crate::ingest::key_table(&cfg)?;
    if cfg.otlp_default_project.trim().is_empty() {
        return Err(OtlpError::Config("otlp_default_project is empty".into()));
    }
    crate::source::ensure_topics(&kafka)
        .await
        .map_err(|e| OtlpError::Internal(format!("cannot create topics: {e}")))?;
    // Answer 503 well before an exporter's 10 s timeout when Kafka is unreachable.
    let mut pcfg = kafka.clone();
    pcfg.producer
        .entry("message.timeout.ms".into())
        .or_insert_with(|| "8000".into());
    let emitter = Emitter::plain(&pcfg)?;
    let (tx, jobs) = mpsc::channel(QUEUE_DEPTH);
    let publisher = tokio::spawn(crate::ingest::publisher(
        emitter,
        kafka.topics.input.clone(),
        jobs,
    ));
    let addr: SocketAddr = cfg
        .otlp_addr
        .parse()
        .map_err(|_| OtlpError::Config(format!("otlp_addr `{}`", cfg.otlp_addr)))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| OtlpError::Bind {
            addr: cfg.otlp_addr.clone(),
            source,
        })?;
    let bound = listener.local_addr().map_err(OtlpError::Serve)?;
    let health = Arc::new(crate::admin::Health::default());
    if let Some(admin) = cfg.otlp_admin_addr.as_deref().filter(|a| !a.is_empty()) {
        // Ready means accepting exports; ClickHouse is none of the receiver's business.
        health.set_consuming(true);
        health.set_clickhouse_ok(true);
        crate::admin::serve(admin, health.clone()).await?;
    }
    tracing::info!(
        addr = %bound,
        topic = %kafka.topics.input,
        api_keys = keys.len(),
        default_project = %cfg.otlp_default_project,
        "ingest-otlp: OTLP/HTTP traces receiver listening on /v1/traces"
    );
    let rx = Arc::new(Receiver {
        keys,
        default_project: cfg.otlp_default_project.clone(),
        jobs: tx,
    });
    axum::serve(listener, router(rx))
        .with_graceful_shutdown(async move {
            shutdown.cancelled().await;
            health.set_draining();
        })
        .await
        .map_err(OtlpError::Serve)?;
    let _ = publisher.await;
    tracing::info!("ingest-otlp stopped");
    Ok(())
}

#[cfg(test)]
mod tests;
