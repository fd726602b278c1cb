//! The verdict routes: an agent asks, between steps, whether eddy wants it stopped.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/ingest/agent/runs/{run_id}/verdict` | 200 `{"data":{"run_id","verdict":<signal>\|null,"signals":n,"finished":bool}}` |
//! | `GET /v1/ingest/agent/runs/{run_id}/signals` | 200 `text/event-stream`: `event: signal` per distinct signal (the strongest so far first), `event: run_terminated` at the end |
//!
//! The verdict is the run's strongest signal (severity, then the earliest step), with its
//! detector, pattern, step indices and evidence, exactly as the worker published it. Both take
//! `?min_severity=info|warn|alert|stop` (default info): weaker signals are not a verdict and
//! are not pushed, so an agent asking with `stop` stops on any verdict it gets.
//! Same keys as the ingest routes; a key reads only its project's runs: a run this bridge knows
//! to be another project's is 404, and any other lookup is made within the key's project, so
//! another project's verdict is never found. A run this replica has no verdict for answers
//! `"verdict":null` (it may have been started through another replica). Until the start-up read
//! of the signals topic has caught up, `/verdict` answers 503 with `Retry-After: 1`.
use super::{json_response, AppState, IngestError};
use crate::contract::{RunKey, Severity, Signal};
use crate::verdict::{RunVerdict, Update};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

/// The longest run id looked up (the input contract's limit for ids).
const MAX_RUN_ID_BYTES: usize = crate::contract::input::MAX_ID_BYTES;

impl AppState {
    /// The run `run_id` of the caller's project, or 404 when this bridge started it for
    /// another project.
    fn scoped_run(&self, project: &str, run_id: &str) -> Result<RunKey, IngestError> {
        if run_id.is_empty() || run_id.len() > MAX_RUN_ID_BYTES {
            return Err(IngestError::NotFound);
        }
        if let Ok(id) = super::wire::parse_uuid(run_id) {
            if self.runs().get(id).is_some_and(|r| &*r.project != project) {
                return Err(IngestError::NotFound);
            }
        }
        Ok(RunKey {
            project_id: project.to_string(),
            run_id: run_id.to_string(),
        })
    }
}

fn count(route: &'static str, answer: &'static str) {
    metrics::counter!("eddy_ingest_verdict_requests_total", "route" => route, "answer" => answer)
        .increment(1);
}

fn body(run_id: &str, v: Option<&RunVerdict>, reached: bool) -> serde_json::Value {
    serde_json::json!({ "data": {
        "run_id": run_id,
        "verdict": v.filter(|_| reached).map(|v| &*v.strongest),
        "signals": v.map_or(0, |v| v.signals),
        "finished": v.is_some_and(|v| v.finished),
    }})
}

/// `?min_severity=info|warn|alert|stop`: signals below it are not a verdict (default: info,
/// every signal). An agent that asks with `stop` acts on any verdict it gets.
fn min_severity(uri: &Uri) -> Result<Severity, IngestError> {
    let value = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("min_severity="));
    match value {
        None => Ok(Severity::Info),
        Some(v) => serde_json::from_value(serde_json::Value::String(v.to_string())).map_err(|_| {
            IngestError::BadRequest("min_severity: expected info, warn, alert or stop".into())
        }),
    }
}

fn lookup(
    st: &AppState,
    headers: &HeaderMap,
    uri: &Uri,
    run_id: &str,
) -> Result<(Option<RunVerdict>, Severity), IngestError> {
    let project = st.authenticate(headers)?;
    let key = st.scoped_run(&project, run_id)?;
    let min = min_severity(uri)?;
    if !st.verdicts.is_caught_up() {
        return Err(IngestError::Loading);
    }
    Ok((st.verdicts.get(&key), min))
}

