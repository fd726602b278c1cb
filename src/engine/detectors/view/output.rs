//! The kind of a successful output: an empty result, a bare acknowledgement, or data. An empty
//! search answered again is not progress; an acknowledgement carries nothing to compare.
use super::lexicon::{ACK_WORDS, EMPTY_PREFIXES};
use crate::engine::json::Json;
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutKind {
    /// Not a tool step.
    NoTool,
    Failure,
    /// An empty result set (`[]`, `{"results": []}`, "no results").
    Empty,
    /// A bare acknowledgement of a mutation (`{"ok": true}`, `null`, `"done"`).
    Ack,
    Data,
}

/// Whether `s`, trimmed and lowercased, is one of [`ACK_WORDS`]; without a lowercased copy
/// when it is ASCII (the words are ASCII, and only a non-ASCII char like the Kelvin sign can
/// lowercase to one).
fn is_ack_word(s: &str) -> bool {
    let t = s.trim();
    if t.is_ascii() {
        ACK_WORDS.iter().any(|w| w.eq_ignore_ascii_case(t))
    } else {
        ACK_WORDS.contains(&t.to_lowercase().as_str())
    }
}

pub(super) fn output_kind(out: &Json<'_>) -> OutKind {
    match out {
        Json::Null | Json::Bool(true) => OutKind::Ack,
        Json::String(s) => {
            let t = s.trim().to_lowercase();
            let t = t.trim_end_matches(['.', '!']);
            if t.is_empty() || ACK_WORDS.contains(&t) {
                OutKind::Ack
            } else if EMPTY_PREFIXES.iter().any(|p| t.starts_with(p)) || t == "[]" || t == "none" {
                OutKind::Empty
            } else {
                OutKind::Data
            }
        }
        Json::Array(a) if a.is_empty() => OutKind::Empty,
        Json::Object(m) if m.is_empty() => OutKind::Ack,
        Json::Object(m) => {
            let mut arrays = m.values().filter_map(|v| v.as_array()).peekable();
            if arrays.peek().is_some() && arrays.all(|a| a.is_empty()) {
                return OutKind::Empty;
            }
            if m.len() <= 3
                && m.values().all(|v| match v {
                    Json::Bool(_) | Json::Null | Json::Number(_) => true,
                    Json::String(s) => is_ack_word(s),
                    _ => false,
                })
            {
                return OutKind::Ack;
            }
            if let Some(Json::String(s)) = m
                .get("result")
                .or_else(|| m.get("value"))
                .or_else(|| m.get("output"))
            {
                if m.len() == 1 {
                    return output_kind(&Json::String(Cow::Borrowed(s)));
                }
            }
            OutKind::Data
        }
        _ => OutKind::Data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_words_match_their_lookup() {
        for s in [
            "ok",
            " OK ",
            "Done",
            "done.",
            "oK\u{e9}",
            "o\u{212a}",
            "\u{2003}saved\u{2003}",
            "",
            "nope",
            "TRUE",
            "complete\n",
        ] {
            assert_eq!(
                is_ack_word(s),
                ACK_WORDS.contains(&s.trim().to_lowercase().as_str()),
                "{s:?}"
            );
        }
        assert!(is_ack_word("o\u{212a}"));
    }
}
