//! Request bodies to `ExportTraceServiceRequest` and responses back, in the request's
//! encoding (OTLP/HTTP: `application/x-protobuf` or `application/json`, optionally gzip).
pub(crate) use super::encoding::{encode, Encoding};
use super::error::OtlpError;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use std::io::Read;

/// Undo a compression (HTTP's `Content-Encoding`, gRPC's `grpc-encoding`: `gzip`, `deflate`
/// (zlib, as both protocols mean it) or none), reading at most `limit` bytes of the result: a
/// small compressed body may not expand without bound.
pub(crate) fn decompress(
    body: &[u8],
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<Vec<u8>, OtlpError> {
    let encoding = content_encoding.map(str::trim).unwrap_or_default();
    let reader: Box<dyn Read + '_> = match encoding {
        "" | "identity" => return Ok(body.to_vec()),
        e if e.eq_ignore_ascii_case("gzip") => Box::new(flate2::read::GzDecoder::new(body)),
        e if e.eq_ignore_ascii_case("deflate") => Box::new(flate2::read::ZlibDecoder::new(body)),
        other => {
            return Err(OtlpError::Malformed(format!(
                "unsupported encoding `{other}` (gzip, deflate or none)"
            )))
        }
    };
    let mut out = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| OtlpError::Malformed(format!("{encoding} body: {e}")))?;
    if out.len() > limit {
        return Err(OtlpError::TooLarge(limit));
    }
    Ok(out)
}

pub(crate) fn decode(bytes: &[u8], enc: Encoding) -> Result<ExportTraceServiceRequest, OtlpError> {
    match enc {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(bytes)
            .map_err(|e| OtlpError::Malformed(format!("protobuf body: {e}"))),
        Encoding::Json => {
            let mut v: serde_json::Value = serde_json::from_slice(bytes)
                .map_err(|e| OtlpError::Malformed(format!("JSON body: {e}")))?;
            quote_nanos(&mut v);
            serde_json::from_value(v).map_err(|e| OtlpError::Malformed(format!("JSON body: {e}")))
        }
    }
}

/// OTLP/JSON writes the 64-bit `*UnixNano` times as decimal strings, and receivers accept
/// plain numbers too (protobuf's JSON mapping does); opentelemetry-proto reads only the
/// strings, so numbers are turned into them first.
fn quote_nanos(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                if k.ends_with("UnixNano") {
                    if let serde_json::Value::Number(n) = val {
                        *val = serde_json::Value::String(n.to_string());
                        continue;
                    }
                }
                quote_nanos(val);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(quote_nanos),
        _ => {}
    }
}
