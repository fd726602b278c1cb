//! Whether a step failed, how (whether retrying can help) and the identity of its error: read
//! from the error fields of the output, word by word, never from substrings (a file called
//! `auth.py` is no auth failure).
use super::lexicon::{
    ERROR_FIELDS, FAILURE_MARKERS, NOT_FOUND_PHRASES, NOT_FOUND_WORDS, PERMANENT_PHRASES,
    PERMANENT_WORDS, RETRYABLE_PHRASES, RETRYABLE_WORDS, SCHEMA_WORDS,
};
use crate::contract::Step;
use crate::engine::detectors::{DetectorConfig, ToolPolicy};
use crate::engine::json::Json;
use crate::engine::memo::Memo;
use crate::engine::text::{ascii_tokens, key64, normalize_error, Words};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailClass {
    /// auth, permission, not found, invalid/schema, unknown tool: retrying cannot help.
    Permanent,
    /// 429, timeouts, 5xx, "temporarily unavailable": retrying may help.
    Retryable,
    /// A failure the agent is expected to recover from (re-read then retry an edit).
    Recoverable,
    Other,
}

impl FailClass {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailClass::Permanent => "permanent",
            FailClass::Retryable => "retryable",
            FailClass::Recoverable => "recoverable",
            FailClass::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub(crate) class: FailClass,
    /// Normalised error text identity (volatile values removed, lowercase, whitespace collapsed).
    pub(crate) error_key: u64,
    /// For permanent failures that refuse the request (denied, invalid, unrecognised), the
    /// identity of the error's main message with what names the request masked (quoted values,
    /// identifiers, paths, ARNs, numbers, positions): `Unrecognized name: user_id at [1:8]` and
    /// `Unrecognized name: userId at [1:22]` are one refusal. The error key otherwise, and for
    /// "not found": a batch of lookups meets one for each entity that is missing.
    pub(crate) shape_key: u64,
    /// A permanent failure saying the thing asked for does not exist (and it is no part of a
    /// schema): lookups of different things that do not exist are a batch, not a loop.
    pub(crate) not_found: bool,
    pub(crate) text: String,
}

fn collect_text(v: &Json<'_>, out: &mut String, depth: usize) {
    if depth > 6 || out.len() > 4000 {
        return;
    }
    match v {
        Json::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Json::Number(n) => {
            use std::fmt::Write;
            // Writing to a String cannot fail.
            let _ = write!(out, "{n} ");
        }
        Json::Bool(_) | Json::Null => {}
        Json::Array(a) => a.iter().for_each(|x| collect_text(x, out, depth + 1)),
        Json::Object(m) => m.values().for_each(|x| collect_text(x, out, depth + 1)),
    }
}

/// The error text of a failed output: its error-ish fields when it is an object, else all text.
fn error_text(out: &Json<'_>) -> String {
    let mut s = String::new();
    match out {
        // Few keys (the usual error object): each looked up in the field list, instead of
        // every field in the map, and then read in the list's order as below.
        Json::Object(m) if m.len() <= 8 => {
            let mut found = [None; ERROR_FIELDS.len()];
            for (k, v) in m.iter() {
                if let Some(i) = ERROR_FIELDS.iter().position(|f| *f == k) {
                    found[i] = Some(v);
                }
            }
            for v in found.into_iter().flatten() {
                collect_text(v, &mut s, 0);
            }
        }
        Json::Object(m) => {
            for k in ERROR_FIELDS {
                if let Some(v) = m.get(k) {
                    collect_text(v, &mut s, 0);
                }
            }
        }
        _ => {}
    }
    if s.trim().is_empty() {
        collect_text(out, &mut s, 0);
    }
    s
}

fn truthy(v: &Json<'_>) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::String(s) => !s.trim().is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(m) => !m.is_empty(),
        Json::Number(_) => true,
    }
}

