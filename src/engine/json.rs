//! A step's tool payloads as the detectors read them: normalised JSON whose strings borrow
//! from the step's own bytes wherever normalisation left them as they arrived.
//!
//! serde_json's `Value` allocated a B-tree node for every object and a `String` for every key
//! and string of every payload, and freed them all at the end of the step: nearly a third of
//! the engine's allocations. Here an object is one vector of entries kept in key order (the
//! order `Value`'s maps iterate in, and the order the canonical text is written in), and a
//! string that needs no change is a slice of the payload.
use serde_json::Number;
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// An object's entries, sorted by key (byte order, which for UTF-8 is code point order), each
/// key once.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Object<'a>(Vec<(Cow<'a, str>, Json<'a>)>);

impl<'a> Object<'a> {
    /// From entries in the order they were read. A repeated key keeps its last value, as
    /// serde_json's maps do.
    pub(crate) fn from_entries(mut entries: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable, so repeats of a key stay in the order they were read.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        Self(entries)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.0
            .binary_search_by(|e| e.0.as_ref().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Values in key order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Json<'a>> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<'a> Json<'a> {
    pub(crate) fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// A JSON Pointer (RFC 6901) lookup, as `serde_json::Value::pointer` does it: `""` is the
    /// whole value, `~1` is `/` and `~0` is `~`, and an array index has no sign or leading zero.
    pub(crate) fn pointer(&self, pointer: &str) -> Option<&Json<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut at = self;
        for token in rest.split('/') {
            let token: Cow<'_, str> = if token.contains('~') {
                Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
            } else {
                Cow::Borrowed(token)
            };
            at = match at {
                Json::Object(m) => m.get(&token)?,
                Json::Array(a) => {
                    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
                        return None;
                    }
                    a.get(token.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(at)
    }

    /// The same value, owning all its strings.
    pub(crate) fn from_value(v: serde_json::Value) -> Json<'static> {
        use serde_json::Value;
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(b),
            Value::Number(n) => Json::Number(n),
            Value::String(s) => Json::String(Cow::Owned(s)),
            Value::Array(a) => Json::Array(a.into_iter().map(Json::from_value).collect()),
            Value::Object(m) => Json::Object(Object::from_entries(
                m.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), Json::from_value(v)))
                    .collect(),
            )),
        }
    }

    /// As serde_json's `Value`: tests compare with the reference path through it.
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.to_string()),
            Json::Array(a) => Value::Array(a.iter().map(Json::to_value).collect()),
            Json::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn value() -> impl Strategy<Value = Value> {
        let key = prop::sample::select(vec!["a", "b", "0", "1", "~", "a/b", "", "é", "10"]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z ]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 32, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5).prop_map(|kv| {
                    Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    proptest! {
        /// Entries read in any order, repeats included, make the map serde_json makes.
        #[test]
        fn objects_hold_what_serde_json_maps_hold(
            entries in prop::collection::vec(("[abc]{0,2}", any::<i64>()), 0..12)
        ) {
            let mut map = serde_json::Map::new();
            for (k, v) in &entries {
                map.insert(k.clone(), Value::from(*v));
            }
            let obj = Object::from_entries(
                entries
                    .iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::Number((*v).into())))
                    .collect(),
            );
            prop_assert_eq!(Json::Object(obj.clone()).to_value(), Value::Object(map.clone()));
            prop_assert!(obj.iter().map(|(k, _)| k).eq(map.keys().map(String::as_str)));
            for k in ["", "a", "ab", "abc", "b", "cc", "d"] {
                prop_assert_eq!(obj.get(k).map(Json::to_value), map.get(k).cloned());
            }
        }

        /// Pointers resolve as `serde_json::Value::pointer` resolves them, escapes and array
        /// indexes (no sign, no leading zero) included.
        #[test]
        fn pointers_resolve_like_serde_json(
            v in value(),
            tokens in prop::collection::vec(
                prop::sample::select(vec!["a", "b", "0", "1", "00", "+1", "~1", "a~1b", "~0", "", "10", "é"]),
                0..4,
            ),
            rooted in any::<bool>(),
        ) {
            let mut p: String = tokens.iter().map(|t| format!("/{t}")).collect();
            if !rooted {
                p = p.trim_start_matches('/').to_string();
            }
            let j = Json::from_value(v.clone());
            prop_assert_eq!(j.pointer(&p).map(Json::to_value), v.pointer(&p).cloned(), "{}", p);
        }
    }

    #[test]
    fn pointer_edge_cases_resolve_like_serde_json() {
        let v = serde_json::json!({"a": [10, 20], "a/b": 1, "~": 2, "": {"": 3}, "0": [4]});
        let j = Json::from_value(v.clone());
        for p in [
            "", "/", "//", "a", "/a", "/a/0", "/a/1", "/a/2", "/a/00", "/a/01", "/a/+1", "/a/-1",
            "/a~1b", "/~0", "/~1", "/0/0", "/0/x",
        ] {
            assert_eq!(
                j.pointer(p).map(Json::to_value),
                v.pointer(p).cloned(),
                "{p}"
            );
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        let obj = Object::from_entries(vec![
            (Cow::Borrowed("b"), Json::Bool(true)),
            (Cow::Borrowed("a"), Json::Null),
            (Cow::Borrowed("b"), Json::Bool(false)),
            (Cow::Borrowed("a"), Json::Number(1.into())),
            (Cow::Borrowed("b"), Json::Null),
        ]);
        assert_eq!(obj.len(), 2);
        assert_eq!(obj.get("a"), Some(&Json::Number(1.into())));
        assert_eq!(obj.get("b"), Some(&Json::Null));
    }
}
