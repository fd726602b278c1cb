//! A local HTTP receiver standing in for the destinations fleet-watch notifies: it records
//! every request and answers as a webhook endpoint, Slack, PagerDuty or a failing one would.
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The webhook destinations' shared signing secret in these tests.
pub const SECRET: &str = "test-signing-secret-4f1c9e";

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Got {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
    pub fn header(&self, k: &str) -> &str {
        self.headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }
}

type Log = Arc<Mutex<BTreeMap<String, Vec<Got>>>>;

/// Webhook, Slack-shaped, PagerDuty-shaped and Alertmanager-webhook endpoints on loopback.
/// `/slack` answers 503, then 429 with `Retry-After: 1`, then 200 `ok` from then on; `/broken`
/// always 500.
pub struct Receiver {
    addr: String,
    log: Log,
}

async fn receive(
    State(log): State<Log>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = {
        let mut l = log.lock().unwrap();
        let v = l.entry(path.clone()).or_default();
        v.push(Got {
            headers,
            body: body.to_vec(),
        });
        v.len()
    };
    match (path.as_str(), n) {
        ("slack", 1) => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
        ("slack", 2) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("Retry-After", "1")],
            "rate_limited",
        )
            .into_response(),
        ("slack", _) => (StatusCode::OK, "ok").into_response(),
        ("pagerduty", _) => (
            StatusCode::ACCEPTED,
            r#"{"status":"success","message":"Event processed"}"#,
        )
            .into_response(),
        ("broken", _) => (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response(),
        _ => StatusCode::OK.into_response(),
    }
}

impl Receiver {
    pub async fn start() -> Self {
        let log: Log = Arc::default();
        let app = axum::Router::new()
            .route("/{path}", axum::routing::post(receive))
            .with_state(log.clone());
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(l, app).await });
        Self { addr, log }
    }
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }
    pub fn got(&self, path: &str) -> Vec<Got> {
        self.log
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
    /// Wait (polling) until `path` has at least `n` requests.
    pub async fn await_n(&self, path: &str, n: usize, timeout: Duration) -> Vec<Got> {
        let start = Instant::now();
        loop {
            let got = self.got(path);
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < timeout,
                "/{path}: {} of {n} requests after {timeout:?}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What a receiver does with `X-Eddy-Signature` (docs/fleet-alerts.md): HMAC-SHA256 of
/// `<timestamp>.<body>` with the shared secret, and a timestamp no older than five minutes.
pub fn verify(g: &Got) {
    let ts = g.header("X-Eddy-Timestamp");
    let sig = g.header("X-Eddy-Signature");
    let t: i64 = ts.parse().expect("a numeric timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - t).abs() < 300, "timestamp {t} is not now ({now})");
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{ts}.").as_bytes());
    mac.update(&g.body);
    let want = hex::decode(sig.strip_prefix("v1=").expect("v1= scheme")).expect("hex");
    mac.verify_slice(&want).expect("the signature verifies");
    // And a body changed in flight does not.
    let mut bad = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    bad.update(format!("{ts}.").as_bytes());
    bad.update(&g.body[1..]);
    assert!(bad.verify_slice(&want).is_err());
}