/// `tool_success` decides when present. Without it, only structural evidence counts (an
/// `error` field, `ok: false`, an HTTP status >= 400, MCP's `isError`, or text that *starts*
/// with an error marker); words elsewhere in the output never make a failure.
fn is_failed(step: &Step, out: &Json<'_>) -> bool {
    if let Some(s) = step.tool_success {
        return !s;
    }
    match out {
        Json::Object(m) => {
            if ["error", "errors", "exception"]
                .iter()
                .any(|k| m.get(k).is_some_and(truthy))
            {
                return true;
            }
            if ["ok", "success"]
                .iter()
                .any(|k| m.get(k) == Some(&Json::Bool(false)))
            {
                return true;
            }
            if ["isError", "is_error"]
                .iter()
                .any(|k| m.get(k) == Some(&Json::Bool(true)))
            {
                return true;
            }
            ["status", "status_code", "statusCode", "http_status"]
                .iter()
                .any(|k| {
                    m.get(k)
                        .and_then(|v| v.as_u64())
                        .is_some_and(|c| (400..600).contains(&c))
                })
        }
        Json::String(s) if s.is_ascii() => ascii_tokens(s)
            .next()
            .is_some_and(|t| FAILURE_MARKERS.iter().any(|m| m.eq_ignore_ascii_case(t))),
        Json::String(s) => FAILURE_MARKERS.contains(&Words::of(s).get(0).unwrap_or("")),
        _ => false,
    }
}

pub(super) fn classify_failure(
    cfg: &DetectorConfig,
    policy: Option<&ToolPolicy>,
    step: &Step,
    out: &Json<'_>,
    memo: &mut ErrorMemo,
) -> Option<Failure> {
    if !is_failed(step, out) {
        return None;
    }
    let text = error_text(out);
    let recoverable = |toks: &Words| {
        cfg.recoverable_errors
            .iter()
            .chain(policy.map_or(&[][..], |p| p.recoverable_errors.as_slice()))
            .any(|p| toks.has_phrase_str(p))
    };
    let mut f = if text.len() > MEMO_TEXT_MAX {
        let e = ErrorInfo::of(&text);
        e.failure(recoverable(&e.words))
    } else {
        let e = error_info(&text, memo);
        e.failure(recoverable(&e.words))
    };
    if f.class == FailClass::Permanent {
        match main_message(out, 0) {
            Some(m) if not_found(m) => f.not_found = true,
            Some(m) => f.shape_key = shape_key(m),
            None => {}
        }
    }
    Some(f)
}

/// The main message of an error output: its first error-ish field that holds text, looked up
/// through nested error objects (`{"error": {"message": ...}}`) and lists (`"errors": [...]`);
/// the first line of a text output.
fn main_message<'j>(out: &'j Json<'_>, depth: usize) -> Option<&'j str> {
    const FIELDS: &[&str] = &[
        "error",
        "errors",
        "message",
        "errorMessage",
        "error_message",
        "msg",
        "detail",
        "reason",
    ];
    if depth > 4 {
        return None;
    }
    match out {
        Json::String(s) => s.lines().find(|l| !l.trim().is_empty()),
        Json::Object(m) => FIELDS
            .iter()
            .filter_map(|k| m.get(k))
            .find_map(|v| main_message(v, depth + 1)),
        Json::Array(a) => a.first().and_then(|v| main_message(v, depth + 1)),
        _ => None,
    }
}

/// Whether an error message says the thing asked for does not exist (and it is no part of a
/// schema).
fn not_found(message: &str) -> bool {
    let w = Words::of(message);
    (w.iter().any(|t| NOT_FOUND_WORDS.contains(&t))
        || NOT_FOUND_PHRASES.iter().any(|p| w.has_phrase(p)))
        && !w.iter().any(|t| SCHEMA_WORDS.contains(&t))
}

