//! `eddy ingest-http`: keelwave's ingest API for agent runs, in front of the input topic.
//!
//! An agent instrumented with the `keelwave` SDK switches to eddy by changing its `endpoint`.
//! Routes, key formats, status codes, envelopes and validation are keelwave's server's
//! (github.com/keelwave/keelwave: `cmd/api/agent_runs.go`, `agent_steps.go`, `json.go`,
//! `middleware.go`), as the `keelwave` 0.1.1 SDK on PyPI sends them:
//!
//! | route | success | body |
//! |---|---|---|
//! | `POST /v1/ingest/agent/runs` | 201 | `{"data":{"id":<uuid v7>,"timestamp":<RFC 3339>}}` |
//! | `POST /v1/ingest/agent/steps` | 201 | same |
//! | `POST /v1/ingest/agent/runs/{run_id}/finish` | 204 | empty |
//! | `GET /v1/health` | 200 | `{"data":{"status":"ok",...}}` |
//! | `GET /v1/ingest/agent/runs/{run_id}/verdict` | 200 | eddy's own: the run's verdict (see `verdict.rs`) |
//! | `GET /v1/ingest/agent/runs/{run_id}/signals` | 200 | eddy's own: server-sent events |
//!
//! Errors are `{"error":"..."}`: 400 (unknown field, bad JSON, body over 1 MiB, validation),
//! 401 (`unauthorized`), 404 (`not found`: finish with the wrong timestamp), 503 with
//! `Retry-After: 1` when Kafka does not take the event (the SDK raises `KeelwaveBufferFull`).
//!
//! Every accepted request becomes one v1 event, keyed by run id, and is answered only after the
//! broker acknowledged it: a 201/204 means the event is durable. Requests are group-committed
//! (one flush for all requests in flight), so this costs latency, not throughput.
//! Not reproduced: keelwave's rate limits (429) and its other ingest routes (`/v1/ingest/ai`,
//! `/events`, `/metrics`), which have no v1 equivalent.
mod metrics;
pub mod otlp;
mod runs;
mod verdict;
mod wire;

pub(crate) use runs::{format_uuid, uuid_v7, RUN_TABLE_CAPACITY};

use crate::auth::SecretTable;
use crate::config::{IngestConfig, KafkaConfig};
use crate::contract::{ReportedTotals, RunStatus, TerminationReason, WireEvent};
use crate::emit::{EmitError, Producer};
use crate::verdict::VerdictConfig;
use crate::verdict::{VerdictTable, Verdicts};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use runs::{FinishCheck, RunInfo, RunTable};
use serde::Serialize;
use serde_json::value::RawValue;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use wire::Violations;

/// keelwave's `maxRequestBytes`.
pub(crate) const MAX_BODY_BYTES: usize = 1 << 20;
/// Requests waiting for the broker at most (keelwave's `BATCH_QUEUE_DEPTH`); past it, 503.
pub(crate) const QUEUE_DEPTH: usize = 10_000;

