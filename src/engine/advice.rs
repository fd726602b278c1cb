//! The corrective message a guard hands a looping agent (a signal's `advice`): what repeats,
//! since which step, the evidence, and what to try instead.
//!
//! Built once, here, from the finding alone, so that the worker's signal, the HTTP verdict
//! route and every guard hand the model the same words, and a replay writes them byte for
//! byte. It reads only the finding's own fields (no clock, no state), and reads evidence
//! leniently: a detector that gains or renames a field gets a plainer message, never an error.
use serde_json::Value;
use std::fmt::Write;

/// Longest excerpt of a pattern or error text quoted in a message, in bytes: the message goes
/// into the agent's next prompt, where a page of stack trace would crowd out the point.
const QUOTE_BYTES: usize = 160;

/// What the message is built from: a finding's public fields.
pub(crate) struct Facts<'a> {
    pub(crate) detector: &'a str,
    pub(crate) pattern: &'a str,
    pub(crate) hits: u32,
    pub(crate) first_step_index: u64,
    pub(crate) evidence: &'a Value,
}

/// The message for one finding: two or three sentences, plain text.
pub(crate) fn advice(f: &Facts<'_>) -> String {
    let ev = f.evidence;
    let text = |k: &str| ev.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let num = |k: &str| ev.get(k).and_then(Value::as_u64);
    let since = f.first_step_index;
    let n = f.hits;
    let mut out = String::with_capacity(320);
    out.push_str("eddy: this run is repeating itself. ");
    // Writing into a String cannot fail.
    let _ = match f.detector {
        "repeated_operation" => {
            let tool = text("tool").unwrap_or("the same tool");
            let poll = text("tool_class") == Some("poll");
            write!(
                out,
                "Since step {since} you called {} {n} times with the same arguments and got \
                 the same result each time. {}",
                quote(tool),
                if poll {
                    "If you are waiting for something to finish, wait longer between checks, \
                     or stop polling and report that it is still running."
                } else {
                    "Calling it again will not change the result: use what it returned, \
                     change the arguments, try a different tool, or say what is blocking you."
                }
            )
        }
        "repeated_failure" => {
            let tool = text("tool").unwrap_or("a tool");
            let error = text("error");
            let instead = match text("class") {
                Some("permanent") => {
                    "Retrying will not fix it: change what causes it (permissions, the \
                     input's format, the path or name) or take another approach."
                }
                Some("retryable") => {
                    "The service is failing: wait before retrying, use another source, or \
                     report that it is unavailable."
                }
                Some("recoverable") => {
                    "Look at the current state again (re-read the file or list what exists) \
                     and change the call to match it before trying again."
                }
                _ => {
                    "Trying the same thing again will fail the same way: change the call, \
                     use another tool, or report the error."
                }
            };
            write!(
                out,
                "Since step {since}, {} failed {n} times with the same error{}{}. {instead}",
                quote(tool),
                if error.is_some() { ": " } else { "" },
                quote(error.unwrap_or_default()),
            )
        }
        "cycle" => write!(
            out,
            "Since step {since} you have been going round the same cycle of {} calls, with \
             the same results every round. Break the cycle: use what these calls returned, \
             or take a different next step.",
            Count(num("length"), "several"),
        ),
        "handoff_cycle" => write!(
            out,
            "Since step {since} the work has been handed around the same {} agents with the \
             same payload. Decide with the information you have, or hand it to someone who \
             can add something new, instead of passing it on again.",
            Count(num("agents"), "few"),
        ),
        "near_duplicate" => {
            let tool = text("tool").unwrap_or("the same tool");
            let found = match text("output_kind") {
                Some("empty") => "nothing was found each time",
                Some("failure") => "each failed the same way",
                _ => "the results did not change",
            };
            write!(
                out,
                "Since step {since} you called {} {n} times with reworded arguments, and \
                 {found}. Rewording again will not help: look for something different, use \
                 another tool, or answer with what you have and say what is missing.",
                quote(tool),
            )
        }
        "content_repetition" => {
            let what = match text("rule") {
                Some("monologue") => {
                    "you have written several messages in a row that \
                                      restate one plan without acting on it"
                }
                Some("chanting") => "your last message repeats the same text over and over",
                Some("empty_response") => "your answers are empty",
                _ => "you keep saying the same thing without new information",
            };
            write!(
                out,
                "Since step {since} {what}. Stop restating: take the next concrete action \
                 (call a tool with new arguments) or give your final answer."
            )
        }
        "context_pressure" => write!(
            out,
            "Since step {since} your context keeps growing (or being compacted) while \
             nothing new comes in ({}). Summarise what you know, drop raw outputs you no \
             longer need, and read only what is still missing.",
            quote(f.pattern),
        ),
        "no_progress" => write!(
            out,
            "Since step {since} your calls keep returning the same few results ({}). Change \
             approach: use those results, or try something you have not tried yet.",
            quote(f.pattern),
        ),
        "budget" => write!(
            out,
            "The run has reached its budget ({}). Finish now with the best answer you have.",
            quote(f.pattern),
        ),
        _ => write!(
            out,
            "Since step {since}: {}. Repeating it will not help: try a different approach, or \
             say what is blocking you.",
            quote(f.pattern),
        ),
    };
    out
}