pub(super) async fn verdict(
    State(st): State<Arc<AppState>>,
    Path(run_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, IngestError> {
    let (v, min) =
        lookup(&st, &headers, &uri, &run_id).inspect_err(|e| count("verdict", e.metric_label()))?;
    let reached = v.as_ref().is_some_and(|v| v.strongest.severity >= min);
    count("verdict", if reached { "verdict" } else { "none" });
    Ok(json_response(
        StatusCode::OK,
        &body(&run_id, v.as_ref(), reached),
    ))
}

pub(super) async fn signals(
    State(st): State<Arc<AppState>>,
    Path(run_id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, IngestError> {
    let (key, min) = st
        .authenticate(&headers)
        .and_then(|project| st.scoped_run(&project, &run_id))
        .and_then(|key| Ok((key, min_severity(&uri)?)))
        .inspect_err(|e| count("signals", e.metric_label()))?;
    count("signals", "stream");
    // Subscribe before reading the table: a signal arriving in between is in one or the other.
    let updates = st.verdicts.subscribe();
    let now = st.verdicts.get(&key);
    let stream = signal_stream(key, min, now, updates, st.clone());
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// Open streams, for the gauge.
struct Open;

impl Open {
    fn new() -> Self {
        metrics::gauge!("eddy_ingest_signal_streams").increment(1.0);
        Open
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::gauge!("eddy_ingest_signal_streams").decrement(1.0);
    }
}

struct Feed {
    key: RunKey,
    min: Severity,
    updates: Receiver<Update>,
    st: Arc<AppState>,
    /// Ids already sent, so a copy (or a re-read after lagging) is not sent twice.
    sent: HashSet<String>,
    /// Sent before reading updates: the verdict at subscription, or the end.
    queued: Vec<Event>,
    done: bool,
    _open: Open,
}

fn signal_event(s: &Signal) -> Event {
    let e = Event::default()
        .event("signal")
        .data(serde_json::to_string(s).unwrap_or_default());
    // The event id is the SSE id (a client resuming can skip what it has), when it can be one.
    if s.event_id.bytes().any(|b| matches!(b, b'\n' | b'\r' | 0)) {
        e
    } else {
        e.id(s.event_id.clone())
    }
}

fn end_event(key: &RunKey) -> Event {
    Event::default()
        .event("run_terminated")
        .data(serde_json::json!({"run_id": key.run_id}).to_string())
}

impl Feed {
    /// Queue what the table says now and was not sent yet; true when the run has ended.
    fn catch_up(&mut self, v: Option<RunVerdict>) -> bool {
        if let Some(v) = v {
            if v.strongest.severity >= self.min && self.sent.insert(v.strongest.event_id.clone()) {
                self.queued.push(signal_event(&v.strongest));
            }
            if v.finished {
                self.queued.push(end_event(&self.key));
                return true;
            }
        }
        false
    }

    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if !self.queued.is_empty() {
                return Some(self.queued.remove(0));
            }
            if self.done {
                return None;
            }
            let update = tokio::select! {
                u = self.updates.recv() => u,
                _ = self.st.stop.cancelled() => return None,
            };
            match update {
                Ok(Update::Signal(s))
                    if s.project_id == self.key.project_id && s.run_id == self.key.run_id =>
                {
                    if self.sent.insert(s.event_id.clone()) {
                        return Some(signal_event(&s));
                    }
                }
                Ok(Update::Ended(k)) if k == self.key => {
                    self.done = true;
                    return Some(end_event(&self.key));
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let v = self.st.verdicts.get(&self.key);
                    self.done = self.catch_up(v);
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

fn signal_stream(
    key: RunKey,
    min: Severity,
    now: Option<RunVerdict>,
    updates: Receiver<Update>,
    st: Arc<AppState>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut feed = Feed {
        key,
        min,
        updates,
        st,
        sent: HashSet::new(),
        queued: Vec::new(),
        done: false,
        _open: Open::new(),
    };
    feed.done = feed.catch_up(now);
    futures::stream::unfold(feed, |mut feed| async move {
        feed.next_event()
            .await
            .map(|e| (Ok::<_, Infallible>(e), feed))
    })
}

#[cfg(test)]
mod tests {
    use super::super::{key_table, router, runs, RunTable};
    use super::*;
    use crate::config::IngestConfig;
    use crate::contract::{OutputEvent, RunTerminated, Severity};
    use crate::verdict::{VerdictConfig, VerdictTable, Verdicts};
    use axum::body::Body;
    use axum::http::Request;
    use futures::StreamExt;
    use std::sync::Mutex;
    use tokio_util::sync::CancellationToken;
    use tower::ServiceExt;

    fn state() -> Arc<AppState> {
        let mut cfg = IngestConfig::default();
        cfg.api_keys.insert("kw_A".into(), "proj-a".into());
        cfg.api_keys.insert("kw_B".into(), "proj-b".into());
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        Arc::new(AppState {
            keys: key_table(&cfg).unwrap(),
            runs: Mutex::new(RunTable::new(10)),
            jobs: tx,
            verdicts: Verdicts::new(VerdictTable::new(VerdictConfig::default())),
            stop: CancellationToken::new(),
        })
    }

    fn signal(project: &str, run: &str, id: &str, severity: Severity, step: u64) -> OutputEvent {
        OutputEvent::signal(Signal {
            event_id: id.into(),
            project_id: project.into(),
            run_id: run.into(),
            agent_name: Some("looping-agent".into()),
            step_index: step,
            ts: "2026-01-01T00:00:00Z".into(),
            detector: "repeat".into(),
            severity,
            pattern: "web_search(q=what is keelwave)".into(),
            fingerprint: "ab".into(),
            hits: 3,
            step_indices: vec![1, 2, step],
            first_step_index: 1,
            evidence: serde_json::json!({"calls": [1, 2, step]}),
        })
    }

    fn ended(project: &str, run: &str) -> OutputEvent {
        OutputEvent::RunTerminated(RunTerminated {
            event_id: "end".into(),
            project_id: project.into(),
            run_id: run.into(),
            agent_name: None,
            ts: "2026-01-01T00:00:01Z".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            status: "completed".into(),
            termination_reason: "loop_detected".into(),
            termination_reason_reported: true,
            loop_detected: true,
            loop_step_index: Some(1),
            loop_caught_step_index: Some(3),
            reported_loop_detected: None,
            signals: 1,
            redeliveries: 0,
            totals: Default::default(),
        })
    }

    async fn get(st: &Arc<AppState>, key: &str, path: &str) -> (StatusCode, Response) {
        let req = Request::get(path)
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap();
        let resp = router(st.clone()).oneshot(req).await.unwrap();
        (resp.status(), resp)
    }

    async fn json(resp: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    const RUN: &str = "0190c0de-0000-7000-8000-000000000001";

    #[tokio::test]
    async fn the_verdict_is_the_strongest_signal_of_the_callers_run() {
        let st = state();
        let path = format!("/v1/ingest/agent/runs/{RUN}/verdict");
        // Before the start-up read has caught up, no answer would be trustworthy.
        let (status, resp) = get(&st, "kw_A", &path).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[axum::http::header::RETRY_AFTER], "1");
        st.verdicts.set_caught_up();

        let (status, resp) = get(&st, "kw_A", &path).await;
        assert_eq!(status, StatusCode::OK);
        let v = json(resp).await;
        assert_eq!(v["data"]["run_id"], RUN);
        assert!(v["data"]["verdict"].is_null(), "{v}");

        st.verdicts
            .apply(&signal("proj-a", RUN, "w", Severity::Warn, 2), 0);
        let v = json(get(&st, "kw_A", &path).await.1).await;
        assert_eq!(v["data"]["verdict"]["severity"], "warn", "{v}");
        // An agent asking for stops only: a warning is no verdict yet.
        let stops = format!("{path}?min_severity=stop");
        let v = json(get(&st, "kw_A", &stops).await.1).await;
        assert!(v["data"]["verdict"].is_null(), "{v}");
        assert_eq!(v["data"]["signals"], 1);
        let bad = format!("{path}?min_severity=fatal");
        assert_eq!(get(&st, "kw_A", &bad).await.0, StatusCode::BAD_REQUEST);
        st.verdicts
            .apply(&signal("proj-a", RUN, "s", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", RUN, "s", Severity::Stop, 3), 0);
        let v = json(get(&st, "kw_A", &stops).await.1).await;
        assert_eq!(v["data"]["verdict"]["event_id"], "s", "{v}");
        // The same run id in project B: never shown to A.
        st.verdicts
            .apply(&signal("proj-b", RUN, "b", Severity::Alert, 2), 0);
        let v = json(get(&st, "kw_A", &path).await.1).await;
        let d = &v["data"];
        assert_eq!(d["verdict"]["severity"], "stop", "{v}");
        assert_eq!(d["verdict"]["event_id"], "s");
        assert_eq!(d["verdict"]["project_id"], "proj-a");
        assert_eq!(d["verdict"]["detector"], "repeat");
        assert_eq!(d["verdict"]["pattern"], "web_search(q=what is keelwave)");
        assert_eq!(d["verdict"]["step_indices"], serde_json::json!([1, 2, 3]));
        assert_eq!(
            d["verdict"]["evidence"],
            serde_json::json!({"calls": [1, 2, 3]})
        );
        assert_eq!(d["signals"], 2, "the copy of `s` counts once");
        assert_eq!(d["finished"], false);
        let v = json(get(&st, "kw_B", &path).await.1).await;
        assert_eq!(v["data"]["verdict"]["event_id"], "b", "{v}");

        st.verdicts.apply(&ended("proj-a", RUN), 0);
        let v = json(get(&st, "kw_A", &path).await.1).await;
        assert_eq!(v["data"]["finished"], true);
        assert_eq!(get(&st, "kw_NOPE", &path).await.0, StatusCode::UNAUTHORIZED);
        assert_eq!(get(&st, "", &path).await.0, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn another_projects_run_is_not_found() {
        let st = state();
        st.verdicts.set_caught_up();
        let at = runs::now_micros();
        let id = runs::uuid_v7(at);
        st.runs().insert(
            id,
            runs::RunInfo {
                project: Arc::from("proj-b"),
                agent_name: "b-agent".into(),
                started: at,
                finished: false,
            },
        );
        let run = runs::format_uuid(id);
        st.verdicts
            .apply(&signal("proj-b", &run, "s", Severity::Stop, 3), 0);
        for route in ["verdict", "signals"] {
            let path = format!("/v1/ingest/agent/runs/{run}/{route}");
            let (status, resp) = get(&st, "kw_A", &path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{route}");
            assert_eq!(json(resp).await, serde_json::json!({"error": "not found"}));
        }
        let path = format!("/v1/ingest/agent/runs/{run}/verdict");
        let v = json(get(&st, "kw_B", &path).await.1).await;
        assert_eq!(v["data"]["verdict"]["severity"], "stop", "{v}");
        let long = "r".repeat(MAX_RUN_ID_BYTES + 1);
        let path = format!("/v1/ingest/agent/runs/{long}/verdict");
        assert_eq!(get(&st, "kw_A", &path).await.0, StatusCode::NOT_FOUND);
    }

    /// The next server-sent event as (event name, data), or None when the stream ended.
    async fn next_sse(
        body: &mut (impl Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
        buf: &mut String,
    ) -> Option<(String, String)> {
        loop {
            if let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_string())
                };
                match (field("event:"), field("data:")) {
                    (Some(e), Some(d)) => return Some((e, d)),
                    _ => continue, // a keep-alive comment
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
                .await
                .expect("an event within 10 s")?
                .ok()?;
            buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    #[tokio::test]
    async fn the_stream_pushes_each_signal_once_and_ends_with_the_run() {
        let st = state();
        st.verdicts
            .apply(&signal("proj-a", RUN, "w", Severity::Warn, 2), 0);
        let path = format!("/v1/ingest/agent/runs/{RUN}/signals");
        // A stream of stops only: it starts empty and gets the stop, not the warning.
        let stops = get(&st, "kw_A", &format!("{path}?min_severity=stop"))
            .await
            .1;
        let mut stops = stops.into_body().into_data_stream();
        let (status, resp) = get(&st, "kw_A", &path).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            resp.headers()[axum::http::header::CONTENT_TYPE],
            "text/event-stream"
        );
        let mut body = resp.into_body().into_data_stream();
        let mut buf = String::new();
        let (event, data) = next_sse(&mut body, &mut buf)
            .await
            .expect("the verdict so far");
        assert_eq!(event, "signal");
        let first: Signal = serde_json::from_str(&data).unwrap();
        assert_eq!(
            (first.event_id.as_str(), first.severity),
            ("w", Severity::Warn)
        );

        st.verdicts
            .apply(&signal("proj-a", RUN, "w", Severity::Warn, 2), 0);
        st.verdicts
            .apply(&signal("proj-b", RUN, "b", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", RUN, "s", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", RUN, "s", Severity::Stop, 3), 0);
        st.verdicts.apply(&ended("proj-a", RUN), 0);
        let (event, data) = next_sse(&mut body, &mut buf).await.expect("the stop");
        assert_eq!(event, "signal");
        let s: Signal = serde_json::from_str(&data).unwrap();
        assert_eq!(
            (s.event_id.as_str(), s.project_id.as_str()),
            ("s", "proj-a")
        );
        let (event, data) = next_sse(&mut body, &mut buf).await.expect("the end");
        assert_eq!(event, "run_terminated", "{data}");
        assert!(
            next_sse(&mut body, &mut buf).await.is_none(),
            "the stream ends"
        );
        let mut buf = String::new();
        let (event, data) = next_sse(&mut stops, &mut buf).await.expect("the stop");
        assert_eq!(event, "signal");
        assert_eq!(serde_json::from_str::<Signal>(&data).unwrap().event_id, "s");
        let (event, _) = next_sse(&mut stops, &mut buf).await.expect("the end");
        assert_eq!(event, "run_terminated");
    }

    #[tokio::test]
    async fn streams_end_at_shutdown() {
        let st = state();
        let path = format!("/v1/ingest/agent/runs/{RUN}/signals");
        let resp = get(&st, "kw_A", &path).await.1;
        let mut body = resp.into_body().into_data_stream();
        st.stop.cancel();
        let mut buf = String::new();
        assert!(next_sse(&mut body, &mut buf).await.is_none());
    }
}
