//! keelwave's request decoding, reproduced: Go's `encoding/json` with `DisallowUnknownFields`
//! into the server's payload structs, then go-playground `validator` tags.
//!
//! Behaviours kept on purpose, because an SDK or hand-written client may rely on them:
//! - only the first JSON value of the body is read (trailing bytes are ignored, as `Decoder` does);
//! - field names match exactly, else ASCII case-insensitively (Go's fallback); the last
//!   duplicate wins; any other key is `json: unknown field "k"`;
//! - `null` leaves a field unset; a wrong JSON type is Go's `cannot unmarshal` message;
//! - integers must be integer literals (`1.0` is rejected for an `int`, as in Go);
//! - validation errors use the validator's `Key: '...' Error:Field validation for ...` text.
use super::IngestError;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The fields of one decoded request body, by position in the struct's field list.
pub(crate) struct Fields<'a> {
    go_type: &'static str,
    names: &'static [&'static str],
    values: Vec<Option<&'a RawValue>>,
}

struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Entries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some((k, raw)) = m.next_entry::<String, &'de RawValue>()? {
                    v.push((k, raw));
                }
                Ok(Entries(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Entries(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

fn json_kind(first: u8) -> &'static str {
    match first {
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        b'n' => "null",
        b'{' => "object",
        _ => "number",
    }
}

/// Decode `body` as Go decodes it into `main.<go_type>` with unknown fields disallowed.
pub(crate) fn decode<'a>(
    body: &'a [u8],
    go_type: &'static str,
    names: &'static [&'static str],
) -> Result<Fields<'a>, IngestError> {
    let bad = |m: String| IngestError::BadRequest(m);
    let Some(&first) = body.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(bad("EOF".into()));
    };
    let kind = json_kind(first);
    if kind != "object" && kind != "null" {
        // Go reads the value to report its type; a malformed one is a syntax error first.
        let mut values =
            serde_json::Deserializer::from_slice(body).into_iter::<serde::de::IgnoredAny>();
        if let Some(Err(e)) = values.next() {
            return Err(bad(e.to_string()));
        }
        return Err(bad(format!(
            "json: cannot unmarshal {kind} into Go value of type main.{go_type}"
        )));
    }
    let mut stream = serde_json::Deserializer::from_slice(body).into_iter::<Entries<'a>>();
    let entries = match stream.next() {
        Some(Ok(e)) => e,
        Some(Err(e)) if e.is_eof() => return Err(bad("unexpected EOF".into())),
        Some(Err(e)) => return Err(bad(e.to_string())),
        None => return Err(bad("EOF".into())),
    };
    let mut values = vec![None; names.len()];
    for (k, raw) in entries.0 {
        let idx = names
            .iter()
            .position(|n| *n == k)
            .or_else(|| names.iter().position(|n| n.eq_ignore_ascii_case(&k)));
        match idx {
            Some(i) => values[i] = Some(raw),
            None => return Err(bad(format!("json: unknown field {}", go_quote(&k)))),
        }
    }
    Ok(Fields {
        go_type,
        names,
        values,
    })
}

fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn is_null(raw: &RawValue) -> bool {
    raw.get().trim() == "null"
}