/// Why an ingest request failed, or the ingest server could not run; the variant picks the
/// HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// 400 with keelwave's message.
    #[error("{0}")]
    BadRequest(String),
    /// 401: no valid API key.
    #[error("unauthorized")]
    Unauthorized,
    /// 404: no such run or route.
    #[error("not found")]
    NotFound,
    /// 503 + Retry-After: the signals topic is still being read back after a start.
    #[error("verdicts are loading")]
    Loading,
    /// 503 + Retry-After: the event was not acknowledged by Kafka.
    #[error("event not acknowledged by Kafka: {0}")]
    Unavailable(String),
    /// 500: a bug or an unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
    /// The ingest settings are unusable.
    #[error("invalid ingest configuration: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address tried.
        addr: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The producer failed.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// The signals topic could not be read.
    #[error(transparent)]
    Verdict(#[from] crate::verdict::VerdictError),
    /// The admin server failed.
    #[error(transparent)]
    Admin(#[from] crate::admin::AdminError),
    /// The HTTP server stopped with an error.
    #[error("ingest server failed: {0}")]
    Serve(#[source] std::io::Error),
}

fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    // Go's json.Encoder ends the document with a newline.
    let mut bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    let mut r = (status, bytes).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_body(status: StatusCode, msg: &str) -> Response {
    json_response(status, &serde_json::json!({ "error": msg }))
}

impl IntoResponse for IngestError {
    fn into_response(self) -> Response {
        match &self {
            IngestError::BadRequest(m) => error_body(StatusCode::BAD_REQUEST, m),
            IngestError::Unauthorized => error_body(StatusCode::UNAUTHORIZED, "unauthorized"),
            IngestError::NotFound => error_body(StatusCode::NOT_FOUND, "not found"),
            IngestError::Loading => {
                let mut r = error_body(StatusCode::SERVICE_UNAVAILABLE, "verdicts loading, retry");
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            }
            IngestError::Unavailable(why) => {
                tracing::warn!(error = %why, "ingest: answering 503");
                let mut r =
                    error_body(StatusCode::SERVICE_UNAVAILABLE, "ingest buffer full, retry");
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            }
            other => {
                tracing::error!(error = %other, "ingest: internal error");
                error_body(StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
            }
        }
    }
}

impl IngestError {
    /// The `answer` label of a failed request in the route metrics.
    fn metric_label(&self) -> &'static str {
        match self {
            IngestError::BadRequest(_) => "bad_request",
            IngestError::Unauthorized => "unauthorized",
            IngestError::NotFound => "not_found",
            IngestError::Loading | IngestError::Unavailable(_) => "unavailable",
            _ => "error",
        }
    }
}

/// One message for the publisher; `done` gets the broker's answer.
pub(crate) struct Job {
    pub(crate) key: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) done: oneshot::Sender<Result<(), String>>,
}

/// keelwave's `extractKey` + `auth.Parse` + lookup: `Authorization: Bearer <k>`,
/// `Authorization: <k>` or `X-API-Key: <k>`; trimmed, must start with `kw_`.
pub(crate) fn authenticate(
    keys: &SecretTable<Arc<str>>,
    headers: &HeaderMap,
) -> Result<Arc<str>, IngestError> {
    let header_str = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default()
    };
    let auth = header_str("authorization");
    let raw = if !auth.is_empty() {
        match auth.strip_prefix("Bearer ") {
            Some(k) => k.to_string(),
            None => auth,
        }
    } else {
        header_str("x-api-key")
    };
    let key = raw.trim();
    if key.is_empty() || !key.starts_with("kw_") {
        return Err(IngestError::Unauthorized);
    }
    keys.find(key).cloned().ok_or(IngestError::Unauthorized)
}

struct AppState {
    /// Key → project id, as digests: the plaintext keys are not kept (keelwave stores hashes
    /// too).
    keys: SecretTable<Arc<str>>,
    runs: Mutex<RunTable>,
    jobs: mpsc::Sender<Job>,
    /// Run → strongest signal, read back from the output topic.
    verdicts: Arc<Verdicts>,
    /// Cancelled at shutdown: open signal streams end, so the graceful shutdown is not held up.
    stop: CancellationToken,
}

impl AppState {
    fn runs(&self) -> std::sync::MutexGuard<'_, RunTable> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<str>, IngestError> {
        authenticate(&self.keys, headers)
    }

    /// Produce one event and wait for the broker's acknowledgement.
    async fn publish(&self, run_id: &str, event: &WireEvent<'_>) -> Result<(), IngestError> {
        let payload =
            serde_json::to_vec(event).map_err(|e| IngestError::Internal(e.to_string()))?;
        let (done, ack) = oneshot::channel();
        self.jobs
            .try_send(Job {
                key: run_id.to_string(),
                payload,
                done,
            })
            .map_err(|e| IngestError::Unavailable(format!("publish queue: {e}")))?;
        ack.await
            .map_err(|_| IngestError::Unavailable("publisher stopped".into()))?
            .map_err(IngestError::Unavailable)
    }
}

