//! Parsing and normalising in one pass: a serde visitor that builds the normalised [`Json`]
//! as the payload is read, borrowing the strings it leaves unchanged. It must give exactly
//! what parsing with serde_json and then [`Volatility::normalize_in_place`] gives; the tests
//! hold it to that.
use super::fingerprint_config::REDACTED;
use super::key_sets::{holds_headers, with_key_norm, Volatility, REDACT};
use super::normalize::normalize_number;
use crate::contract::JsonText;
use crate::engine::json::{Json, Object};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;

impl Volatility<'_> {
    /// [`parse_raw`] then [`Volatility::normalize_in_place`], in one pass: volatile keys are
    /// dropped and strings normalised as they are read, so the tree is walked once, and a
    /// string left as it arrived is borrowed from `raw`. Same result, errors included (an
    /// unparsable payload is normalised as a string).
    pub(crate) fn parse_normalized<'r>(&self, raw: Option<&'r JsonText>) -> Json<'r> {
        let Some(r) = raw else {
            return Json::Null;
        };
        let mut de = serde_json::Deserializer::from_str(r.get());
        match Normalizing(self, false)
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v))
        {
            Ok(v) => v,
            Err(_) => Json::String(
                self.normalize_str(r.get())
                    .map_or(Cow::Borrowed(r.get()), Cow::Owned),
            ),
        }
    }
}

/// serde_json's `Value` reads an object whose first key is this as the JSON text of its
/// value (its `RawValue` round trip); [`Normalizing`] must read such payloads the same way.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Builds the normalised [`Json`] while deserialising: what serde_json's `Value` visitor does,
/// followed by what [`Volatility::normalize_in_place`] does to each node. The flag says the
/// value is a header container's (whose volatile headers are dropped too).
struct Normalizing<'v, 'k>(&'v Volatility<'k>, bool);

impl<'de> DeserializeSeed<'de> for Normalizing<'_, '_> {
    type Value = Json<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Normalizing<'_, '_> {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(i.into()))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(u.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Json<'de>, E> {
        Ok(serde_json::Number::from_f64(f)
            .map_or(Json::Null, |n| Json::Number(normalize_number(&n))))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(
            self.0.normalize_str(s).map_or(Cow::Borrowed(s), Cow::Owned),
        ))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(
            self.0.normalize_str(s).unwrap_or_else(|| s.to_owned()),
        )))
    }

    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(
            self.0.normalize_str(&s).unwrap_or(s),
        )))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        self.deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element_seed(Normalizing(self.0, false))? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let (vol, headers) = (self.0, self.1);
        let mut out = Vec::new();
        let mut first = true;
        while let Some(k) = map.next_key_seed(KeySeed)? {
            if std::mem::take(&mut first) && k == RAW_VALUE_TOKEN {
                let text: String = map.next_value()?;
                let mut v: Value = serde_json::from_str(&text).map_err(de::Error::custom)?;
                vol.normalize_node(&mut v, headers);
                return Ok(Json::from_value(v));
            }
            let (redact, volatile, holds) = with_key_norm(&k, |norm| {
                let flags = vol.flags(norm);
                (
                    flags & REDACT != 0,
                    flags & REDACT == 0
                        && (vol.is_volatile_key(&k, norm, flags)
                            || (headers && vol.is_volatile_header(norm))),
                    holds_headers(norm),
                )
            });
            if redact || volatile {
                // Read as serde_json would, so a payload it rejects is rejected here too.
                let _: Value = map.next_value()?;
                if redact {
                    out.push((k, Json::String(Cow::Borrowed(REDACTED))));
                }
            } else {
                let v = map.next_value_seed(Normalizing(vol, holds))?;
                out.push((k, v));
            }
        }
        Ok(Json::Object(Object::from_entries(out)))
    }
}

/// An object key, borrowed from the payload when it has no escapes: a dropped key costs no
/// allocation.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s))
    }
}

