//! Request metrics of the ingest routes, recorded by one middleware around the router.
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;

/// The route a path belongs to, as a label: never the run id itself (unbounded cardinality).
fn route(method: &axum::http::Method, path: &str) -> &'static str {
    let is_get = method == axum::http::Method::GET;
    match path.strip_prefix("/v1/ingest/agent/") {
        Some("runs") => "run_start",
        Some("steps") => "step",
        Some(rest) if rest.starts_with("runs/") && rest.ends_with("/finish") => "finish",
        Some(rest) if is_get && rest.starts_with("runs/") && rest.ends_with("/verdict") => {
            "verdict"
        }
        Some(rest) if is_get && rest.starts_with("runs/") && rest.ends_with("/signals") => {
            "signals"
        }
        _ if path == "/v1/health" => "health",
        _ => "other",
    }
}

/// `eddy_ingest_requests_total{route,status}` and `eddy_ingest_request_seconds{route}` (for a
/// signal stream: until its headers are sent).
pub(super) async fn record(req: Request, next: Next) -> Response {
    let route = route(req.method(), req.uri().path());
    let started = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("eddy_ingest_requests_total", "route" => route, "status" => status)
        .increment(1);
    metrics::histogram!("eddy_ingest_request_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn routes_are_labelled_without_their_run_id() {
        let run = "/v1/ingest/agent/runs/0190c0de-0000-7000-8000-000000000001";
        assert_eq!(route(&Method::POST, "/v1/ingest/agent/runs"), "run_start");
        assert_eq!(route(&Method::POST, "/v1/ingest/agent/steps"), "step");
        assert_eq!(route(&Method::POST, &format!("{run}/finish")), "finish");
        assert_eq!(route(&Method::GET, &format!("{run}/verdict")), "verdict");
        assert_eq!(route(&Method::GET, &format!("{run}/signals")), "signals");
        assert_eq!(route(&Method::GET, "/v1/health"), "health");
        assert_eq!(route(&Method::GET, "/v1/ingest/ai"), "other");
    }
}