/// One of the contract's enums from its wire name.
fn parse_enum<T: serde::de::DeserializeOwned>(name: &str) -> Result<T, IngestError> {
    serde_json::from_value(serde_json::Value::from(name))
        .map_err(|e| IngestError::Internal(format!("`{name}`: {e}")))
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

fn created(id: u128, at: OffsetDateTime) -> Response {
    json_response(
        StatusCode::CREATED,
        &serde_json::json!({ "data": { "id": format_uuid(id), "timestamp": rfc3339(at) } }),
    )
}

async fn read_body(body: Body) -> Result<axum::body::Bytes, IngestError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| IngestError::BadRequest("http: request body too large".into()))
}

const RUN_START_FIELDS: &[&str] = &["timestamp", "agent_name", "input", "metadata"];

async fn run_start(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, IngestError> {
    let project = st.authenticate(&headers)?;
    let body = read_body(body).await?;
    let f = wire::decode(&body, "ingestAgentRunStartPayload", RUN_START_FIELDS)?;
    let timestamp = f.time("timestamp")?;
    let agent_name = f.string("agent_name")?.unwrap_or_default();
    let input = f.string("input")?;
    let metadata = f.raw("metadata");
    let mut v = Violations::new("ingestAgentRunStartPayload");
    if v.check(!agent_name.is_empty(), "AgentName", "required") {
        v.max_runes(Some(&agent_name), 200, "AgentName");
    }
    v.max_runes(input.as_deref(), 10_000, "Input");
    v.finish()?;

    let started = timestamp.map_or_else(runs::now_micros, runs::truncate_micros);
    let id = uuid_v7(started);
    let run_id = format_uuid(id);
    let event = WireEvent {
        v: 1,
        kind: "run_started",
        project_id: &project,
        run_id: &run_id,
        ts: rfc3339(started),
        agent_name: Some(&agent_name),
        input: input.as_deref(),
        metadata,
        ..WireEvent::default()
    };
    st.publish(&run_id, &event).await?;
    st.runs().insert(
        id,
        RunInfo {
            project,
            agent_name,
            started,
            finished: false,
        },
    );
    Ok(created(id, started))
}

const STEP_FIELDS: &[&str] = &[
    "timestamp",
    "agent_run_id",
    "step_index",
    "step_type",
    "content",
    "tool_name",
    "tool_input",
    "tool_output",
    "tool_success",
    "tool_latency_ms",
    "tokens",
    "cost_usd",
    "metadata",
];

/// keelwave's step types, and eddy's own `steer`: an agent's report that it handed the model a
/// verdict's `advice`, with the verdict's `event_id` as `metadata.signal_event_id`.
const STEP_TYPES: &[&str] = &[
    "think",
    "tool_call",
    "tool_result",
    "replan",
    crate::contract::input::STEER_STEP_TYPE,
];

/// The signal a `steer` step answers: `metadata.signal_event_id` (keelwave's SDK sends a step's
/// fields and nothing else, and its metadata passes through), when it is a usable id.
fn steered_signal(step_type: &str, metadata: Option<&RawValue>) -> Option<String> {
    if step_type != crate::contract::input::STEER_STEP_TYPE {
        return None;
    }
    let m: serde_json::Value = serde_json::from_str(metadata?.get()).ok()?;
    let id = m.get("signal_event_id")?.as_str()?;
    (!id.is_empty() && id.len() <= crate::contract::input::MAX_ID_BYTES).then(|| id.to_string())
}

async fn step(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, IngestError> {
    let project = st.authenticate(&headers)?;
    let body = read_body(body).await?;
    let f = wire::decode(&body, "ingestAgentStepPayload", STEP_FIELDS)?;
    let timestamp = f.time("timestamp")?;
    let run = f.uuid("agent_run_id")?.unwrap_or(0);
    let step_index = f.int("step_index")?.unwrap_or(0);
    let step_type = f.string("step_type")?.unwrap_or_default();
    let content = f.string("content")?;
    let tool_name = f.string("tool_name")?;
    let tool_input = f.raw("tool_input");
    let tool_output = f.raw("tool_output");
    let tool_success = f.boolean("tool_success")?;
    let tool_latency_ms = f.int("tool_latency_ms")?;
    let tokens = f.int("tokens")?;
    let cost_usd = f.float("cost_usd")?;
    let metadata = f.raw("metadata");
    let mut v = Violations::new("ingestAgentStepPayload");
    v.check(run != 0, "AgentRunID", "required");
    v.check(step_index >= 0, "StepIndex", "gte");
    if v.check(!step_type.is_empty(), "StepType", "required") {
        v.check(
            STEP_TYPES.contains(&step_type.as_str()),
            "StepType",
            "oneof",
        );
    }
    v.max_runes(content.as_deref(), 100_000, "Content");
    v.max_runes(tool_name.as_deref(), 200, "ToolName");
    v.gte0_opt_int(tool_latency_ms, "ToolLatencyMs");
    v.gte0_opt_int(tokens, "Tokens");
    if let Some(c) = cost_usd {
        v.check(c >= 0.0, "CostUSD", "gte");
    }
    v.finish()?;

    // keelwave accepts a step for any run id (it does not look the run up); so does the bridge.
    let at = timestamp.unwrap_or_else(OffsetDateTime::now_utc);
    let run_id = format_uuid(run);
    let steered = steered_signal(&step_type, metadata);
    let event = WireEvent {
        v: 1,
        kind: "step",
        project_id: &project,
        run_id: &run_id,
        ts: rfc3339(at),
        // Checked non-negative above.
        step_index: u64::try_from(step_index).ok(),
        step_type: Some(&step_type),
        content: content.as_deref(),
        tool_name: tool_name.as_deref(),
        tool_input,
        tool_output,
        tool_success,
        tool_latency_ms: tool_latency_ms.map(|ms| ms as f64),
        tokens: tokens.and_then(|t| u64::try_from(t).ok()),
        cost_usd,
        metadata,
        signal_event_id: steered.as_deref(),
        ..WireEvent::default()
    };
    st.publish(&run_id, &event).await?;
    Ok(created(uuid_v7(OffsetDateTime::now_utc()), at))
}

const FINISH_FIELDS: &[&str] = &[
    "timestamp",
    "status",
    "termination_reason",
    "loop_detected",
    "loop_step_index",
    "total_steps",
    "total_tokens",
    "total_cost_usd",
    "duration_ms",
    "output",
];

const TERMINATION_REASONS: &[&str] = &[
    "clean",
    "max_steps_reached",
    "context_limit",
    "error",
    "loop_detected",
    "timeout",
];

async fn finish(
    State(st): State<Arc<AppState>>,
    Path(run_param): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, IngestError> {
    let project = st.authenticate(&headers)?;
    let run = wire::parse_uuid(&run_param).map_err(IngestError::BadRequest)?;
    let body = read_body(body).await?;
    let f = wire::decode(&body, "ingestAgentRunFinishPayload", FINISH_FIELDS)?;
    let timestamp = f.time("timestamp")?;
    let status = f.string("status")?.unwrap_or_default();
    let termination_reason = f.string("termination_reason")?;
    let loop_detected = f.boolean("loop_detected")?.unwrap_or(false);
    let loop_step_index = f.int("loop_step_index")?;
    let total_steps = f.int("total_steps")?.unwrap_or(0);
    let total_tokens = f.int("total_tokens")?.unwrap_or(0);
    let total_cost_usd = f.float("total_cost_usd")?;
    let duration_ms = f.int("duration_ms")?;
    let output = f.string("output")?;
    let mut v = Violations::new("ingestAgentRunFinishPayload");
    // `required` on time.Time: the zero time (0001-01-01T00:00:00Z) counts as missing.
    v.check(
        timestamp.is_some_and(|t| t.unix_timestamp() != -62_135_596_800 || t.nanosecond() != 0),
        "Timestamp",
        "required",
    );
    if v.check(!status.is_empty(), "Status", "required") {
        v.check(
            matches!(status.as_str(), "completed" | "failed"),
            "Status",
            "oneof",
        );
    }
    if let Some(r) = &termination_reason {
        v.check(
            TERMINATION_REASONS.contains(&r.as_str()),
            "TerminationReason",
            "oneof",
        );
    }
    v.gte0_opt_int(loop_step_index, "LoopStepIndex");
    v.check(total_steps >= 0, "TotalSteps", "gte");
    v.check(total_tokens >= 0, "TotalTokens", "gte");
    if let Some(c) = total_cost_usd {
        v.check(c >= 0.0, "TotalCostUSD", "gte");
    }
    v.gte0_opt_int(duration_ms, "DurationMs");
    v.max_runes(output.as_deref(), 100_000, "Output");
    v.finish()?;
    // Both checked against the accepted values above, so both parse.
    let status: RunStatus = parse_enum(&status)?;
    let termination_reason: Option<TerminationReason> =
        termination_reason.as_deref().map(parse_enum).transpose()?;
    let Some(timestamp) = timestamp else {
        return Err(IngestError::Internal("validated timestamp missing".into()));
    };

    let (check, agent) = {
        let table = st.runs();
        let agent = table.get(run).map(|r| r.agent_name.clone());
        (table.finish_check(run, &project, timestamp), agent)
    };
    tracing::debug!(run = %format_uuid(run), agent = ?agent, ?check, "finish");
    match check {
        FinishCheck::NotFound => return Err(IngestError::NotFound),
        FinishCheck::AlreadyFinished => return Ok(StatusCode::NO_CONTENT.into_response()),
        FinishCheck::Open | FinishCheck::Forgotten => {}
    }
    let run_id = format_uuid(run);
    let nonneg = |x: i64| u64::try_from(x).ok();
    let totals = ReportedTotals {
        total_steps: nonneg(total_steps),
        total_tokens: nonneg(total_tokens),
        total_cost_usd,
        duration_ms: duration_ms.and_then(nonneg),
    };
    let event = WireEvent {
        v: 1,
        kind: "run_finished",
        project_id: &project,
        run_id: &run_id,
        // The finish call echoes the *start* timestamp; the run ends now (keelwave's finished_at).
        ts: rfc3339(OffsetDateTime::now_utc()),
        status: Some(status),
        termination_reason,
        output: output.as_deref(),
        reported_loop_detected: Some(loop_detected),
        reported_loop_step_index: loop_step_index.and_then(nonneg),
        reported_totals: Some(&totals),
        ..WireEvent::default()
    };
    st.publish(&run_id, &event).await?;
    st.runs().mark_finished(run);
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn health() -> Response {
    json_response(
        StatusCode::OK,
        &serde_json::json!({"data": {
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "env": "eddy",
        }}),
    )
}

/// The input topic's writer of both bridges (this one and `otlp`): the topics made sure of,
/// then the [`publisher`] task on a producer whose undelivered events fail after
/// `message_timeout_ms` (unless the operator set it), so a request is answered 503 before its
/// client gives up. Returns where to send jobs; the task ends once every sender is gone.
pub(crate) async fn start_publisher(
    kafka: &KafkaConfig,
    message_timeout_ms: u32,
) -> Result<(mpsc::Sender<Job>, tokio::task::JoinHandle<()>), IngestError> {
    crate::source::ensure_topics(kafka)
        .await
        .map_err(|e| IngestError::Internal(format!("cannot create topics: {e}")))?;
    let mut pcfg = kafka.clone();
    pcfg.producer
        .entry("message.timeout.ms".into())
        .or_insert_with(|| message_timeout_ms.to_string());
    let emitter = Producer::plain(&pcfg)?;
    let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
    let task = tokio::spawn(publisher(emitter, kafka.topics.input.clone(), rx));
    Ok((tx, task))
}

/// Group commit: take every request waiting, hand them all to librdkafka, flush once, and
/// answer each. A failed flush fails the whole group (the clients retry; eddy counts a step
/// seen twice as a redelivery, never as a repeat).
pub(crate) async fn publisher(mut emitter: Producer, topic: String, mut jobs: mpsc::Receiver<Job>) {
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < QUEUE_DEPTH {
            match jobs.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let mut sent = Vec::with_capacity(batch.len());
        for job in batch {
            match emitter.send_raw(&topic, job.key.as_bytes(), &job.payload) {
                Ok(()) => sent.push(job.done),
                Err(e) => {
                    let _ = job.done.send(Err(e.to_string()));
                }
            }
        }
        let result = emitter.flush().await.map(|_| ()).map_err(|e| e.to_string());
        for done in sent {
            let _ = done.send(result.clone());
        }
    }
}

pub(crate) fn key_table(cfg: &IngestConfig) -> Result<SecretTable<Arc<str>>, IngestError> {
    let mut keys = Vec::new();
    for (n, (key, project)) in cfg.api_keys.iter().enumerate() {
        // Never echo a key: name it by position only.
        let key = key.trim();
        if !key.starts_with("kw_") {
            return Err(IngestError::Config(format!(
                "ingest_api_keys: key #{} does not start with kw_ (keelwave's key format)",
                n + 1
            )));
        }
        if project.trim().is_empty() {
            return Err(IngestError::Config(format!(
                "ingest_api_keys: key #{} maps to an empty project id",
                n + 1
            )));
        }
        keys.push((key.to_string(), Arc::from(project.as_str())));
    }
    Ok(SecretTable::new(keys))
}

/// The router alone (tests drive it without a socket).
fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/ingest/agent/runs", post(run_start))
        .route("/v1/ingest/agent/steps", post(step))
        .route("/v1/ingest/agent/runs/{run_id}/finish", post(finish))
        .route(
            "/v1/ingest/agent/runs/{run_id}/verdict",
            get(verdict::verdict),
        )
        .route(
            "/v1/ingest/agent/runs/{run_id}/signals",
            get(verdict::signals),
        )
        .route("/v1/ingest/agent/signals", get(verdict::project_signals))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(metrics::record))
        .with_state(state)
}

/// Serve until `shutdown` is cancelled; in-flight requests finish and their events are flushed.
/// Takes its own section, Kafka to publish through and read the signals from, and the verdict
/// table's settings.
pub async fn serve(
    kafka: KafkaConfig,
    cfg: IngestConfig,
    verdicts: VerdictConfig,
    shutdown: CancellationToken,
) -> Result<(), IngestError> {
    let keys = key_table(&cfg)?;
    if keys.is_empty() {
        tracing::warn!("ingest_api_keys is empty: every request will be answered 401");
    }
    // Answer 503 well before the SDK's 30 s read timeout when Kafka is unreachable.
    let (tx, publisher) = start_publisher(&kafka, 20_000).await?;
    let projects: std::collections::BTreeSet<&str> =
        cfg.api_keys.values().map(String::as_str).collect();
    let lookback = std::time::Duration::from_millis(verdicts.lookback_ms);
    let verdicts =
        Verdicts::with_journal(VerdictTable::new(verdicts), crate::verdict::JOURNAL_UPDATES);
    let reader = crate::verdict::consumer::spawn(
        crate::verdict::consumer::Subscription {
            props: kafka.client_props(),
            topic: kafka.topics.output.clone(),
            lookback,
        },
        verdicts.clone(),
        shutdown.child_token(),
    )?;
    let state = Arc::new(AppState {
        keys,
        runs: Mutex::new(RunTable::new(RUN_TABLE_CAPACITY)),
        jobs: tx,
        verdicts,
        stop: shutdown.child_token(),
    });
    let addr: SocketAddr = cfg
        .addr
        .parse()
        .map_err(|_| IngestError::Config(format!("ingest_addr `{}`", cfg.addr)))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| IngestError::Bind {
            addr: cfg.addr.clone(),
            source,
        })?;
    let bound = listener.local_addr().map_err(IngestError::Serve)?;
    // Ready means accepting requests; ClickHouse is none of the bridge's business.
    let health =
        crate::daemon::admin_server(cfg.admin_addr.as_deref(), crate::daemon::Readiness::AtStart)
            .await?;
    tracing::info!(
        addr = %bound,
        topic = %kafka.topics.input,
        signals = %kafka.topics.output,
        api_keys = cfg.api_keys.len(),
        projects = ?projects,
        "ingest-http: keelwave-compatible ingest API listening"
    );
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            shutdown.cancelled().await;
            health.set_draining();
        })
        .await
        .map_err(IngestError::Serve)?;
    // The router (and with it the last sender) is gone: the publisher drains and exits.
    let _ = publisher.await;
    reader.abort();
    tracing::info!("ingest-http stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_never_echoed() {
        let mut cfg = IngestConfig::default();
        cfg.api_keys.insert("sk_live_secret123".into(), "p".into());
        let err = key_table(&cfg).unwrap_err().to_string();
        assert!(
            err.contains("key #1") && !err.contains("secret123"),
            "{err}"
        );
        let mut cfg = crate::config::Config::default();
        cfg.ingest
            .api_keys
            .insert("kw_TOPSECRETKEY".into(), "proj-a".into());
        assert_eq!(key_table(&cfg.ingest).unwrap().len(), 1);
        let shown = format!("{} {cfg:?}", cfg.redacted());
        assert!(!shown.contains("TOPSECRETKEY"), "{shown}");
        assert!(shown.contains("proj-a"), "{shown}");
    }

    fn state() -> AppState {
        let mut cfg = IngestConfig::default();
        cfg.api_keys.insert("kw_GOOD".into(), "proj".into());
        let (tx, _rx) = mpsc::channel(1);
        AppState {
            keys: key_table(&cfg).unwrap(),
            runs: Mutex::new(RunTable::new(10)),
            jobs: tx,
            verdicts: Verdicts::with_journal(
                VerdictTable::new(Default::default()),
                crate::verdict::JOURNAL_UPDATES,
            ),
            stop: CancellationToken::new(),
        }
    }

    #[test]
    fn accepts_keelwaves_three_key_spellings() {
        let st = state();
        let h = |pairs: &[(&'static str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            st.authenticate(&m).map(|p| p.to_string())
        };
        assert_eq!(h(&[("authorization", "Bearer kw_GOOD")]).unwrap(), "proj");
        assert_eq!(h(&[("authorization", "kw_GOOD")]).unwrap(), "proj");
        assert_eq!(h(&[("authorization", "Bearer  kw_GOOD ")]).unwrap(), "proj");
        assert_eq!(h(&[("x-api-key", "kw_GOOD")]).unwrap(), "proj");
        assert!(h(&[("authorization", "bearer kw_GOOD")]).is_err());
        assert!(h(&[("authorization", "Bearer kw_BAD")]).is_err());
        assert!(h(&[("x-api-key", "GOOD")]).is_err());
        assert!(h(&[]).is_err());
        // A non-empty Authorization wins over X-API-Key, as in keelwave.
        assert!(h(&[("authorization", "nope"), ("x-api-key", "kw_GOOD")]).is_err());
    }

    #[test]
    fn a_steer_step_names_its_signal_from_metadata() {
        fn raw(t: &str) -> &RawValue {
            serde_json::from_str(t).unwrap()
        }
        let meta = raw(r#"{"signal_event_id":"0123456789abcdef0123456789abcdef","x":1}"#);
        assert_eq!(
            steered_signal("steer", Some(meta)).as_deref(),
            Some("0123456789abcdef0123456789abcdef")
        );
        assert_eq!(steered_signal("think", Some(meta)), None);
        assert_eq!(steered_signal("steer", None), None);
        assert_eq!(
            steered_signal("steer", Some(raw(r#"{"signal_event_id":7}"#))),
            None
        );
        assert_eq!(steered_signal("steer", Some(raw("[1]"))), None);
        assert!(STEP_TYPES.contains(&"steer") && !STEP_TYPES.contains(&"span"));
    }

    #[test]
    fn response_timestamps_round_trip() {
        let t = runs::now_micros();
        let s = rfc3339(t);
        let back = OffsetDateTime::parse(&s, &Rfc3339).unwrap();
        assert_eq!(back, t);
    }
}
