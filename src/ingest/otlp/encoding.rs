//! The two OTLP/HTTP encodings, and a message written in one of them (request bodies are read
//! in `decode`, error answers written in `error`).
use prost::Message;

/// The two OTLP/HTTP encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// From `Content-Type` (parameters such as `; charset=utf-8` ignored).
    pub(crate) fn from_content_type(ct: Option<&str>) -> Option<Self> {
        let mime = ct.unwrap_or_default().split(';').next().unwrap_or_default();
        match mime.trim().to_ascii_lowercase().as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Self::Protobuf),
            "application/json" => Some(Self::Json),
            _ => None,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// `message` in `enc` (a response body, or the `google.rpc.Status` of an error).
pub(crate) fn encode<M: Message + serde::Serialize>(message: &M, enc: Encoding) -> Vec<u8> {
    match enc {
        Encoding::Protobuf => message.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec()),
    }
}
