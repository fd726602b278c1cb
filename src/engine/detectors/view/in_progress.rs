//! Whether an output says "not finished yet": a call answering so is a status check, whatever
//! the tool's name, and the same answer several times in a row is waiting, not a loop.
use super::lexicon::IN_PROGRESS;
use crate::engine::text::{ascii_tokens, Words};
use memchr::memmem::Finder;
use std::sync::LazyLock;

/// Whether a (short) output reports an in-progress state: a `status` / `state` / `phase` /
/// `health` key (in JSON, YAML or `key: value` text) immediately followed by an in-progress
/// value. Read from what the tool answered, so it works for any tool name (`bash` running
/// `gh run view`, a REST client, `docker compose ps`).
pub(crate) fn reports_in_progress(output_text: &str) -> bool {
    if output_text.len() > 2000 {
        return false;
    }
    if output_text.is_ascii() {
        if !may_hold_state_key(output_text.as_bytes()) {
            return false;
        }
        // The same pairs as below, compared in place: runs on nearly every tool step.
        let ends = |k: &str, suf: &str| {
            k.len() >= suf.len()
                && k.as_bytes()[k.len() - suf.len()..].eq_ignore_ascii_case(suf.as_bytes())
        };
        let mut toks = ascii_tokens(output_text);
        let Some(mut k) = toks.next() else {
            return false;
        };
        for v in toks {
            let is_key = ends(k, "status")
                || ends(k, "state")
                || k.eq_ignore_ascii_case("phase")
                || k.eq_ignore_ascii_case("health");
            if is_key && IN_PROGRESS.iter().any(|p| p.eq_ignore_ascii_case(v)) {
                return true;
            }
            k = v;
        }
        return false;
    }
    let toks = Words::of(output_text);
    let found = toks.iter().zip(toks.iter().skip(1)).any(|(k, v)| {
        let is_key = k.ends_with("status") || k.ends_with("state") || k == "phase" || k == "health";
        is_key && IN_PROGRESS.contains(&v)
    });
    found
}

/// Whether an output says the call is waiting on something that has not changed yet: an
/// in-progress state ([`reports_in_progress`]), a completion flag of a named operation still
/// false (`{"name": "operations/123", "done": false}`, Google's long-running operations;
/// `ready`, `complete`, `finished`), or an HTTP 304 Not Modified answer to a conditional request
/// (polling with `If-None-Match`). An environment's `"done": false` beside its observation is
/// no operation: a step of an episode is not a status check.
pub(crate) fn reports_waiting(output_text: &str) -> bool {
    output_text.len() <= 2000
        && (reports_in_progress(output_text) || not_done(output_text) || not_modified(output_text))
}

/// Keys of a completion flag: followed by `false`, the operation is still running.
const NOT_DONE_KEYS: &[&str] = &[
    "done",
    "ready",
    "complete",
    "completed",
    "finished",
    "isdone",
    "is_done",
    "isready",
    "is_ready",
];

/// What names the operation a completion flag belongs to.
const OPERATION_KEYS: &[&str] = &[
    "name",
    "operation",
    "job",
    "job_id",
    "jobid",
    "task",
    "task_id",
    "taskid",
];

/// Searchers built once: these run on nearly every tool output, most of them short, where
/// building a searcher per call cost more than the search.
static FALSE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("false"));
static N304: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("304"));
static HTTP: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("HTTP/"));

fn not_done(t: &str) -> bool {
    let b = t.as_bytes();
    // `false`, and a flag's name (`done`, `isDone`, `ready`, `completed`, `finished`), before
    // tokenising: most outputs have neither.
    if FALSE.find(b).is_none() {
        return false;
    }
    let has = |w: &[u8]| memchr::memmem::find(b, w).is_some();
    if !(has(b"one") || has(b"eady") || has(b"omplete") || has(b"inished")) {
        return false;
    }
    let toks = Words::of(t);
    let flag = toks
        .iter()
        .zip(toks.iter().skip(1))
        .any(|(k, v)| v == "false" && NOT_DONE_KEYS.contains(&k));
    flag && toks.iter().any(|k| OPERATION_KEYS.contains(&k))
}

/// `"status": 304` (any `...status` or `...status_code` key) or an HTTP status line `HTTP/x 304`.
fn not_modified(t: &str) -> bool {
    let b = t.as_bytes();
    if N304.find(b).is_none() {
        return false;
    }
    let status_line = HTTP.find_iter(b).any(|at| {
        let rest = &t[at + 5..];
        let version = rest.find(' ').unwrap_or(rest.len());
        rest[version..].trim_start().starts_with("304")
    });
    if status_line {
        return true;
    }
    let toks = Words::of(t);
    let found = toks.iter().zip(toks.iter().skip(1)).any(|(k, v)| {
        v == "304"
            && (k.ends_with("status") || k.ends_with("statuscode") || k.ends_with("status_code"))
    });
    found
}

