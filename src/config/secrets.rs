//! How secret tables are written: `ingest_api_keys` (key → project) and `ui_tokens`
//! (token → user name) are read the same way, so one Kubernetes Secret or vault template feeds
//! either. In the TOML file a table; in the environment (and any text source) one string,
//! `secret=name` entries separated by commas or newlines:
//!
//! ```text
//! EDDY_INGEST_API_KEYS="kw_AAAA=proj-a,kw_BBBB=proj-b"
//! EDDY_UI_TOKENS="3f9c...e1=ops"
//! ```
//!
//! An entry splits at its last `=`, so base64 padding in a secret survives; a name holds no `=`.
//! Errors name an entry by position, never by its text. Lists of addresses
//! (`ui_trusted_proxies`) take a TOML array or the same comma-separated text.
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;

/// Parse `secret=name` entries (commas or newlines between them).
pub(crate) fn parse_table(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let entries = text
        .split([',', '\n', '\r'])
        .map(str::trim)
        .filter(|e| !e.is_empty());
    for (n, entry) in entries.enumerate() {
        let Some((secret, name)) = entry.rsplit_once('=') else {
            return Err(format!(
                "entry #{} is not `<secret>=<name>` (no `=`)",
                n + 1
            ));
        };
        let (secret, name) = (secret.trim(), name.trim());
        if secret.is_empty() || name.is_empty() {
            return Err(format!(
                "entry #{} is not `<secret>=<name>` (an empty side)",
                n + 1
            ));
        }
        if out.insert(secret.to_string(), name.to_string()).is_some() {
            return Err(format!("entry #{} repeats an earlier secret", n + 1));
        }
    }
    Ok(out)
}

/// A secret table from a TOML table or from `secret=name,...` text.
pub(crate) fn table<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a table of secret = name, or text `secret=name,secret=name`")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            parse_table(s).map_err(E::custom)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((k, v)) = m.next_entry::<String, String>()? {
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

/// A list of strings from a TOML array or from comma-separated text.
pub(crate) fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of strings, or comma-separated text")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            // Also what a TOML array looks like when it arrives as text from the environment.
            let s = s.trim();
            let s = s
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .unwrap_or(s);
            Ok(s.split([',', '\n'])
                .map(|x| x.trim().trim_matches(['"', '\'']).trim())
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(x) = s.next_element::<String>()? {
                out.push(x);
            }
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

/// The JSON form of a secret table with the secrets replaced by their position, for
/// `eddy config check` and logs: `{"***1": "proj-a"}` shows the names and how many there are.
pub(crate) fn masked(table: serde_json::Value) -> serde_json::Value {
    match table {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.into_iter()
                .enumerate()
                .map(|(i, (_, name))| (format!("***{}", i + 1), name))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_split_at_the_last_equals_and_never_echo_a_secret() {
        let t = parse_table(" kw_A=proj-a ,\nkw_B=proj-b\n\nYWJj==ops,").unwrap();
        let want: BTreeMap<String, String> =
            [("kw_A", "proj-a"), ("kw_B", "proj-b"), ("YWJj=", "ops")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
        assert_eq!(t, want);
        for (bad, why) in [
            ("kw_ok=p,TOPSECRET", "entry #2"),
            ("TOPSECRET=", "entry #1"),
            ("=TOPSECRET", "entry #1"),
            ("TOPSECRET=a,TOPSECRET=b", "entry #2"),
        ] {
            let err = parse_table(bad).unwrap_err();
            assert!(
                err.contains(why) && !err.contains("TOPSECRET"),
                "{bad}: {err}"
            );
        }
        assert!(parse_table("").unwrap().is_empty());
    }
}