/// [`Failure::shape_key`] of a main message: lowercase words, with quoted values and every word
/// that names something (holds a digit, an inner capital, or `_ / : . @ = [ ( < \`) masked.
fn shape_key(message: &str) -> u64 {
    let mut shape = String::with_capacity(message.len().min(400));
    let mut quote: Option<char> = None;
    let mut masked = false;
    for c in message.chars().take(400) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`' | '‘' | '“') => {
                quote = Some(match c {
                    '‘' => '’',
                    '“' => '”',
                    c => c,
                });
                if !masked {
                    shape.push_str(" * ");
                    masked = true;
                }
                continue;
            }
            None => {
                shape.push(c);
                masked = false;
                continue;
            }
        }
    }
    let mut out = String::with_capacity(shape.len());
    for tok in shape.split_whitespace() {
        let bare = tok.trim_matches(|c: char| matches!(c, ':' | ',' | ';' | '.' | '!' | '?'));
        let names = bare.chars().any(|c| {
            c.is_ascii_digit()
                || matches!(
                    c,
                    '_' | '/' | ':' | '.' | '@' | '=' | '[' | '(' | '<' | '\\'
                )
        }) || bare.chars().skip(1).any(char::is_uppercase);
        if !out.is_empty() {
            out.push(' ');
        }
        if names || bare == "*" {
            out.push('*');
        } else {
            out.push_str(&bare.to_lowercase());
        }
    }
    key64("shape", &[out.as_bytes()])
}

/// What a failure's class and identity need from its error text, apart from the configured
/// recoverable phrases: a pure function of the text.
struct ErrorInfo {
    words: Words,
    /// The class when no recoverable phrase matches.
    class: FailClass,
    error_key: u64,
    /// The normalised text, cut to 160 bytes.
    short: String,
}

impl ErrorInfo {
    fn of(text: &str) -> Self {
        let words = Words::of(text);
        let any_word = |ws: &[&str]| words.iter().any(|t| ws.contains(&t));
        let any_phrase = |ps: &[&[&str]]| ps.iter().any(|p| words.has_phrase(p));
        let class = if any_word(RETRYABLE_WORDS) || any_phrase(RETRYABLE_PHRASES) {
            FailClass::Retryable
        } else if any_word(PERMANENT_WORDS) || any_phrase(PERMANENT_PHRASES) {
            FailClass::Permanent
        } else {
            FailClass::Other
        };
        let norm = normalize_error(text);
        let error_key = key64("error", &[norm.as_bytes()]);
        let mut short = norm;
        if short.len() > 160 {
            let mut end = 160;
            while !short.is_char_boundary(end) {
                end -= 1;
            }
            short.truncate(end);
        }
        Self {
            words,
            class,
            error_key,
            short,
        }
    }

    fn failure(&self, recoverable: bool) -> Failure {
        Failure {
            class: if recoverable {
                FailClass::Recoverable
            } else {
                self.class
            },
            error_key: self.error_key,
            shape_key: self.error_key,
            not_found: false,
            text: self.short.clone(),
        }
    }
}

/// Error texts longer than this are not memoised (bounds the memo's memory).
const MEMO_TEXT_MAX: usize = 512;

/// The memo of [`error_info`].
pub(super) struct ErrorMemo(Memo<(Box<str>, ErrorInfo)>);

impl Default for ErrorMemo {
    fn default() -> Self {
        Self(Memo::new(1024))
    }
}

/// The [`ErrorInfo`] of `text`, memoised: a failing call is usually retried, so the same few
/// error texts recur, and their normalisation and SHA-256 were most of the cost of a failure.
fn error_info<'m>(text: &str, memo: &'m mut ErrorMemo) -> &'m ErrorInfo {
    use std::hash::BuildHasher;
    let hash = |t: &str| rustc_hash::FxBuildHasher.hash_one(t);
    &memo
        .0
        .get_or_insert_with(
            hash(text),
            |e| *e.0 == *text,
            || (text.into(), ErrorInfo::of(text)),
            |e| hash(&e.0),
        )
        .1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::view::tests::step;

    /// `classify_failure`'s class and identity computed without the memo (as first written).
    fn reference_failure(cfg: &DetectorConfig, out: &Json<'_>) -> Failure {
        let text = error_text(out);
        let toks = Words::of(&text);
        let recoverable = cfg
            .recoverable_errors
            .iter()
            .any(|p| toks.has_phrase_str(p));
        let any_word = |ws: &[&str]| toks.iter().any(|t| ws.contains(&t));
        let any_phrase = |ps: &[&[&str]]| ps.iter().any(|p| toks.has_phrase(p));
        let class = if recoverable {
            FailClass::Recoverable
        } else if any_word(RETRYABLE_WORDS) || any_phrase(RETRYABLE_PHRASES) {
            FailClass::Retryable
        } else if any_word(PERMANENT_WORDS) || any_phrase(PERMANENT_PHRASES) {
            FailClass::Permanent
        } else {
            FailClass::Other
        };
        let norm = normalize_error(&text);
        let error_key = key64("error", &[norm.as_bytes()]);
        let mut short = norm;
        if short.len() > 160 {
            let mut end = 160;
            while !short.is_char_boundary(end) {
                end -= 1;
            }
            short.truncate(end);
        }
        let (shape_key, missing) = match (class, main_message(out, 0)) {
            (FailClass::Permanent, Some(m)) if not_found(m) => (error_key, true),
            (FailClass::Permanent, Some(m)) => (shape_key(m), false),
            _ => (error_key, false),
        };
        Failure {
            class,
            error_key,
            shape_key,
            not_found: missing,
            text: short,
        }
    }

    #[test]
    fn memoised_failures_match_the_direct_computation() {
        let mut cfg = DetectorConfig::default();
        let long = format!(
            "{{\"error\":\"{} old text not found\"}}",
            "\u{e9}x ".repeat(300)
        );
        let outputs = [
            r#"{"error":"401 Unauthorized: invalid API key"}"#.to_string(),
            r#"{"error":"503 service temporarily unavailable"}"#.to_string(),
            r#""Error: old TEXT not found in src/a.rs""#.to_string(),
            r#"{"message":"Caf\u00e9 ferm\u00e9e","code":7}"#.to_string(),
            r#"{"errors":[{"detail":"req_7Hq2x9Lm0aZk at 2024-05-01T10:00:00Z"}]}"#.to_string(),
            long,
        ];
        let s = step("t", "{}", "{}", Some(false));
        let mut memos = ErrorMemo::default();
        for round in 0..3 {
            if round == 2 {
                // The memo holds no configuration: a changed phrase list is read afresh.
                cfg.recoverable_errors = vec!["INVALID api".into(), "temporarily".into()];
            }
            for o in &outputs {
                let out = Json::from_value(serde_json::from_str(o).unwrap());
                assert_eq!(
                    classify_failure(&cfg, None, &s, &out, &mut memos),
                    Some(reference_failure(&cfg, &out)),
                    "{o}"
                );
            }
        }
        // A full memo is cleared, not grown, and still answers the same.
        for i in 0..2100 {
            let out = Json::String(format!("error {i} not found").into());
            assert_eq!(
                classify_failure(&cfg, None, &s, &out, &mut memos),
                Some(reference_failure(&cfg, &out)),
                "{i}"
            );
        }
    }

    /// The same refusal naming other things has one shape; other refusals do not.
    #[test]
    fn shapes_mask_what_an_error_names() {
        let shape = |o: &str| {
            let out = Json::from_value(serde_json::from_str(o).unwrap());
            main_message(&out, 0).map(shape_key)
        };
        let same = [
            (
                r#"{"error":"column \"user_id\" does not exist","sqlstate":"42703"}"#,
                r#"{"error":"column \"userId\" does not exist","hint":"x"}"#,
            ),
            (
                r#"{"error":{"code":400,"message":"Unrecognized name: signup_date at [1:8]"}}"#,
                r#"{"error":{"code":400,"message":"Unrecognized name: signupDate at [1:22]"}}"#,
            ),
            (
                r#"{"error":"User: arn:aws:sts::1:assumed-role/a/b is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::b/k1"}"#,
                r#"{"error":"User: arn:aws:sts::1:assumed-role/a/b is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::b/x/k2.gz"}"#,
            ),
            (
                r#"{"error":{"message":"Invalid integer: 12.00","param":"amount"}}"#,
                r#"{"error":{"message":"Invalid integer: \"1200\"","param":"amount"}}"#,
            ),
            (
                r#""Permission denied: 'a.txt'""#,
                r#""Permission denied: 'b/c.txt'\nmore""#,
            ),
        ];
        for (a, b) in same {
            assert_eq!(shape(a), shape(b), "{a} / {b}");
            assert!(shape(a).is_some());
        }
        assert_ne!(
            shape(r#"{"error":"column \"a\" is ambiguous"}"#),
            shape(r#"{"error":"relation \"a\" is ambiguous"}"#)
        );
        // "Not found" names what is missing: a batch of lookups is not one refusal.
        let s = step("t", "{}", "{}", Some(false));
        let cfg = DetectorConfig::default();
        let fail = |o: &str| {
            let out = Json::from_value(serde_json::from_str(o).unwrap());
            classify_failure(&cfg, None, &s, &out, &mut ErrorMemo::default()).unwrap()
        };
        let (a, b) = (
            fail(r#"{"error":"No such customer: 'cus_a1'"}"#),
            fail(r#"{"error":"No such customer: 'cus_b2'"}"#),
        );
        assert_eq!((a.shape_key, b.shape_key), (a.error_key, b.error_key));
        assert!(a.not_found && b.not_found);
    }

    #[test]
    fn error_text_matches_its_lookups() {
        let reference_text = |out: &Json<'_>| {
            let mut s = String::new();
            if let Json::Object(m) = out {
                for k in ERROR_FIELDS {
                    if let Some(v) = m.get(k) {
                        collect_text(v, &mut s, 0);
                    }
                }
            }
            if s.trim().is_empty() {
                collect_text(out, &mut s, 0);
            }
            s
        };
        for o in [
            r#"{"error":"x"}"#,
            r#"{"zeta":"z","code":500,"message":"m","error":{"type":"t","n":1}}"#,
            r#"{"a":1,"b":"bee","statusCode":404,"errorMessage":"nope","title":"T","msg":"q"}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"detail":"d","reason":"r"}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"detail":"d","reason":"r"}"#,
            r#"{"ok":false,"data":[" ","x"]}"#,
            r#"{"stderr":"  ","exception":null}"#,
            r#"{}"#,
            r#"[1,"two"]"#,
            r#""text""#,
        ] {
            let out = Json::from_value(serde_json::from_str(o).unwrap());
            assert_eq!(error_text(&out), reference_text(&out), "{o}");
        }
    }

    #[test]
    fn text_outputs_fail_by_their_first_word() {
        let s = step("t", "{}", "{}", None);
        for t in [
            "Error: x",
            "TRACEBACK (most recent call last)",
            "  fatal",
            "failed.",
            "errors",
            "an error",
            "",
            "Fail\u{e9}d",
            "\u{e9}rror",
            "error\u{e9}",
            "Failure \u{e9}",
            "\u{3000}exception\u{3000}",
        ] {
            let first = Words::of(t).get(0).unwrap_or("").to_string();
            let want = matches!(
                first.as_str(),
                "error" | "traceback" | "exception" | "fatal" | "failed" | "failure"
            );
            assert_eq!(is_failed(&s, &Json::String(t.into())), want, "{t:?}");
        }
    }
}
