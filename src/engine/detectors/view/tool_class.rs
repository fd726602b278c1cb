//! Which tools repeat by design: a poll, a debugger step or a scroll is expected to be called
//! again and again, and the repetition detectors give it room. Read from the tool's name and
//! from its action or command argument, against the configured class words.
use crate::engine::detectors::class::ToolClass;
use crate::engine::detectors::DetectorConfig;
use crate::engine::json::Json;
use crate::engine::memo::Memo;
use crate::engine::text::{contains_ci, key64};

/// Calls `f` with each word of a tool name (`getJobStatus` → get, Job, Status), as a slice of
/// it: the class lists are compared ASCII-lowercased anyway ([`class_flags`]).
fn split_name(name: &str, mut f: impl FnMut(&str)) {
    // Per byte: every test is on ASCII, and a non-ASCII char's bytes are all non-alphanumeric,
    // so the cuts fall on char boundaries exactly as per char.
    let mut start = None;
    let mut prev_lower = false;
    for (i, &c) in name.as_bytes().iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if let Some(s) = start.take() {
                f(&name[s..i]);
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            if let Some(s) = start.take() {
                f(&name[s..i]);
            }
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        start.get_or_insert(i);
    }
    if let Some(s) = start {
        f(&name[s..]);
    }
}

const SCROLL: u8 = 1;
const STEP: u8 = 2;
const POLL: u8 = 4;

/// Which class lists contain `cand` once ASCII-lowercased (compared in place: no copy).
fn class_flags(cfg: &DetectorConfig, cand: &str) -> u8 {
    let eq = |w: &String| {
        w.len() == cand.len()
            && w.bytes()
                .zip(cand.bytes())
                .all(|(a, b)| a == b.to_ascii_lowercase())
    };
    let mut flags = 0;
    if cfg.classes.scroll.iter().any(eq) {
        flags |= SCROLL;
    }
    if cfg.classes.step.iter().any(eq) {
        flags |= STEP;
    }
    if cfg.classes.poll.iter().any(eq) {
        flags |= POLL;
    }
    flags
}

/// What a tool name alone decides: the class lists its words are in, whether it condenses the
/// conversation ([`condenses`]), and its key.
#[derive(Default, Clone, Copy)]
pub(super) struct NameInfo {
    pub(super) flags: u8,
    pub(super) condenses: bool,
    pub(super) key: u64,
}

/// A tool that condenses the conversation (`compact_history`, `condense`,
/// `summarize_conversation`), not one that summarises a document.
fn condenses(tool: &str) -> bool {
    let has = |w: &str| contains_ci(tool, w);
    has("compact")
        || has("condens")
        || (has("summar")
            && [
                "conversation",
                "history",
                "context",
                "chat",
                "messages",
                "memory",
                "thread",
            ]
            .iter()
            .any(|w| has(w)))
}

/// The memo of [`name_info`]. Keyed by the class words' content key too, so configurations
/// with different class words (per-agent overrides) never share an entry.
pub(super) struct NameMemo(Memo<(u64, Box<str>, NameInfo)>);

impl Default for NameMemo {
    fn default() -> Self {
        Self(Memo::new(4096))
    }
}

/// [`NameInfo`] of `tool`, memoised: a fleet calls a few dozen tools, and splitting and
/// matching the name again on every step was a measurable share of building a view.
pub(super) fn name_info(cfg: &DetectorConfig, tool: &str, memo: &mut NameMemo) -> NameInfo {
    use std::hash::BuildHasher;
    let words = cfg.classes.key();
    let hash = |s: u64, t: &str| rustc_hash::FxBuildHasher.hash_one((s, t));
    let make = || {
        let mut flags = 0u8;
        split_name(tool, |c| flags |= class_flags(cfg, c));
        flags |= class_flags(cfg, tool);
        let info = NameInfo {
            flags,
            condenses: condenses(tool),
            // The name is memoised here already: a name key memo would store it a second time.
            key: key64("tool", &[tool.as_bytes()]),
        };
        (words, tool.into(), info)
    };
    memo.0
        .get_or_insert_with(
            hash(words, tool),
            |e| e.0 == words && *e.1 == *tool,
            make,
            |e| hash(e.0, &e.1),
        )
        .2
}

