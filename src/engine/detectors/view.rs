//! What the detectors know about one step, computed once: identity keys, tool class, failure
//! classification and the kind of output.
use super::{DetectorConfig, ToolPolicy};
use crate::contract::Step;
use crate::engine::fingerprint::{canonical_string, Canonical};
use crate::engine::json::Json;
use crate::engine::memo::Memo;
use crate::engine::text::{ascii_tokens, key64, normalize_error, Words};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    Normal,
    /// Status checks, waits, log tails: identical results are expected for a while.
    Poll,
    /// Debugger stepping.
    Step,
    /// Scrolling a page or a list.
    Scroll,
    /// Never counted by any repetition detector.
    Exempt,
}

impl ToolClass {
    pub fn is_repeatable(self) -> bool {
        matches!(self, ToolClass::Poll | ToolClass::Step | ToolClass::Scroll)
    }

    /// Whether the *same answer* to the same call is expected for a while. Only waiting does
    /// that: a debugger step or a scroll that returns exactly what it returned before moved
    /// nothing (stuck on a line, at the end of the page, or an environment `step` that hits a
    /// wall), so those get the normal thresholds once their output stops changing.
    pub fn tolerates_same_output(self) -> bool {
        matches!(self, ToolClass::Poll)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailClass {
    /// auth, permission, not found, invalid/schema, unknown tool: retrying cannot help.
    Permanent,
    /// 429, timeouts, 5xx, "temporarily unavailable": retrying may help.
    Retryable,
    /// A failure the agent is expected to recover from (re-read then retry an edit).
    Recoverable,
    Other,
}

impl FailClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FailClass::Permanent => "permanent",
            FailClass::Retryable => "retryable",
            FailClass::Recoverable => "recoverable",
            FailClass::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub class: FailClass,
    /// Normalised error text identity (volatile values removed, lowercase, whitespace collapsed).
    pub error_key: u64,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutKind {
    /// Not a tool step.
    NoTool,
    Failure,
    /// An empty result set (`[]`, `{"results": []}`, "no results").
    Empty,
    /// A bare acknowledgement of a mutation (`{"ok": true}`, `null`, `"done"`).
    Ack,
    Data,
}

pub struct StepView<'a> {
    pub step: &'a Step,
    pub canon: &'a Canonical<'a>,
    pub tool: Option<&'a str>,
    pub policy: Option<&'a ToolPolicy>,
    pub class: ToolClass,
    pub tool_key: u64,
    /// Tool + whole canonical input.
    pub action_key: u64,
    /// Tool + primary parameter (per-tool JSON pointer), else the action key.
    pub primary_key: u64,
    /// Canonical output + success flag.
    pub output_key: u64,
    pub failure: Option<Failure>,
    pub out_kind: OutKind,
}

fn fp64(fp: Option<[u8; 32]>) -> u64 {
    fp.map_or(0, |d| {
        u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    })
}

impl<'a> StepView<'a> {
    pub fn new(
        cfg: &'a DetectorConfig,
        step: &'a Step,
        canon: &'a Canonical<'a>,
        memos: &mut ViewMemos,
    ) -> Self {
        let tool = step.tool_name.as_deref();
        let name = tool.map_or(NameInfo::default(), |t| name_info(cfg, t, memos));
        let policy = tool.and_then(|t| cfg.tools.get(t));
        let class = match (tool, policy.and_then(|p| p.class)) {
            (None, _) => ToolClass::Normal,
            (Some(_), Some(c)) => c,
            (Some(_), None) => match infer_class(cfg, name.flags, &canon.input) {
                ToolClass::Normal
                    if step.tool_success != Some(false)
                        && reports_in_progress(&canon.output_text) =>
                {
                    ToolClass::Poll
                }
                c => c,
            },
        };
        let tool_key = name.key;
        let action_key = fp64(canon.fps.canonical_input);
        let primary_key = match (tool, policy.and_then(|p| p.primary.as_deref())) {
            (Some(t), Some(ptr)) => match canon.input.pointer(ptr) {
                Some(v) => key64("primary", &[t.as_bytes(), canonical_string(v).as_bytes()]),
                None => action_key,
            },
            _ => action_key,
        };
        let output_key = fp64(canon.fps.canonical_output);
        let failure = tool.and_then(|_| classify_failure(cfg, policy, step, &canon.output, memos));
        let out_kind = if tool.is_none() {
            OutKind::NoTool
        } else if failure.is_some() {
            OutKind::Failure
        } else {
            output_kind(&canon.output)
        };
        Self {
            step,
            canon,
            tool,
            policy,
            class,
            tool_key,
            action_key,
            primary_key,
            output_key,
            failure,
            out_kind,
        }
    }