impl<'a> Fields<'a> {
    fn raw_at(&self, name: &str) -> Option<&'a RawValue> {
        self.names
            .iter()
            .position(|n| *n == name)
            .and_then(|i| self.values[i])
            .filter(|r| !is_null(r))
    }

    fn type_error(&self, name: &str, raw: &RawValue, go: &str) -> IngestError {
        let text = raw.get().trim();
        let first = text.bytes().next().unwrap_or(b'0');
        let what = match json_kind(first) {
            "number" => format!("number {text}"),
            k => k.to_string(),
        };
        IngestError::BadRequest(format!(
            "json: cannot unmarshal {what} into Go struct field {}.{name} of type {go}",
            self.go_type
        ))
    }

    /// Any JSON value, kept as the exact bytes that arrived (`json.RawMessage`).
    pub(crate) fn raw(&self, name: &str) -> Option<&'a RawValue> {
        self.raw_at(name)
    }

    pub(crate) fn string(&self, name: &str) -> Result<Option<String>, IngestError> {
        let Some(raw) = self.raw_at(name) else {
            return Ok(None);
        };
        serde_json::from_str::<String>(raw.get())
            .map(Some)
            .map_err(|_| self.type_error(name, raw, "string"))
    }

    pub(crate) fn int(&self, name: &str) -> Result<Option<i64>, IngestError> {
        let Some(raw) = self.raw_at(name) else {
            return Ok(None);
        };
        raw.get()
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| self.type_error(name, raw, "int"))
    }

    pub(crate) fn float(&self, name: &str) -> Result<Option<f64>, IngestError> {
        let Some(raw) = self.raw_at(name) else {
            return Ok(None);
        };
        serde_json::from_str::<f64>(raw.get())
            .ok()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| self.type_error(name, raw, "float64"))
    }

    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>, IngestError> {
        let Some(raw) = self.raw_at(name) else {
            return Ok(None);
        };
        serde_json::from_str::<bool>(raw.get())
            .map(Some)
            .map_err(|_| self.type_error(name, raw, "bool"))
    }

    /// `time.Time`: an RFC 3339 string.
    pub(crate) fn time(&self, name: &str) -> Result<Option<OffsetDateTime>, IngestError> {
        let Some(s) = self.string(name).map_err(|e| match e {
            IngestError::BadRequest(m) => {
                IngestError::BadRequest(m.replace("of type string", "of type time.Time"))
            }
            other => other,
        })?
        else {
            return Ok(None);
        };
        OffsetDateTime::parse(&s, &Rfc3339).map(Some).map_err(|_| {
            IngestError::BadRequest(format!(
                "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                go_quote(&s),
                go_quote(&s)
            ))
        })
    }

    /// `uuid.UUID` (google/uuid `Parse`): a string in one of its accepted forms.
    pub(crate) fn uuid(&self, name: &str) -> Result<Option<u128>, IngestError> {
        let Some(s) = self.string(name).map_err(|e| match e {
            IngestError::BadRequest(m) => {
                IngestError::BadRequest(m.replace("of type string", "of type uuid.UUID"))
            }
            other => other,
        })?
        else {
            return Ok(None);
        };
        parse_uuid(&s).map(Some).map_err(IngestError::BadRequest)
    }
}

/// google/uuid `Parse`: `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, with `urn:uuid:` or braces, or
/// 32 hex digits. Errors carry the library's messages.
pub(crate) fn parse_uuid(s: &str) -> Result<u128, String> {
    let body = match s.len() {
        36 => s,
        45 if s
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("urn:uuid:")) =>
        {
            &s[9..]
        }
        38 if s.starts_with('{') && s.ends_with('}') => &s[1..37],
        32 => {
            return u128::from_str_radix(s, 16)
                .ok()
                .filter(|_| s.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| "invalid UUID format".to_string())
        }
        n => return Err(format!("invalid UUID length: {n}")),
    };
    let b = body.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return Err("invalid UUID format".into());
    }
    let hex: String = body.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err("invalid UUID format".into());
    }
    u128::from_str_radix(&hex, 16).map_err(|_| "invalid UUID format".into())
}

/// go-playground/validator failures, collected in struct order.
pub(crate) struct Violations {
    go_type: &'static str,
    list: Vec<(&'static str, &'static str)>,
}

impl Violations {
    pub(crate) fn new(go_type: &'static str) -> Self {
        Self {
            go_type,
            list: Vec::new(),
        }
    }

    pub(crate) fn check(&mut self, ok: bool, go_field: &'static str, tag: &'static str) -> bool {
        if !ok {
            self.list.push((go_field, tag));
        }
        ok
    }

    /// `max=N` on a string counts runes, as the validator does.
    pub(crate) fn max_runes(&mut self, v: Option<&str>, n: usize, go_field: &'static str) {
        if let Some(s) = v {
            self.check(s.chars().count() <= n, go_field, "max");
        }
    }

