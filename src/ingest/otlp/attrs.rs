//! Reading OTLP attributes: the typed `AnyValue` as the text, number or JSON eddy needs.
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;

/// The value of `key` among `attrs` (the last one wins, as in the SDKs' attribute maps).
pub(crate) fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .rev()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

/// A string attribute, or the text form of a scalar one; empty strings count as absent.
pub(crate) fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    let s = match get(attrs, key)? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        Value::BoolValue(b) => b.to_string(),
        other => to_json(other).to_string(),
    };
    (!s.is_empty()).then_some(s)
}

/// A non-negative integer attribute (integers sent as doubles or strings are accepted too:
/// instrumentors differ).
pub(crate) fn count(attrs: &[KeyValue], key: &str) -> Option<u64> {
    match get(attrs, key)? {
        Value::IntValue(i) => u64::try_from(*i).ok(),
        Value::DoubleValue(d) if d.is_finite() && *d >= 0.0 && d.fract() == 0.0 => Some(*d as u64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A span attribute, else the same key on one of the span's events (older GenAI
/// instrumentations put tool arguments and results, and message contents, on events).
pub(crate) fn span_text(span: &Span, key: &str) -> Option<String> {
    text(&span.attributes, key)
        .or_else(|| span.events.iter().find_map(|e| text(&e.attributes, key)))
}

/// `value` as JSON: scalars as themselves, arrays and key/value lists as arrays and objects,
/// bytes as base64 (OTLP/JSON's own form for them).
pub(crate) fn to_json(value: &Value) -> serde_json::Value {
    use base64::Engine;
    let any = |v: &AnyValue| v.value.as_ref().map_or(serde_json::Value::Null, to_json);
    match value {
        Value::StringValue(s) => s.clone().into(),
        Value::BoolValue(b) => (*b).into(),
        Value::IntValue(i) => (*i).into(),
        Value::DoubleValue(d) => serde_json::Number::from_f64(*d)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::ArrayValue(a) => a.values.iter().map(any).collect(),
        Value::KvlistValue(l) => l
            .values
            .iter()
            .map(|kv| {
                (
                    kv.key.clone(),
                    kv.value.as_ref().map_or(serde_json::Value::Null, any),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Value::BytesValue(b) => base64::engine::general_purpose::STANDARD.encode(b).into(),
    }
}

/// Tool arguments or results as the JSON text of a v1 `tool_input`/`tool_output`: the text
/// itself when it already is JSON (the conventions carry a JSON-encoded string), else the text
/// as a JSON string. Either way the same span gives the same bytes.
pub(crate) fn json_text(attrs_text: Option<String>) -> Option<crate::contract::JsonText> {
    let t = attrs_text?;
    crate::contract::JsonText::parse(&t).ok().or_else(|| {
        crate::contract::JsonText::parse(&serde_json::Value::String(t).to_string()).ok()
    })
}