    /// A tool step that the repetition detectors count.
    pub fn counted_tool(&self) -> bool {
        self.tool.is_some() && self.class != ToolClass::Exempt
    }

    pub fn fail_class(&self) -> Option<FailClass> {
        self.failure.as_ref().map(|f| f.class)
    }
}

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

/// What a tool name alone decides: the class lists its words are in, and its key.
#[derive(Default, Clone, Copy)]
struct NameInfo {
    flags: u8,
    key: u64,
}

/// What the step view memoises (see [`Memo`]): tool names with their classes, and error texts.
pub struct ViewMemos {
    /// Keyed by the class words' content key too, so configurations with different class
    /// words (per-agent overrides) never share an entry.
    tools: Memo<(u64, Box<str>, NameInfo)>,
    errors: Memo<(Box<str>, ErrorInfo)>,
}

impl Default for ViewMemos {
    fn default() -> Self {
        Self {
            tools: Memo::new(4096),
            errors: Memo::new(1024),
        }
    }
}

/// [`NameInfo`] of `tool`, memoised: a fleet calls a few dozen tools, and splitting and
/// matching the name again on every step was a measurable share of building a view.
fn name_info(cfg: &DetectorConfig, tool: &str, memos: &mut ViewMemos) -> NameInfo {
    use std::hash::BuildHasher;
    let words = cfg.classes.key();
    let hash = |s: u64, t: &str| rustc_hash::FxBuildHasher.hash_one((s, t));
    let make = || {
        let mut flags = 0u8;
        split_name(tool, |c| flags |= class_flags(cfg, c));
        flags |= class_flags(cfg, tool);
        let info = NameInfo {
            flags,
            // The name is memoised here already: a name key memo would store it a second time.
            key: key64("tool", &[tool.as_bytes()]),
        };
        (words, tool.into(), info)
    };
    memos
        .tools
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
fn infer_class(cfg: &DetectorConfig, name_flags: u8, input: &Json<'_>) -> ToolClass {
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

/// States that say "not finished yet": a call answering one of them is a status check, and
/// the same answer several times in a row is waiting, not a loop.
const IN_PROGRESS: &[&str] = &[
    "queued",
    "pending",
    "running",
    "in_progress",
    "inprogress",
    "in-progress",
    "starting",
    "creating",
    "containercreating",
    "provisioning",
    "building",
    "deploying",
    "waiting",
    "processing",
    "initializing",
    "initialising",
    "scheduled",
    "not_started",
];

/// Whether a (short) output reports an in-progress state: a `status` / `state` / `phase` /
/// `health` key (in JSON, YAML or `key: value` text) immediately followed by an in-progress
/// value. Read from what the tool answered, so it works for any tool name (`bash` running
/// `gh run view`, a REST client, `docker compose ps`).
pub fn reports_in_progress(output_text: &str) -> bool {
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

const ERROR_FIELDS: &[&str] = &[
    "error",
    "errors",
    "err",
    "message",
    "msg",
    "detail",
    "details",
    "reason",
    "status",
    "status_code",
    "statusCode",
    "code",
    "stderr",
    "exception",
    "type",
    "title",
    "description",
    "error_message",
    "errorMessage",
];

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
        Json::String(s) if s.is_ascii() => ascii_tokens(s).next().is_some_and(|t| {
            [
                "error",
                "traceback",
                "exception",
                "fatal",
                "failed",
                "failure",
            ]
            .iter()
            .any(|m| m.eq_ignore_ascii_case(t))
        }),
        Json::String(s) => {
            let w = Words::of(s);
            matches!(
                w.get(0).unwrap_or(""),
                "error" | "traceback" | "exception" | "fatal" | "failed" | "failure"
            )
        }
        _ => false,
    }
}

const RETRYABLE_WORDS: &[&str] = &[
    "408",
    "429",
    "500",
    "502",
    "503",
    "504",
    "timeout",
    "timedout",
    "etimedout",
    "econnreset",
    "econnrefused",
    "throttled",
    "throttling",
    "ratelimit",
    "ratelimited",
    "rate-limit",
    "rate-limited",
    "unavailable",
    "temporarily",
    "overloaded",
    "busy",
    "retry-after",
];
const RETRYABLE_PHRASES: &[&[&str]] = &[
    &["rate", "limit"],
    &["rate", "limited"],
    &["timed", "out"],
    &["try", "again"],
    &["too", "many", "requests"],
    &["connection", "reset"],
    &["connection", "refused"],
    &["bad", "gateway"],
    &["service", "unavailable"],
    &["internal", "server", "error"],
];
const PERMANENT_WORDS: &[&str] = &[
    "400",
    "401",
    "403",
    "404",
    "405",
    "410",
    "422",
    "unauthorized",
    "unauthenticated",
    "forbidden",
    "permission",
    "permissions",
    "denied",
    "auth",
    "authentication",
    "authorization",
    "credentials",
    "invalid",
    "schema",
    "enoent",
    "eacces",
    "eperm",
    "notfound",
    "validation",
    "malformed",
    "unsupported",
    "nonexistent",
    "modulenotfounderror",
    "filenotfounderror",
];
const PERMANENT_PHRASES: &[&[&str]] = &[
    &["not", "found"],
    &["no", "such"],
    &["does", "not", "exist"],
    &["doesn't", "exist"],
    &["bad", "request"],
    &["missing", "required"],
    &["required", "field"],
    &["unknown", "tool"],
    &["unknown", "function"],
    &["unknown", "command"],
    &["unknown", "parameter"],
    &["unknown", "argument"],
    &["not", "allowed"],
    &["not", "permitted"],
    &["api", "key"],
    &["is", "required"],
    &["no", "module", "named"],
    &["cannot", "import", "name"],
];

fn classify_failure(
    cfg: &DetectorConfig,
    policy: Option<&ToolPolicy>,
    step: &Step,
    out: &Json<'_>,
    memos: &mut ViewMemos,
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
    if text.len() > MEMO_TEXT_MAX {
        let e = ErrorInfo::of(&text);
        return Some(e.failure(recoverable(&e.words)));
    }
    let e = error_info(&text, memos);
    Some(e.failure(recoverable(&e.words)))
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
            text: self.short.clone(),
        }
    }
}

