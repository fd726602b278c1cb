//! The verdict routes: an agent asks, between steps, whether eddy wants it stopped.
//!
//! | route | answer |
//! |---|---|
//! | `GET /v1/ingest/agent/runs/{run_id}/verdict` | 200 `{"data":{"run_id","verdict":<signal>\|null,"signals":n,"finished":bool}}` |
//! | `GET /v1/ingest/agent/runs/{run_id}/signals` | 200 `text/event-stream`: `event: signal` per distinct signal (the strongest so far first), `event: run_terminated` at the end |
//! | `GET /v1/ingest/agent/signals` | 200 `text/event-stream`: every signal and run end of the key's project, each with an `id:` to resume from |
//!
//! The project stream is for a guard following many runs over one connection (an agent
//! process, whatever its number of runs). `?run_id=a&run_id=b` narrows it to those runs (at most
//! `MAX_STREAM_RUNS`; an empty `run_id=` is allowed, so a guard watching nothing yet asks for
//! nothing); without `run_id` it carries every run of the project and the client filters. A
//! guard that starts watching a run reconnects with the new list and its `Last-Event-ID`, which
//! loses nothing in between. Its events, each the output event as JSON with its `kind`:
//! - `event: ready`, `id: <epoch>-<seq>`: sent once the stream is following (after any replay);
//! - `event: signal`, `id: <epoch>-<seq>`: a signal the bridge had not seen before;
//! - `event: run_terminated`, `id: <epoch>-<seq>`: `{"kind","project_id","run_id"}`;
//! - `event: resync`: what follows up to the next `ready` is the table's verdicts (each run's
//!   strongest signal, and its end), not the updates in between, which the bridge no longer
//!   holds.
//!
//! `<epoch>` names the bridge process's journal, `<seq>` numbers its updates. A client
//! reconnecting with `Last-Event-ID` is sent every update of its project after that one while
//! the journal still holds it (the last `verdict::JOURNAL_UPDATES`); when it does not (the
//! client was away longer, the bridge restarted, or another replica answers) the stream starts
//! with a `resync`. A run's strongest signal is all a guard acts on, so a resync loses no stop;
//! weaker signals of a run in between are not resent. Without `Last-Event-ID` the stream starts
//! at the present.
//!
//! The verdict is the run's strongest signal (severity, then the earliest step), with its
//! detector, pattern, step indices, evidence and `advice` (the corrective message to hand the
//! agent when steering), exactly as the worker published it. Both take
//! `?min_severity=info|warn|alert|stop` (default info): weaker signals are not a verdict and
//! are not pushed, so an agent asking with `stop` stops on any verdict it gets.
//! Same keys as the ingest routes; a key reads only its project's runs: a run this bridge knows
//! to be another project's is 404, and any other lookup is made within the key's project, so
//! another project's verdict is never found. A run this replica has no verdict for answers
//! `"verdict":null` (it may have been started through another replica). Until the start-up read
//! of the signals topic has caught up, `/verdict` answers 503 with `Retry-After: 1`.
use super::{json_response, AppState, IngestError};
use crate::contract::{RunKey, Severity, Signal};
use crate::verdict::{Entry, Resume};
use crate::verdict::{RunVerdict, Update};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

/// The longest run id looked up (the input contract's limit for ids).
const MAX_RUN_ID_BYTES: usize = crate::contract::input::MAX_ID_BYTES;
/// Runs one project stream can be narrowed to; a guard watching more follows the project.
pub(crate) const MAX_STREAM_RUNS: usize = 1000;

/// `?run_id=...` (repeated): the runs a project stream is narrowed to, or None for all.
fn stream_runs(uri: &Uri) -> Result<Option<HashSet<String>>, IngestError> {
    let mut runs: Option<HashSet<String>> = None;
    for value in uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.strip_prefix("run_id="))
    {
        let set = runs.get_or_insert_with(HashSet::new);
        let run = percent_encoding::percent_decode_str(&value.replace('+', " "))
            .decode_utf8()
            .map_err(|_| IngestError::BadRequest("run_id: not UTF-8".into()))?
            .into_owned();
        if run.len() > MAX_RUN_ID_BYTES {
            return Err(IngestError::BadRequest("run_id: too long".into()));
        }
        if !run.is_empty() {
            set.insert(run);
        }
        if set.len() > MAX_STREAM_RUNS {
            return Err(IngestError::BadRequest(format!(
                "at most {MAX_STREAM_RUNS} run_id: follow the whole project instead"
            )));
        }
    }
    Ok(runs)
}

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

