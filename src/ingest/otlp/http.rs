//! OTLP/HTTP: `POST /v1/traces`, protobuf or JSON, optionally compressed; answers and errors in
//! the request's encoding.
use super::decode::{self, Encoding};
use super::{OtlpError, Receiver, MAX_DECODED_BYTES};
use crate::ingest::MAX_BODY_BYTES;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Receiver {
    async fn export_http(
        &self,
        headers: &HeaderMap,
        body: Body,
        enc: Encoding,
    ) -> Result<Response, OtlpError> {
        let key_project = self.key_project(headers)?;
        let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
            .await
            .map_err(|_| OtlpError::TooLarge(MAX_BODY_BYTES))?;
        let encoding = headers
            .get(header::CONTENT_ENCODING)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let bytes = decode::decompress(&body, encoding.as_deref(), MAX_DECODED_BYTES)?;
        let req = decode::decode(&bytes, enc)?;
        let answer = self.export(key_project.as_deref(), &req).await?;
        let mut r = (StatusCode::OK, decode::encode(&answer, enc)).into_response();
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
        Some(enc) => rx
            .export_http(&headers, body, enc)
            .await
            .map_err(|e| (e, enc)),
        None => {
            let e = OtlpError::UnsupportedMediaType(ct.unwrap_or_default().to_string());
            Err((e, Encoding::Json))
        }
    };
    let (resp, answer) = match result {
        Ok(r) => (r, "ok"),
        Err((e, enc)) => (e.response(enc), e.label()),
    };
    super::record("http", answer, started);
    resp
}

pub(super) fn router(rx: Arc<Receiver>) -> Router {
    Router::new()
        .route("/v1/traces", post(traces))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(rx)
}

/// Serve OTLP/HTTP on `listener` until `shutdown`; in-flight exports finish first.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    rx: Arc<Receiver>,
    shutdown: CancellationToken,
) -> Result<(), OtlpError> {
    axum::serve(listener, router(rx))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(OtlpError::Serve)
}