/// Error texts longer than this are not memoised (bounds the memo's memory).
const MEMO_TEXT_MAX: usize = 512;

/// The [`ErrorInfo`] of `text`, memoised: a failing call is usually retried, so the same few
/// error texts recur, and their normalisation and SHA-256 were most of the cost of a failure.
fn error_info<'m>(text: &str, memos: &'m mut ViewMemos) -> &'m ErrorInfo {
    use std::hash::BuildHasher;
    let hash = |t: &str| rustc_hash::FxBuildHasher.hash_one(t);
    &memos
        .errors
        .get_or_insert_with(
            hash(text),
            |e| *e.0 == *text,
            || (text.into(), ErrorInfo::of(text)),
            |e| hash(&e.0),
        )
        .1
}

const ACK_WORDS: &[&str] = &[
    "ok",
    "okay",
    "done",
    "success",
    "succeeded",
    "saved",
    "updated",
    "written",
    "created",
    "deleted",
    "moved",
    "true",
    "applied",
    "complete",
    "completed",
];
const EMPTY_PREFIXES: &[&str] = &[
    "no results",
    "no result",
    "no matches",
    "no match",
    "0 results",
    "found 0",
    "nothing found",
    "no files found",
    "no entries",
    "no items",
    "no records",
    "no rows",
    "empty",
];

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