/// `s` cut to [`QUOTE_BYTES`] on a character boundary, with an ellipsis when cut; written
/// straight into the message (a signal's message is built on the engine's path).
fn quote(s: &str) -> Quote<'_> {
    Quote(s)
}

struct Quote<'a>(&'a str);

impl std::fmt::Display for Quote<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0;
        if s.len() <= QUOTE_BYTES {
            return f.write_str(s);
        }
        let mut end = QUOTE_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        f.write_str(&s[..end])?;
        f.write_str("…")
    }
}

/// A count from the evidence, or a word when it is missing.
struct Count(Option<u64>, &'static str);

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str(self.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts<'a>(detector: &'a str, pattern: &'a str, evidence: &'a Value) -> Facts<'a> {
        Facts {
            detector,
            pattern,
            hits: 3,
            first_step_index: 7,
            evidence,
        }
    }

    #[test]
    fn says_what_repeats_since_when_and_what_to_do() {
        let ev = json!({"tool": "web_search", "tool_class": "normal"});
        let a = advice(&facts(
            "repeated_operation",
            "web_search(same call, same result) x3",
            &ev,
        ));
        assert!(a.contains("Since step 7"), "{a}");
        assert!(a.contains("web_search 3 times"), "{a}");
        assert!(a.contains("try a different tool"), "{a}");
    }

    #[test]
    fn polls_are_told_to_wait_failures_get_their_error() {
        let poll = json!({"tool": "job_status", "tool_class": "poll"});
        assert!(advice(&facts("repeated_operation", "p", &poll)).contains("wait longer"));
        let ev = json!({"tool": "s3_get", "class": "permanent", "error": "403 access denied"});
        let a = advice(&facts("repeated_failure", "p", &ev));
        assert!(
            a.contains("s3_get failed 3 times with the same error: 403 access denied."),
            "{a}"
        );
        assert!(a.contains("Retrying will not fix it"), "{a}");
    }

    #[test]
    fn unknown_detectors_and_missing_evidence_still_get_a_message() {
        let a = advice(&facts("some_new_detector", "x(y) x3", &Value::Null));
        assert!(a.contains("Since step 7: x(y) x3. Repeating"), "{a}");
        let a = advice(&facts("repeated_failure", "p", &Value::Null));
        assert!(
            a.contains("a tool failed 3 times with the same error."),
            "{a}"
        );
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let long = "é".repeat(200);
        let ev = json!({"tool": "t", "class": "other", "error": long});
        let a = advice(&facts("repeated_failure", "p", &ev));
        assert!(a.contains('…'));
        assert!(a.len() < 600, "{}", a.len());
    }

    #[test]
    fn the_same_finding_gives_the_same_bytes() {
        let ev = json!({"length": 2});
        let one = advice(&facts("cycle", "cycle of 2 actions x2", &ev));
        assert_eq!(one, advice(&facts("cycle", "cycle of 2 actions x2", &ev)));
        assert!(one.contains("cycle of 2 calls"), "{one}");
    }
}