/// Repeatable tools are recognised by name (`get_job_status`, `sleep`) or by their action
/// argument (`browser {"action": "scroll_down"}`, `bash {"command": "sleep 30"}`,
/// `debugger {"cmd": "next"}`). A short argument is read word by word (so `git status` polls but
/// `pytest test_status.py` does not). A shell command is read segment by segment (`&&`, `||`,
/// `;`, new lines): the program of every segment whatever its length (`sleep 30 && curl ...`
/// waits), and the words of a short segment, but never what follows a pipe (in
/// `ls migrations/ | tail -3`, `tail` is a filter, not a log tail).
///
/// `name_flags` are the tool name's own ([`name_info`]).
pub(super) fn infer_class(cfg: &DetectorConfig, name_flags: u8, input: &Json<'_>) -> ToolClass {
    let mut flags = name_flags;
    let mut cand = |c: &str| flags |= class_flags(cfg, c);
    let short_words = |s: &str, cand: &mut dyn FnMut(&str)| {
        if s.len() <= 60 {
            if s.split_whitespace().nth(6).is_none() {
                s.split_whitespace()
                    .for_each(|w| cand(w.trim_start_matches('-')));
            }
            cand(s.trim());
        }
    };
    if let Json::Object(m) = input {
        // One pass over the arguments (the order of candidates does not matter).
        for (k, v) in m.iter() {
            let Json::String(s) = v else {
                continue;
            };
            if !matches!(
                k,
                "action" | "command" | "cmd" | "op" | "operation" | "method" | "type" | "kind"
            ) {
                continue;
            }
            if !matches!(k, "command" | "cmd") {
                short_words(s, &mut cand);
                continue;
            }
            for seg in s
                .split("&&")
                .flat_map(|x| x.split("||"))
                .flat_map(|x| x.split([';', '\n']))
            {
                let head = seg.split('|').next().unwrap_or(seg);
                if let Some(prog) = head.split_whitespace().next() {
                    cand(prog.rsplit('/').next().unwrap_or(prog));
                }
                short_words(head, &mut cand);
            }
        }
    }
    if flags & SCROLL != 0 {
        ToolClass::Scroll
    } else if flags & STEP != 0 {
        ToolClass::Step
    } else if flags & POLL != 0 {
        ToolClass::Poll
    } else {
        ToolClass::Normal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::detectors::ClassWords;

    /// `split_name` as first written (per char).
    fn reference_split_name(name: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut start = None;
        let mut prev_lower = false;
        for (i, c) in name.char_indices() {
            if !c.is_ascii_alphanumeric() {
                if let Some(s) = start.take() {
                    out.push(&name[s..i]);
                }
                prev_lower = false;
                continue;
            }
            if c.is_ascii_uppercase() && prev_lower {
                if let Some(s) = start.take() {
                    out.push(&name[s..i]);
                }
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            start.get_or_insert(i);
        }
        if let Some(s) = start {
            out.push(&name[s..]);
        }
        out
    }

    #[test]
    fn name_words_split_per_byte_as_per_char() {
        for n in [
            "",
            "_",
            "getJobStatus",
            "HTTPGetURL2x",
            "get_job__status-",
            "caf\u{e9}Status",
            "\u{e9}\u{3a3}x\u{3a3}Yz\u{1f600}",
            "a1B2c3",
            "scroll_down",
        ] {
            let mut got = Vec::new();
            split_name(n, |w| got.push(w.to_string()));
            assert_eq!(got, reference_split_name(n), "{n}");
        }
    }

    #[test]
    fn memoised_name_info_follows_each_engines_class_words() {
        let direct = |cfg: &DetectorConfig, t: &str| {
            let mut flags = 0;
            for w in reference_split_name(t) {
                flags |= class_flags(cfg, w);
            }
            (flags | class_flags(cfg, t), key64("tool", &[t.as_bytes()]))
        };
        let plain = DetectorConfig::default();
        let custom = DetectorConfig {
            classes: ClassWords::new(vec!["fetch".into()], vec![], vec!["getJob".into()]),
            ..DetectorConfig::default()
        };
        // A clone and a deserialised copy have the same words: they share entries.
        let cloned = custom.clone();
        let parsed: DetectorConfig =
            serde_json::from_value(serde_json::to_value(&custom).unwrap()).unwrap();
        assert_eq!(parsed.classes, custom.classes);
        let names = [
            "fetch_data",
            "get_job_status",
            "getjob",
            "scroll_down",
            "read",
        ];
        assert_eq!(parsed.classes.key(), custom.classes.key());
        assert_ne!(plain.classes.key(), custom.classes.key());
        let mut memos = NameMemo::default();
        let memos = &mut memos;
        // Interleaved, twice: the second pass answers from the memo.
        for _ in 0..2 {
            for t in names {
                for cfg in [&plain, &custom, &cloned, &parsed] {
                    let got = name_info(cfg, t, memos);
                    assert_eq!((got.flags, got.key), direct(cfg, t), "{t}");
                }
            }
        }
        assert_eq!(name_info(&plain, "fetch_data", memos).flags, 0);
        assert_eq!(name_info(&custom, "fetch_data", memos).flags, POLL);
        assert_eq!(name_info(&plain, "get_job_status", memos).flags, POLL);
        assert_eq!(name_info(&custom, "get_job_status", memos).flags, 0);
        // A full memo is cleared, not grown, and still answers the same.
        for i in 0..5000 {
            let t = format!("tool_{i}_status");
            assert_eq!(name_info(&plain, &t, memos).flags, POLL, "{t}");
        }
        assert_eq!(name_info(&custom, "fetch_data", memos).flags, POLL);
    }
}