fn output_kind(out: &Json<'_>) -> OutKind {
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
pub(super) mod tests {
    use super::*;
    use crate::contract::{JsonText, RunKey};
    use crate::engine::detectors::ClassWords;

    /// A tool step of run `p`/`r` (also the near-duplicate tests' builder).
    pub(in crate::engine::detectors) fn step(
        tool: &str,
        input: &str,
        output: &str,
        success: Option<bool>,
    ) -> Step {
        Step {
            key: RunKey {
                project_id: "p".into(),
                run_id: "r".into(),
            },
            ts_ms: 0,
            step_index: 1,
            step_type: "tool_call".into(),
            content: None,
            tool_name: Some(tool.into()),
            tool_input: JsonText::parse(input).ok(),
            tool_output: JsonText::parse(output).ok(),
            tool_success: success,
            tool_latency_ms: None,
            tokens: None,
            cost_usd: None,
            tokens_in_context: None,
            agent: None,
            caller: None,
            metadata: None,
        }
    }

    fn view_of(
        tool: &str,
        input: &str,
        output: &str,
        success: Option<bool>,
    ) -> (Option<FailClass>, OutKind, ToolClass) {
        let cfg = DetectorConfig::default();
        let s = step(tool, input, output, success);
        let c = cfg.canonical(&s);
        let v = StepView::new(&cfg, &s, &c, &mut ViewMemos::default());
        (v.fail_class(), v.out_kind, v.class)
    }

    #[test]
    fn failures_are_classified_by_words_not_substrings() {
        assert_eq!(
            view_of(
                "read_file",
                r#"{"path":"lib/auth.py"}"#,
                r#""def login(): ...""#,
                None
            )
            .0,
            None
        );
        assert_eq!(
            view_of("run", "{}", r#"{"failed":0,"passed":12}"#, None).0,
            None
        );
        assert_eq!(
            view_of("fetch", "{}", r#"{"error":"401 Unauthorized"}"#, None).0,
            Some(FailClass::Permanent)
        );
        assert_eq!(
            view_of(
                "fetch",
                "{}",
                r#"{"error":"503 Service Unavailable"}"#,
                Some(false)
            )
            .0,
            Some(FailClass::Retryable)
        );
        assert_eq!(
            view_of(
                "edit",
                "{}",
                r#""Error: old text not found in src/a.rs""#,
                Some(false)
            )
            .0,
            Some(FailClass::Recoverable)
        );
        // A file called auth.py that is missing is a not-found, not an auth failure; both permanent.
        assert_eq!(
            view_of("read", "{}", r#""cannot open auth.py""#, Some(false)).0,
            Some(FailClass::Other)
        );
    }

    #[test]
    fn polls_are_recognised_from_outputs_and_shell_segments() {
        // Any tool name: the output says "not finished yet".
        assert_eq!(
            view_of(
                "ci_api",
                r#"{"path":"/runs/1"}"#,
                r#"{"status":"in_progress","conclusion":null}"#,
                Some(true)
            )
            .2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"docker compose ps"}"#,
                r#""api Up 2 minutes (health: starting)""#,
                Some(true)
            )
            .2,
            ToolClass::Poll
        );
        // A finished state, or the word alone in prose, is not a poll.
        assert_eq!(
            view_of("ci_api", "{}", r#"{"status":"failed"}"#, Some(true)).2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of("bash", "{}", r#""running 3 tests""#, Some(true)).2,
            ToolClass::Normal
        );
        // Long commands: each segment's program counts; what follows a pipe does not.
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"sleep 30 && curl -s https://ci.internal/api/v2/pipelines/1234567890"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"ls migrations/ | tail -3"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"tail -n 20 /tmp/build.log"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Poll
        );
    }

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
        Failure {
            class,
            error_key,
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
        let mut memos = ViewMemos::default();
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
        let mut memos = ViewMemos::default();
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

    #[test]
    fn error_text_and_ack_words_match_their_lookups() {
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

    #[test]
    fn outputs_and_classes() {
        assert_eq!(
            view_of("search", "{}", r#"{"results":[],"query":"x"}"#, Some(true)).1,
            OutKind::Empty
        );
        assert_eq!(
            view_of("write", "{}", r#"{"ok":true}"#, Some(true)).1,
            OutKind::Ack
        );
        assert_eq!(
            view_of("get_job_status", "{}", "{}", None).2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of("browser", r#"{"action":"scroll_down"}"#, "{}", None).2,
            ToolClass::Scroll
        );
        assert_eq!(
            view_of(
                "bash",
                r#"{"command":"pytest tests/test_status.py"}"#,
                "{}",
                None
            )
            .2,
            ToolClass::Normal
        );
        assert_eq!(
            view_of("bash", r#"{"command":"sleep 30"}"#, "{}", None).2,
            ToolClass::Poll
        );
        assert_eq!(
            view_of("gdb", r#"{"cmd":"next"}"#, "{}", None).2,
            ToolClass::Step
        );
    }
}
