//! The receiver's errors and the answers an OpenTelemetry exporter expects for them: a
//! `google.rpc.Status` body in the request's encoding; 429/502/503/504 are the codes exporters
//! retry (after `Retry-After`), every other one drops the batch.
use super::encoding::{encode, Encoding};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// 400: the body cannot be read as an export request; the reason goes back to the client.
    #[error("{0}")]
    Malformed(String),
    #[error("unsupported Content-Type `{0}`: application/x-protobuf or application/json")]
    UnsupportedMediaType(String),
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    #[error("unauthorized")]
    Unauthorized,
    /// 429: the publish queue is full; the exporter retries later.
    #[error("receiver busy: {0}")]
    Busy(String),
    /// 503: Kafka did not acknowledge the events; the exporter retries the whole batch, which
    /// is safe (a span exported twice is a redelivery).
    #[error("events not acknowledged by Kafka: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    #[error(transparent)]
    Emit(#[from] crate::emit::EmitError),
    #[error(transparent)]
    Admin(#[from] crate::admin::AdminError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("OTLP/HTTP receiver failed: {0}")]
    Serve(#[source] std::io::Error),
    #[error("OTLP/gRPC receiver failed: {0}")]
    GrpcServe(#[source] tonic::transport::Error),
}

/// `google.rpc.Status`, which OTLP/HTTP puts in the body of every error response. Not among
/// opentelemetry-proto's messages (it is googleapis'); two fields are all OTLP uses.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
pub(crate) struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub(crate) code: i32,
    #[prost(string, tag = "2")]
    pub(crate) message: String,
}

impl OtlpError {
    fn status(&self) -> StatusCode {
        match self {
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The gRPC code of the same failure (what a collector puts in `Status.code`).
    fn rpc_code(&self) -> i32 {
        match self {
            Self::Malformed(_) | Self::UnsupportedMediaType(_) | Self::TooLarge(_) => 3,
            Self::Unauthorized => 16,
            Self::Busy(_) => 8,
            Self::Unavailable(_) => 14,
            _ => 13,
        }
    }

    /// The answer, encoded as the request was (JSON when that is not known).
    pub(crate) fn response(&self, enc: Encoding) -> Response {
        let status = self.status();
        let message = match self {
            Self::Unavailable(_) | Self::Busy(_) => {
                tracing::warn!(error = %self, "ingest-otlp: asking the exporter to retry");
                self.to_string()
            }
            e if status.is_server_error() => {
                tracing::error!(error = %e, "ingest-otlp: internal error");
                "internal error".to_string()
            }
            e => e.to_string(),
        };
        let body = encode(
            &RpcStatus {
                code: self.rpc_code(),
                message,
            },
            enc,
        );
        let mut r = (status, body).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(enc.content_type()),
        );
        if matches!(self, Self::Unavailable(_) | Self::Busy(_)) {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }

    /// The same answer for OTLP/gRPC: the status code a collector gives (`rpc_code`), with
    /// `RetryInfo` (1 s) on the two retryable ones. Exporters retry UNAVAILABLE, and
    /// RESOURCE_EXHAUSTED only when it carries `RetryInfo` (the OTLP specification's rule; the
    /// Go exporter reads it from the status details, the Python one from the
    /// `google.rpc.retryinfo-bin` trailer, so both are sent).
    pub(crate) fn grpc_status(&self) -> tonic::Status {
        use tonic_types::{ErrorDetails, StatusExt};
        let code = tonic::Code::from_i32(self.rpc_code());
        let message = match self {
            e if code == tonic::Code::Internal => {
                tracing::error!(error = %e, "ingest-otlp: internal error");
                "internal error".to_string()
            }
            e => e.to_string(),
        };
        if !matches!(self, Self::Unavailable(_) | Self::Busy(_)) {
            return tonic::Status::new(code, message);
        }
        tracing::warn!(error = %self, "ingest-otlp: asking the exporter to retry");
        let delay = std::time::Duration::from_secs(1);
        let mut metadata = tonic::metadata::MetadataMap::new();
        let retry_info = tonic_types::pb::RetryInfo::from(tonic_types::RetryInfo::new(Some(delay)));
        metadata.insert_bin(
            "google.rpc.retryinfo-bin",
            tonic::metadata::MetadataValue::from_bytes(&prost::Message::encode_to_vec(&retry_info)),
        );
        tonic::Status::with_error_details_and_metadata(
            code,
            message,
            ErrorDetails::with_retry_info(Some(delay)),
            metadata,
        )
    }

    /// The `answer` label in the request metric.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Malformed(_) | Self::UnsupportedMediaType(_) | Self::TooLarge(_) => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::Busy(_) | Self::Unavailable(_) => "retry",
            _ => "error",
        }
    }
}

impl IntoResponse for OtlpError {
    fn into_response(self) -> Response {
        self.response(Encoding::Json)
    }
}