    /// `omitempty,gte=0` on a pointer: only a present value is checked.
    pub(crate) fn gte0_opt_int(&mut self, v: Option<i64>, go_field: &'static str) {
        if let Some(x) = v {
            self.check(x >= 0, go_field, "gte");
        }
    }

    pub(crate) fn finish(self) -> Result<(), IngestError> {
        if self.list.is_empty() {
            return Ok(());
        }
        let msg = self
            .list
            .iter()
            .map(|(f, tag)| {
                format!(
                    "Key: '{}.{f}' Error:Field validation for '{f}' failed on the '{tag}' tag",
                    self.go_type
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Err(IngestError::BadRequest(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &["agent_name", "input", "metadata"];

    fn msg(r: Result<Fields<'_>, IngestError>) -> String {
        match r {
            Err(IngestError::BadRequest(m)) => m,
            Err(e) => panic!("not a 400: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn decodes_like_go() {
        let body = br#"{"AGENT_NAME":"a","agent_name":"b","metadata":{"k":[1, 2]}} trailing"#;
        let f = decode(body, "p", NAMES).expect("go accepts");
        assert_eq!(f.string("agent_name").unwrap().as_deref(), Some("b"));
        assert_eq!(f.raw("metadata").map(|r| r.get()), Some(r#"{"k":[1, 2]}"#));
        assert_eq!(f.string("input").unwrap(), None);
        assert_eq!(
            msg(decode(br#"{"agent_name":"a","output":"x"}"#, "p", NAMES)),
            r#"json: unknown field "output""#
        );
        assert_eq!(msg(decode(b"  ", "p", NAMES)), "EOF");
        assert_eq!(
            msg(decode(b"[1]", "p", NAMES)),
            "json: cannot unmarshal array into Go value of type main.p"
        );
        let f = decode(br#"{"agent_name":5}"#, "p", NAMES).unwrap();
        match f.string("agent_name") {
            Err(IngestError::BadRequest(m)) => assert_eq!(
                m,
                "json: cannot unmarshal number 5 into Go struct field p.agent_name of type string"
            ),
            _ => panic!("type error expected"),
        }
        assert!(decode(b"null", "p", NAMES).is_ok());
    }

    #[test]
    fn ints_must_be_integer_literals() {
        let names: &'static [&'static str] = &["n"];
        let f = decode(br#"{"n":1.0}"#, "p", names).unwrap();
        assert!(f.int("n").is_err());
        let f = decode(br#"{"n":-3}"#, "p", names).unwrap();
        assert_eq!(f.int("n").unwrap(), Some(-3));
    }

    #[test]
    fn uuid_forms_of_google_uuid() {
        let want = 0x0190c0de_0000_7000_8000_000000000001u128;
        for s in [
            "0190c0de-0000-7000-8000-000000000001",
            "0190C0DE-0000-7000-8000-000000000001",
            "urn:uuid:0190c0de-0000-7000-8000-000000000001",
            "{0190c0de-0000-7000-8000-000000000001}",
            "0190c0de000070008000000000000001",
        ] {
            assert_eq!(parse_uuid(s), Ok(want), "{s}");
        }
        assert_eq!(parse_uuid("abc"), Err("invalid UUID length: 3".into()));
        assert!(parse_uuid("0190c0de-0000-7000-8000_000000000001").is_err());
    }

    #[test]
    fn violations_read_like_the_validator() {
        let mut v = Violations::new("ingestAgentStepPayload");
        v.check(false, "StepType", "oneof");
        v.max_runes(Some("ééé"), 3, "Content");
        v.gte0_opt_int(Some(-1), "Tokens");
        match v.finish() {
            Err(IngestError::BadRequest(m)) => assert_eq!(
                m,
                "Key: 'ingestAgentStepPayload.StepType' Error:Field validation for 'StepType' failed on the 'oneof' tag\n\
                 Key: 'ingestAgentStepPayload.Tokens' Error:Field validation for 'Tokens' failed on the 'gte' tag"
            ),
            _ => panic!("expected 400"),
        }
    }
}
