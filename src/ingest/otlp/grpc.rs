//! OTLP/gRPC: the `opentelemetry.proto.collector.trace.v1.TraceService/Export` method, served
//! by tonic with the service opentelemetry-proto generates.
//!
//! Before tonic sees a request, [`Limits`] applies the OTLP/HTTP receiver's rules in the HTTP
//! receiver's order: the API key (from the metadata, which is HTTP/2's headers) first, then at
//! most `MAX_BODY_BYTES` on the wire, then at most `MAX_DECODED_BYTES` once decompressed (tonic
//! has one limit for both). It decompresses the message itself (`grpc-encoding` gzip or
//! deflate, as the exporters send) with the same decoder, so a refusal says the same thing over
//! either transport; tonic then decodes the protobuf and calls [`Service::export`], which hands
//! it to the shared core.
use super::{decode, OtlpError, Receiver, MAX_DECODED_BYTES};
use crate::ingest::MAX_BODY_BYTES;
use axum::body::Bytes;
use axum::http;
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A gRPC message's prefix: a compressed flag and a 4-byte big-endian length.
const PREFIX: usize = 5;

/// What [`Limits`] found out about a request, for the service behind it (as a request
/// extension, which tonic hands on).
#[derive(Clone)]
struct Checked {
    key_project: Option<Arc<str>>,
    /// Set once the service is called: an error answered before that is tonic's refusal of
    /// the message itself (it does not decode), which the metrics count as a bad request.
    reached: Arc<AtomicBool>,
}

pub(super) struct Service(Arc<Receiver>);

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let checked = request
            .extensions()
            .get::<Checked>()
            .cloned()
            .ok_or_else(|| OtlpError::Internal("request not checked".into()).grpc_status())?;
        checked.reached.store(true, Ordering::Relaxed);
        self.0
            .export(checked.key_project.as_deref(), request.get_ref())
            .await
            .map(tonic::Response::new)
            .map_err(|e| e.grpc_status())
    }
}

/// The key, size and compression rules in front of tonic, and the request metrics.
#[derive(Clone)]
pub(super) struct Limits {
    rx: Arc<Receiver>,
    inner: TraceServiceServer<Service>,
}

impl Limits {
    fn new(rx: Arc<Receiver>) -> Self {
        let inner = TraceServiceServer::new(Service(rx.clone()))
            // What `prepare` passes on is never larger; this only keeps tonic's default (4 MiB)
            // from refusing what the HTTP receiver takes.
            .max_decoding_message_size(MAX_DECODED_BYTES);
        Self { rx, inner }
    }
}

/// The request's body, checked and with its message decompressed, or the refusal.
async fn prepare(
    rx: &Receiver,
    req: http::Request<tonic::body::Body>,
    reached: Arc<AtomicBool>,
) -> Result<http::Request<Full<Bytes>>, OtlpError> {
    let key_project = rx.key_project(req.headers())?;
    let (mut parts, body) = req.into_parts();
    let body = Limited::new(body, MAX_BODY_BYTES + PREFIX)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                OtlpError::TooLarge(MAX_BODY_BYTES)
            } else {
                OtlpError::Malformed(format!("request body: {e}"))
            }
        })?
        .to_bytes();
    let body = match body.get(..PREFIX) {
        Some(&[1, a, b, c, d]) => {
            let len = u32::from_be_bytes([a, b, c, d]) as usize;
            let message = body
                .get(PREFIX..PREFIX + len)
                .ok_or_else(|| OtlpError::Malformed("truncated gRPC message".into()))?;
            let encoding = parts
                .headers
                .remove("grpc-encoding")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .ok_or_else(|| {
                    OtlpError::Malformed("compressed message without grpc-encoding".into())
                })?;
            let plain = decode::decompress(message, Some(&encoding), MAX_DECODED_BYTES)?;
            // `plain` is at most MAX_DECODED_BYTES, far below 4 GiB.
            let plain_len =
                u32::try_from(plain.len()).map_err(|_| OtlpError::TooLarge(MAX_DECODED_BYTES))?;
            let mut framed = Vec::with_capacity(PREFIX + plain.len());
            framed.push(0);
            framed.extend_from_slice(&plain_len.to_be_bytes());
            framed.extend_from_slice(&plain);
            // Anything after the one message of a unary call is left for tonic to refuse.
            framed.extend_from_slice(&body[PREFIX + len..]);
            Bytes::from(framed)
        }
        // Uncompressed (or too short to say): tonic reads it as it is.
        _ => body,
    };
    parts.extensions.insert(Checked {
        key_project,
        reached,
    });
    Ok(http::Request::from_parts(parts, Full::new(body)))
}

/// The metric's `answer` for a gRPC response: its status code (in the headers of an error
/// answer, which has no message; a success carries it in the trailers).
fn answer(resp: &http::Response<tonic::body::Body>, reached: bool) -> &'static str {
    let code = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map_or(tonic::Code::Ok, tonic::Code::from_i32);
    match code {
        tonic::Code::Ok => "ok",
        tonic::Code::Unauthenticated => "unauthorized",
        tonic::Code::Unavailable | tonic::Code::ResourceExhausted => "retry",
        tonic::Code::InvalidArgument => "bad_request",
        // tonic answers a message that does not decode with INTERNAL, as gRPC prescribes.
        tonic::Code::Internal if !reached => "bad_request",
        _ => "error",
    }
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for Limits {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let started = Instant::now();
            let reached = Arc::new(AtomicBool::new(false));
            let resp = match prepare(&this.rx, req, reached.clone()).await {
                Ok(req) => {
                    let mut inner = this.inner;
                    match tonic::codegen::Service::call(&mut inner, req).await {
                        Ok(resp) => resp,
                        Err(never) => match never {},
                    }
                }
                Err(e) => e.grpc_status().into_http(),
            };
            super::record(
                "grpc",
                answer(&resp, reached.load(Ordering::Relaxed)),
                started,
            );
            Ok(resp)
        })
    }
}

/// Serve OTLP/gRPC on `listener` until `shutdown`; in-flight exports finish first.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    rx: Arc<Receiver>,
    shutdown: CancellationToken,
) -> Result<(), OtlpError> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(Limits::new(rx), incoming, shutdown.cancelled_owned())
        .await
        .map_err(OtlpError::GrpcServe)
}