/// Open streams, for the gauge (`route`: `run` or `project`).
struct Open(&'static str);

impl Open {
    fn new() -> Self {
        Self::of("run")
    }

    fn of(route: &'static str) -> Self {
        metrics::gauge!("eddy_ingest_signal_streams", "route" => route).increment(1.0);
        Open(route)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::gauge!("eddy_ingest_signal_streams", "route" => self.0).decrement(1.0);
    }
}

pub(super) async fn project_signals(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, IngestError> {
    let (project, min, runs) = st
        .authenticate(&headers)
        .and_then(|p| Ok((p, min_severity(&uri)?, stream_runs(&uri)?)))
        .and_then(|pm| {
            // Before the start-up read has caught up, a resync would send a partial table.
            if st.verdicts.is_caught_up() {
                Ok(pm)
            } else {
                Err(IngestError::Loading)
            }
        })
        .inspect_err(|e| count("project_signals", e.metric_label()))?;
    count("project_signals", "stream");
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut feed = ProjectFeed {
        project,
        min,
        runs,
        last_seq: 0,
        head: st.verdicts.watch_head(),
        st: st.clone(),
        queued: VecDeque::new(),
        _open: Open::of("project"),
    };
    feed.start(last.as_deref());
    let stream = futures::stream::unfold(feed, |mut feed| async move {
        feed.next_event()
            .await
            .map(|e| (Ok::<_, Infallible>(e), feed))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// A project's stream: the journal's updates of one project, from `last_seq` on.
struct ProjectFeed {
    project: Arc<str>,
    min: Severity,
    /// Only these runs (None: every run of the project).
    runs: Option<HashSet<String>>,
    /// The journal position sent up to (every later update of the project is still to send).
    last_seq: u64,
    head: tokio::sync::watch::Receiver<u64>,
    st: Arc<AppState>,
    queued: VecDeque<Event>,
    _open: Open,
}

impl ProjectFeed {
    fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.st.verdicts.epoch())
    }

    fn wants(&self, run_id: &str) -> bool {
        self.runs.as_ref().is_none_or(|r| r.contains(run_id))
    }

    fn keeps(&self, e: &Entry) -> bool {
        *e.project_id == *self.project
            && e.severity.is_none_or(|s| s >= self.min)
            && self.wants(&e.run_id)
    }

    fn entry_event(&self, e: &Entry) -> Event {
        metrics::counter!("eddy_ingest_stream_events_total", "route" => "project").increment(1);
        metrics::counter!("eddy_ingest_stream_bytes_total", "route" => "project")
            .increment(e.data.len() as u64);
        Event::default()
            .event(e.name)
            .id(self.id(e.seq))
            .data(&*e.data)
    }

    /// Queue what a client resuming after `last` (a `Last-Event-ID`) missed, then `ready`.
    fn start(&mut self, last: Option<&str>) {
        let resume = last.map(|id| {
            let seq = id
                .rsplit_once('-')
                .filter(|(epoch, _)| *epoch == self.st.verdicts.epoch())
                .and_then(|(_, seq)| seq.parse::<u64>().ok());
            match seq {
                Some(seq) => self.st.verdicts.journal().after(seq, |e| self.keeps(e)),
                None => Resume::Gone,
            }
        });
        // The head read under the journal's lock, and the watch marked as seen at it: an update
        // pushed after is both in the journal past `head` and a change of the watch.
        let head = {
            let j = self.st.verdicts.journal();
            self.head.mark_unchanged();
            j.head()
        };
        match resume {
            None => self.last_seq = head,
            Some(Resume::Held(entries)) => self.send_held(entries, head),
            Some(Resume::Gone) => self.resync(head),
        }
        let ready = Event::default()
            .event("ready")
            .id(self.id(self.last_seq))
            .data(serde_json::json!({"project_id": &*self.project}).to_string());
        self.queued.push_back(ready);
    }

    fn send_held(&mut self, entries: Vec<Entry>, head: u64) {
        for e in &entries {
            let ev = self.entry_event(e);
            self.queued.push_back(ev);
        }
        self.last_seq = entries.last().map_or(head, |e| e.seq).max(self.last_seq);
    }

    /// Queue the table's verdicts of the project, as of the journal's `head` or later.
    fn resync(&mut self, head: u64) {
        metrics::counter!("eddy_ingest_stream_resyncs_total").increment(1);
        self.queued
            .push_back(Event::default().event("resync").data("{}"));
        let runs = self.st.verdicts.table().runs_of(&self.project);
        for (key, v) in runs {
            if !self.wants(&key.run_id) {
                continue;
            }
            if v.strongest.severity >= self.min {
                let data = serde_json::to_string(&crate::contract::OutputEvent::signal(
                    (*v.strongest).clone(),
                ))
                .unwrap_or_default();
                // No id: a client cut off here resumes from its last id and is resynced again.
                self.queued
                    .push_back(Event::default().event("signal").data(data));
            }
            if v.finished {
                let data = serde_json::json!({
                    "kind": "run_terminated",
                    "project_id": key.project_id,
                    "run_id": key.run_id,
                });
                self.queued.push_back(
                    Event::default()
                        .event("run_terminated")
                        .data(data.to_string()),
                );
            }
        }
        self.last_seq = head;
    }

    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queued.pop_front() {
                return Some(e);
            }
            tokio::select! {
                changed = self.head.changed() => changed.ok()?,
                _ = self.st.stop.cancelled() => return None,
            }
            let (resume, head) = {
                let j = self.st.verdicts.journal();
                self.head.mark_unchanged();
                (j.after(self.last_seq, |e| self.keeps(e)), j.head())
            };
            match resume {
                Resume::Held(entries) => {
                    self.send_held(entries, head);
                    self.last_seq = head;
                }
                // Fell behind the whole journal: only the table can say what was missed.
                Resume::Gone => self.resync(head),
            }
        }
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
            verdicts: Verdicts::with_journal(
                VerdictTable::new(VerdictConfig::default()),
                crate::verdict::JOURNAL_UPDATES,
            ),
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
            advice: format!("eddy: this run is repeating itself. Since step 1 ... ({step})"),
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
            loop_step_number: None,
            loop_caught_step_number: None,
            reported_loop_detected: None,
            signals: 1,
            redeliveries: 0,
            totals: Default::default(),
            steered_step_index: None,
            steers: 0,
            steer_outcome: None,
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
        // The steering message, as the worker built it, for agents that steer over HTTP.
        assert_eq!(
            d["verdict"]["advice"],
            "eddy: this run is repeating itself. Since step 1 ... (3)"
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
    /// The next server-sent event as (event name, id, data), keep-alives skipped.
    async fn next_full(
        body: &mut (impl Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
        buf: &mut String,
    ) -> Option<(String, Option<String>, String)> {
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
                    (Some(e), Some(d)) => return Some((e, field("id:"), d)),
                    _ => continue,
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
                .await
                .expect("an event within 10 s")?
                .ok()?;
            buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    async fn open_project(
        st: &Arc<AppState>,
        key: &str,
        last: Option<&str>,
    ) -> impl Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin {
        let mut req = Request::get("/v1/ingest/agent/signals")
            .header("authorization", format!("Bearer {key}"));
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        let resp = router(st.clone())
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.into_body().into_data_stream()
    }

    #[tokio::test]
    async fn the_project_stream_sends_only_the_keys_project_each_with_an_id() {
        let st = state();
        let (status, resp) = get(&st, "kw_A", "/v1/ingest/agent/signals").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "loading");
        assert_eq!(resp.headers()[axum::http::header::RETRY_AFTER], "1");
        st.verdicts.set_caught_up();
        let (status, _) = get(&st, "kw_NOPE", "/v1/ingest/agent/signals").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        // Before the stream opens: not sent to a client that did not ask to resume.
        st.verdicts
            .apply(&signal("proj-a", "old", "o", Severity::Stop, 3), 0);
        let mut a = open_project(&st, "kw_A", None).await;
        let mut buf = String::new();
        let (event, ready_id, _) = next_full(&mut a, &mut buf).await.unwrap();
        assert_eq!(event, "ready");
        let ready_id = ready_id.expect("ready carries the position");
        st.verdicts
            .apply(&signal("proj-b", "rb", "b", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", "r1", "w", Severity::Warn, 2), 0);
        st.verdicts
            .apply(&signal("proj-a", "r1", "w", Severity::Warn, 2), 0);
        st.verdicts
            .apply(&signal("proj-a", "r2", "s", Severity::Stop, 3), 0);
        st.verdicts.apply(&ended("proj-b", "rb"), 0);
        st.verdicts.apply(&ended("proj-a", "r2"), 0);
        let mut got = Vec::new();
        for _ in 0..3 {
            let (event, id, data) = next_full(&mut a, &mut buf).await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&data).unwrap();
            assert_eq!(v["project_id"], "proj-a", "{data}");
            got.push((event, id.expect("every update has an id"), v));
        }
        assert_eq!(got[0].0, "signal");
        assert_eq!(got[0].2["kind"], "loop_warning");
        assert_eq!(got[0].2["event_id"], "w");
        assert_eq!(got[1].2["kind"], "loop_detected");
        assert_eq!(
            got[1].2["advice"],
            "eddy: this run is repeating itself. Since step 1 ... (3)"
        );
        assert_eq!(got[2].0, "run_terminated");
        assert_eq!(got[2].2["run_id"], "r2");
        let seqs: Vec<u64> = std::iter::once(&ready_id)
            .chain(got.iter().map(|g| &g.1))
            .map(|id| id.rsplit_once('-').unwrap().1.parse().unwrap())
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

        // Resuming after the warning: the stop and the end, nothing of project B, then ready.
        let mut again = open_project(&st, "kw_A", Some(&got[0].1)).await;
        let mut buf = String::new();
        let names: Vec<(String, Option<String>)> = {
            let mut v = Vec::new();
            for _ in 0..3 {
                let (e, id, _) = next_full(&mut again, &mut buf).await.unwrap();
                v.push((e, id));
            }
            v
        };
        assert_eq!(
            names,
            vec![
                ("signal".to_string(), Some(got[1].1.clone())),
                ("run_terminated".to_string(), Some(got[2].1.clone())),
                ("ready".to_string(), Some(got[2].1.clone())),
            ]
        );
        // Project B's stream, resumed from A's id: only B's updates.
        let mut b = open_project(&st, "kw_B", Some(&ready_id)).await;
        let mut buf = String::new();
        let (e, _, d) = next_full(&mut b, &mut buf).await.unwrap();
        assert_eq!(
            (e.as_str(), d.contains("\"proj-b\"")),
            ("signal", true),
            "{d}"
        );
        let (e, _, d) = next_full(&mut b, &mut buf).await.unwrap();
        assert_eq!(e, "run_terminated", "{d}");
        assert!(d.contains("\"rb\""));
    }

    #[tokio::test]
    async fn an_id_the_bridge_no_longer_holds_resyncs_from_the_table() {
        let st = state();
        st.verdicts.set_caught_up();
        st.verdicts
            .apply(&signal("proj-a", "r1", "w", Severity::Warn, 2), 0);
        st.verdicts
            .apply(&signal("proj-a", "r1", "s", Severity::Stop, 5), 0);
        st.verdicts
            .apply(&signal("proj-b", "r9", "b", Severity::Stop, 3), 0);
        st.verdicts.apply(&ended("proj-a", "r1"), 0);
        // Another bridge's id (a restart, another replica): its position means nothing here.
        let mut a = open_project(&st, "kw_A", Some("0123abcd-2")).await;
        let mut buf = String::new();
        let mut events = Vec::new();
        loop {
            let (e, id, d) = next_full(&mut a, &mut buf).await.unwrap();
            let done = e == "ready";
            events.push((e, id, d));
            if done {
                break;
            }
        }
        let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["resync", "signal", "run_terminated", "ready"]);
        // The run's strongest signal, not the warning before it; nothing of project B.
        assert!(
            events[1].2.contains("\"event_id\":\"s\""),
            "{}",
            events[1].2
        );
        assert!(events[1].1.is_none(), "a resync has no position of its own");
        assert!(events.iter().all(|e| !e.2.contains("proj-b")));
        // Live updates follow the resync.
        st.verdicts
            .apply(&signal("proj-a", "r3", "t", Severity::Stop, 4), 0);
        let (e, id, d) = next_full(&mut a, &mut buf).await.unwrap();
        assert_eq!(e, "signal");
        assert!(d.contains("\"r3\"") && id.is_some(), "{d}");
        // Our epoch, a position never reached: also resynced, not trusted.
        let future = format!("{}-99", st.verdicts.epoch());
        let mut f = open_project(&st, "kw_A", Some(&future)).await;
        let mut buf = String::new();
        assert_eq!(next_full(&mut f, &mut buf).await.unwrap().0, "resync");
    }

    async fn open_path(
        st: &Arc<AppState>,
        path: &str,
        last: Option<&str>,
    ) -> impl Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin {
        let mut req = Request::get(path).header("authorization", "Bearer kw_A");
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        let resp = router(st.clone())
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        resp.into_body().into_data_stream()
    }

    #[tokio::test]
    async fn a_stream_narrowed_to_runs_sends_only_theirs() {
        let st = state();
        st.verdicts.set_caught_up();
        let base = "/v1/ingest/agent/signals";
        // Nothing watched yet: nothing but ready.
        let mut none = open_path(&st, &format!("{base}?run_id="), None).await;
        let mut buf = String::new();
        let (e, ready, _) = next_full(&mut none, &mut buf).await.unwrap();
        assert_eq!(e, "ready");
        st.verdicts
            .apply(&signal("proj-a", "r 1", "a", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", "r2", "b", Severity::Stop, 3), 0);
        st.verdicts
            .apply(&signal("proj-a", "r3", "c", Severity::Stop, 3), 0);
        // The guard watches "r 1" and r3 now: it reconnects with them and its last id, and
        // gets what it missed of them, not r2's.
        let path = format!("{base}?run_id=&run_id=r%201&run_id=r3");
        let mut some = open_path(&st, &path, ready.as_deref()).await;
        let mut buf = String::new();
        let mut got = Vec::new();
        for _ in 0..2 {
            let (e, _, d) = next_full(&mut some, &mut buf).await.unwrap();
            assert_eq!(e, "signal");
            got.push(serde_json::from_str::<serde_json::Value>(&d).unwrap()["run_id"].clone());
        }
        assert_eq!(got, ["r 1", "r3"]);
        assert_eq!(next_full(&mut some, &mut buf).await.unwrap().0, "ready");
        st.verdicts
            .apply(&signal("proj-a", "r2", "b2", Severity::Alert, 4), 0);
        st.verdicts.apply(&ended("proj-a", "r3"), 0);
        let (e, _, d) = next_full(&mut some, &mut buf).await.unwrap();
        assert_eq!(e, "run_terminated", "{d}");
        // A resync is narrowed too.
        let mut re = open_path(&st, &format!("{base}?run_id=r2"), Some("x-1")).await;
        let mut buf = String::new();
        assert_eq!(next_full(&mut re, &mut buf).await.unwrap().0, "resync");
        let (_, _, d) = next_full(&mut re, &mut buf).await.unwrap();
        assert!(d.contains("\"run_id\":\"r2\""), "{d}");
        assert_eq!(next_full(&mut re, &mut buf).await.unwrap().0, "ready");
        let many: String = (0..=MAX_STREAM_RUNS)
            .map(|i| format!("&run_id=r{i}"))
            .collect();
        let (status, _) = get(&st, "kw_A", &format!("{base}?x=1{many}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn project_streams_end_at_shutdown() {
        let st = state();
        st.verdicts.set_caught_up();
        let mut a = open_project(&st, "kw_A", None).await;
        let mut buf = String::new();
        assert_eq!(next_full(&mut a, &mut buf).await.unwrap().0, "ready");
        st.stop.cancel();
        assert!(next_full(&mut a, &mut buf).await.is_none());
    }
}