/// Whether ASCII text may hold a key token of [`reports_in_progress`]: one ending in `status`
/// or `state`, or `phase` or `health`, in any case. Each contains one of `stat`, `phas`, `heal`,
/// found here by comparing the four bytes at each position instead of tokenising (most outputs
/// have none). Setting bit 5 lowercases an ASCII letter and maps no other byte to a letter.
fn may_hold_state_key(b: &[u8]) -> bool {
    // Byte-wise compares of four shifted views, which the compiler runs as vector compares;
    // all three words have `a` third. Comparing each window as one 4-byte word did not
    // vectorise, and ran a scalar loop over every output.
    let hit = |a: u8, b: u8, c: u8, d: u8| {
        let (a, b, c, d) = (a | 0x20, b | 0x20, c | 0x20, d | 0x20);
        (c == b'a')
            & ((a == b's') & (b == b't') & (d == b't')
                | (a == b'p') & (b == b'h') & (d == b's')
                | (a == b'h') & (b == b'e') & (d == b'l'))
    };
    // 32 windows at a time (35 bytes), without an exit per window: most outputs hold no key
    // and are read to their end.
    let mut at = 0;
    while let Some(Ok(block)) = b.get(at..at + 35).map(<&[u8; 35]>::try_from) {
        let mut any = 0u8;
        for i in 0..32 {
            any |= u8::from(hit(block[i], block[i + 1], block[i + 2], block[i + 3]));
        }
        if any != 0 {
            return true;
        }
        at += 32;
    }
    b[at..].windows(4).any(|w| hit(w[0], w[1], w[2], w[3]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `reports_in_progress` without its pre-filter (as first written).
    fn reference_reports_in_progress(output_text: &str) -> bool {
        if output_text.len() > 2000 {
            return false;
        }
        let toks = Words::of(output_text);
        let found = toks.iter().zip(toks.iter().skip(1)).any(|(k, v)| {
            let is_key =
                k.ends_with("status") || k.ends_with("state") || k == "phase" || k == "health";
            is_key && IN_PROGRESS.contains(&v)
        });
        found
    }

    #[test]
    fn in_progress_prefilter_misses_no_key() {
        let keys = [
            "status",
            "STATUS",
            "Status",
            "job_status",
            "jobStatus",
            "sTaTe",
            "state",
            "phase",
            "PHASE",
            "Health",
            "healthy",
            "stat",
            "phas",
            "heal",
            "x",
            "statu",
        ];
        let values = [
            "running",
            "RUNNING",
            "In_Progress",
            "done",
            "queued",
            "not_started",
        ];
        let seps = [":", ": ", "\":\"", "=", " ", "\n  ", " - "];
        for k in keys {
            for v in values {
                for sep in seps {
                    for t in [
                        format!("{k}{sep}{v}"),
                        format!("{{\"{k}\"{sep}\"{v}\"}}"),
                        format!("the {k}{sep}{v}, ok"),
                        format!("caf\u{e9} {k}{sep}{v}"),
                    ] {
                        assert_eq!(
                            reports_in_progress(&t),
                            reference_reports_in_progress(&t),
                            "{t}"
                        );
                    }
                }
            }
        }
        for t in [
            "",
            "sta",
            "stat",
            "{\"bytes\":1001}",
            "Status running",
            "@TAT running",
        ] {
            assert_eq!(
                reports_in_progress(t),
                reference_reports_in_progress(t),
                "{t}"
            );
        }
        // Bit 5 only folds letters: no other byte reads as one.
        assert!(may_hold_state_key(b"STAT") && may_hold_state_key(b"xHeAl"));
        assert!(!may_hold_state_key(b"st@t") && !may_hold_state_key(b"\x13\x14\x01\x14"));
    }

    #[test]
    fn unfinished_operations_and_not_modified_answers_are_waiting() {
        for t in [
            r#"{"done":false,"name":"operations/123"}"#,
            r#"{"job":"j-1","ready": false}"#,
            r#"{"isReady":false,"task_id":"x"}"#,
            r#"{"status":304,"body":null}"#,
            r#"{"status_code":304}"#,
            r#"{"ResponseMetadata":{"HTTPStatusCode":304}}"#,
            r#"{"stdout":"HTTP/2 304\nserver: GitHub.com\n\n","exit_code":0}"#,
            "HTTP/1.1 304 Not Modified\r\nETag: x",
            r#"{"state":"running"}"#,
        ] {
            assert!(reports_waiting(t), "{t}");
        }
        for t in [
            r#"{"done":true,"name":"operations/1","response":{}}"#,
            r#"{"obs":"A locked door blocks the way.","r":0,"done":false}"#,
            r#"{"ok":false}"#,
            r#"{"enabled":false,"done_items":3}"#,
            r#"{"status":200,"count":304}"#,
            r#"{"stdout":"HTTP/2 200\n\n{\"id\":304}"}"#,
            r#"{"rows":[[304]]}"#,
        ] {
            assert!(!reports_waiting(t), "{t}");
        }
    }

    proptest::proptest! {
        /// The prefilter reads windows in blocks of 32: a key straddling two blocks, or in
        /// the tail after the last full one, is found as by testing every window.
        #[test]
        fn state_key_prefilter_is_a_window_test(
            key in "(?i)(stat|phas|heal|sta|hea|xyz)",
            pad in 0usize..100,
            tail in "[a-z ]{0,6}",
        ) {
            let b = format!("{}{key}{tail}", "-".repeat(pad));
            let naive = b.as_bytes().windows(4).any(|w| {
                let w = std::str::from_utf8(w).unwrap_or("").to_ascii_lowercase();
                w == "stat" || w == "phas" || w == "heal"
            });
            proptest::prop_assert_eq!(may_hold_state_key(b.as_bytes()), naive);
        }
    }
}