/// Parse raw JSON; an unparsable payload (cannot happen for decoded events) is kept as a string.
#[cfg(test)]
pub(crate) fn parse_raw(raw: Option<&JsonText>) -> Value {
    match raw {
        None => Value::Null,
        Some(r) => {
            serde_json::from_str(r.get()).unwrap_or_else(|_| Value::String(r.get().to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::DetectorConfig;
    use crate::engine::fingerprint::{canonical_string, KeySets};

    fn old_path(vol: &Volatility, raw: &str) -> Value {
        let r = JsonText::parse(raw).unwrap();
        let mut v = parse_raw(Some(&r));
        vol.normalize_in_place(&mut v);
        v
    }

    fn new_path(vol: &Volatility, raw: &str) -> Value {
        let r = JsonText::parse(raw).unwrap();
        vol.parse_normalized(Some(&r)).to_value()
    }

    /// Configurations that exercise every branch: defaults, no suffix rule, no value
    /// normalisation, and a tool with volatile keys of its own.
    fn key_sets() -> Vec<KeySets> {
        let mut cfgs = vec![DetectorConfig::default(); 3];
        cfgs[1].fingerprint.volatile_key_suffixes = false;
        cfgs[2].fingerprint.normalize_values = false;
        let mut tooled = DetectorConfig::default();
        tooled.tools.insert(
            "t".into(),
            crate::engine::detectors::ToolPolicy {
                volatile_keys: vec!["cursor".into()],
                ..Default::default()
            },
        );
        cfgs.push(tooled);
        cfgs.iter().map(DetectorConfig::key_sets).collect()
    }

    fn assert_same(raw: &str) {
        for keys in key_sets() {
            for tool in [None, Some("t")] {
                let vol = keys.volatility(tool);
                let (old, new) = (old_path(&vol, raw), new_path(&vol, raw));
                assert_eq!(old, new, "{raw}");
                let r = JsonText::parse(raw).unwrap();
                assert_eq!(
                    canonical_string(&Json::from_value(old)),
                    canonical_string(&vol.parse_normalized(Some(&r))),
                    "{raw}"
                );
            }
        }
    }

    #[test]
    fn one_pass_parse_matches_parse_then_normalize() {
        let cases = [
            "null",
            "{}",
            "[]",
            "true",
            r#""plain""#,
            r#""job 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab at 2024-01-01T00:00:00Z""#,
            r#""aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee""#,
            r#"{"b":1.0,"a":{"y":[1e2,2.5,-0.0,1e20,-5,18446744073709551615],"x":"s"}}"#,
            r#"{"q":"x","meta":{"requestId":"abc","sentAt":"x"},"trace_id":"9f8e7d6c5b4a39281706f5e4d3c2b1a0"}"#,
            r#"{"token":"a","nested":[{"password":{"deep":[1,2]}}],"Cookie":null}"#,
            r#"{"a":1,"a":"2024-01-01T00:00:00Z","request_id":1,"request_id":2}"#,
            r#"{"request\u005fid":1,"caf\u00e9":"\u00e9\n\t\u0001","\"":"\\"}"#,
            r#"{"out":"HTTP/1.1 200 OK\ndate: Mon\nx-request-id: 8060c5e0\nAuthorization: b\n\nbody 12:30:45 1767225600"}"#,
            r#"{"cursor":"c1","created_at":5,"chat":"hi","format":"f","lastTimestamp":3,"At":1,"xAt":2}"#,
            // serde_json's `Value` fails on these: both paths fall back to the raw text.
            r#"{"a":1e400}"#,
            r#"{"token":1e400}"#,
            r#"{"request_id":[1e400]}"#,
            // serde_json's `Value` reads its own RawValue token as embedded JSON.
            r#"{"$serde_json::private::RawValue":"[1,{\"request_id\":2,\"x\":\"2024-01-01T00:00:00Z\"}]"}"#,
            r#"{"$serde_json::private::RawValue":"not json"}"#,
            r#"{"$serde_json::private::RawValue":5}"#,
            r#"{"$serde_json::private::RawValue":"1","b":2}"#,
            r#"{"b":2,"$serde_json::private::RawValue":"1"}"#,
            r#"[{"$serde_json::private::RawValue":"{\"token\":1}"}]"#,
        ];
        for c in cases {
            assert_same(c);
        }
        // The fallback really is taken for the unparsable ones.
        let keys = DetectorConfig::default().key_sets();
        assert_eq!(
            new_path(&keys.volatility(None), r#"{"a":1e400}"#),
            Value::String(r#"{"a":1e400}"#.into())
        );
        assert_eq!(new_path(&keys.volatility(None), "[]"), Value::Array(vec![]));
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "q",
            "path",
            "request_id",
            "requestId",
            "sentAt",
            "created_at",
            "format",
            "token",
            "API-Key",
            "cursor",
            "x",
            "timestamp",
            "é",
            "a\"b",
            "ts",
        ]);
        let text = prop::sample::select(vec![
            "",
            "plain words",
            "src/mod1.rs",
            "2024-01-01T00:00:00Z",
            "id 9f8e7d6c5b4a39281706f5e4d3c2b1a0 took 0.53s",
            "HTTP/1.1 200\ndate: x\n\nok",
            "caf\u{e9}\n\u{1}",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1.0e12f64..1.0e12).prop_map(Value::from),
            text.prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn one_pass_parse_matches_on_generated_payloads(v in json_value()) {
            assert_same(&serde_json::to_string(&v).unwrap());
        }
    }
}
