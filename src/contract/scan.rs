//! One pass over an input message that finds the wire fields without building anything.
//!
//! This is the first half of [`super::input`]'s fast path. It accepts only a strict subset of
//! what serde_json accepts for the wire struct: a single JSON object (only JSON whitespace
//! around it), keys without escapes, each known field at most once, string fields holding a
//! string (without `\uD800`..`\uDFFF` escapes, which serde may refuse there) or `null`, every
//! value syntactically valid JSON, nesting at most [`MAX_DEPTH`]. For
//! anything else it answers `None` and the serde path decides, so that path alone ever has to
//! phrase an error; being stricter than serde here costs speed, never correctness.
use super::limits::MAX_DEPTH;

/// Where a field's value lies in the message. For a string field, `start..end` is the text
/// between the quotes; for a raw field, the whole value exactly as it appeared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// The text contains at least one backslash escape (strings only).
    pub(crate) escaped: bool,
}

// The wire fields: the first `N_STR` are string-typed (`Option<String>` on the wire), the rest
// are kept raw (`Option<&RawValue>`).
pub(super) const N_STR: usize = 14;
pub(super) const N_FIELDS: usize = 28;

pub(super) const KIND: usize = 0;
pub(super) const PROJECT_ID: usize = 1;
pub(super) const RUN_ID: usize = 2;
pub(super) const AGENT_NAME: usize = 3;
pub(super) const INPUT: usize = 4;
pub(super) const STEP_TYPE: usize = 5;
pub(super) const CONTENT: usize = 6;
pub(super) const TOOL_NAME: usize = 7;
pub(super) const AGENT: usize = 8;
pub(super) const CALLER: usize = 9;
pub(super) const STATUS: usize = 10;
pub(super) const TERMINATION_REASON: usize = 11;
pub(super) const OUTPUT: usize = 12;
pub(super) const SIGNAL_EVENT_ID: usize = 13;
pub(super) const V: usize = 14;
pub(super) const TS: usize = 15;
pub(super) const METADATA: usize = 16;
pub(super) const STEP_INDEX: usize = 17;
pub(super) const TOOL_INPUT: usize = 18;
pub(super) const TOOL_OUTPUT: usize = 19;
pub(super) const TOOL_SUCCESS: usize = 20;
pub(super) const TOOL_LATENCY_MS: usize = 21;
pub(super) const TOKENS: usize = 22;
pub(super) const COST_USD: usize = 23;
pub(super) const TOKENS_IN_CONTEXT: usize = 24;
pub(super) const REPORTED_LOOP_DETECTED: usize = 25;
pub(super) const REPORTED_LOOP_STEP_INDEX: usize = 26;
pub(super) const REPORTED_TOTALS: usize = 27;

/// The wire field names in the order of the indices above (tests generate and check keys from it).
#[cfg(test)]
pub(super) const FIELD_NAMES: [&str; N_FIELDS] = [
    "kind",
    "project_id",
    "run_id",
    "agent_name",
    "input",
    "step_type",
    "content",
    "tool_name",
    "agent",
    "caller",
    "status",
    "termination_reason",
    "output",
    "signal_event_id",
    "v",
    "ts",
    "metadata",
    "step_index",
    "tool_input",
    "tool_output",
    "tool_success",
    "tool_latency_ms",
    "tokens",
    "cost_usd",
    "tokens_in_context",
    "reported_loop_detected",
    "reported_loop_step_index",
    "reported_totals",
];

/// Index (the constants above) of a key, if it names a wire field. Dispatching on the length first
/// keeps the usual key down to one or two comparisons.
fn field_index(key: &[u8]) -> Option<usize> {
    let i = match key.len() {
        1 if key == b"v" => V,
        2 if key == b"ts" => TS,
        4 => match key {
            b"kind" => KIND,
            _ => return None,
        },
        5 => match key {
            b"input" => INPUT,
            b"agent" => AGENT,
            _ => return None,
        },
        6 => match key {
            b"run_id" => RUN_ID,
            b"caller" => CALLER,
            b"status" => STATUS,
            b"output" => OUTPUT,
            b"tokens" => TOKENS,
            _ => return None,
        },
        7 => match key {
            b"content" => CONTENT,
            _ => return None,
        },
        8 => match key {
            b"metadata" => METADATA,
            b"cost_usd" => COST_USD,
            _ => return None,
        },
        9 => match key {
            b"step_type" => STEP_TYPE,
            b"tool_name" => TOOL_NAME,
            _ => return None,
        },
        10 => match key {
            b"project_id" => PROJECT_ID,
            b"agent_name" => AGENT_NAME,
            b"step_index" => STEP_INDEX,
            b"tool_input" => TOOL_INPUT,
            _ => return None,
        },
        11 => match key {
            b"tool_output" => TOOL_OUTPUT,
            _ => return None,
        },
        12 => match key {
            b"tool_success" => TOOL_SUCCESS,
            _ => return None,
        },
        15 => match key {
            b"tool_latency_ms" => TOOL_LATENCY_MS,
            b"reported_totals" => REPORTED_TOTALS,
            b"signal_event_id" => SIGNAL_EVENT_ID,
            _ => return None,
        },
        17 => match key {
            b"tokens_in_context" => TOKENS_IN_CONTEXT,
            _ => return None,
        },
        18 => match key {
            b"termination_reason" => TERMINATION_REASON,
            _ => return None,
        },
        22 => match key {
            b"reported_loop_detected" => REPORTED_LOOP_DETECTED,
            _ => return None,
        },
        24 => match key {
            b"reported_loop_step_index" => REPORTED_LOOP_STEP_INDEX,
            _ => return None,
        },
        _ => return None,
    };
    Some(i)
}

/// What the scan found: `[i]` is `None` when field `i` is absent or `null` (serde reads both as
/// `None` for an `Option` field).
pub(super) type Fields = [Option<Span>; N_FIELDS];

/// Scan `b` (already known to be UTF-8) into `out`, which must start all `None`. `None`: not in
/// the subset described in the module doc, let serde decide.
pub(super) fn scan(b: &[u8], out: &mut Fields) -> Option<()> {
    // Spans are 32-bit to keep `Fields` small; no message comes near 4 GiB.
    u32::try_from(b.len()).ok()?;
    let mut s = Scanner { b, i: 0 };
    let mut seen: u32 = 0;
    s.ws();
    s.eat(b'{')?;
    s.ws();
    if s.peek() == Some(b'}') {
        s.i += 1;
    } else {
        loop {
            s.eat(b'"')?;
            let key_start = s.i;
            let (key_end, escaped) = s.string_body::<false>()?;
            // serde matches a key after unescaping it; an escaped key is left to serde.
            if escaped {
                return None;
            }
            let key = b.get(key_start..key_end)?;
            // Compact JSON has the colon right after the key.
            if s.peek() == Some(b':') {
                s.i += 1;
            } else {
                s.ws();
                s.eat(b':')?;
            }
            s.ws();
            match field_index(key) {
                Some(f) => {
                    // A repeated known field is serde's `duplicate_field` error.
                    if seen & (1 << f) != 0 {
                        return None;
                    }
                    seen |= 1 << f;
                    out[f] = if s.peek() == Some(b'n') && s.literal(b"null") {
                        None
                    } else if f < N_STR {
                        s.eat(b'"')?;
                        let start = s.i;
                        let (end, escaped) = s.string_body::<true>()?;
                        Some(Span {
                            start: start as u32,
                            end: end as u32,
                            escaped,
                        })
                    } else {
                        let start = s.i;
                        // Most raw fields are numbers: skip the general dispatch.
                        if let Some(b'0'..=b'9') = s.peek() {
                            s.number()?;
                        } else {
                            s.value(1)?;
                        }
                        Some(Span {
                            start: start as u32,
                            end: s.i as u32,
                            escaped: false,
                        })
                    };
                }
                None => s.value(1)?,
            }
            s.ws();
            match s.next()? {
                b',' => s.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.ws();
    (s.i == b.len()).then_some(())
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    #[inline(always)]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// JSON's whitespace, exactly the four bytes serde_json skips.
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    #[inline(always)]
    fn literal(&mut self, lit: &[u8]) -> bool {
        if self.b.get(self.i..self.i + lit.len()) == Some(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    /// After an opening quote: the index of the closing quote (then skipped) and whether any
    /// escape occurred. Escapes are checked as serde_json checks them when it skips a string
    /// (any `\uXXXX` is fine); control characters are refused as serde_json refuses them.
    /// `TO_STRING`: the string will be unescaped into a `String`, which serde refuses for a
    /// lone surrogate; surrogates, even paired, are then left to serde. A const parameter, so
    /// each caller gets a copy without the flag's test in its loop.
    #[inline]
    fn string_body<const TO_STRING: bool>(&mut self) -> Option<(usize, bool)> {
        let b = self.b;
        let mut i = self.i;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the first that needs a look: quote, backslash or
            // control character (bytes of multi-byte UTF-8 sequences all pass).
            while let Some(chunk) = b.get(i..i + 8) {
                let mut w = [0u8; 8];
                w.copy_from_slice(chunk);
                let m = special_mask(u64::from_le_bytes(w));
                if m != 0 {
                    i += (m.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            let c = *b.get(i)?;
            match c {
                b'"' => {
                    self.i = i + 1;
                    return Some((i, escaped));
                }
                b'\\' => {
                    escaped = true;
                    match *b.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let hex = b.get(i + 2..i + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            // `\uD800` ..= `\uDFFF`.
                            if TO_STRING
                                && hex[0].eq_ignore_ascii_case(&b'd')
                                && matches!(hex[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                            {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => i += 1,
            }
        }
    }

    /// Skip one JSON value, checking its syntax; `depth` counts the containers around it.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.string_body::<false>().map(|_| ())
            }
            b'{' => {
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.eat(b'"')?;
                    self.string_body::<false>()?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b'}' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true").then_some(()),
            b'f' => self.literal(b"false").then_some(()),
            b'n' => self.literal(b"null").then_some(()),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, the JSON number grammar.
    #[inline]
    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digit()?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digit()?;
            self.digits();
        }
        Some(())
    }

    #[inline(always)]
    fn digit(&mut self) -> Option<()> {
        match self.next()? {
            b'0'..=b'9' => Some(()),
            _ => None,
        }
    }

    #[inline(always)]
    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

/// The top bit of each byte of `x` (little-endian) that is `"`, `\` or below 0x20, by the
/// classic SWAR zero-byte test. A borrow can also flag a byte above a flagged one, never below,
/// so the lowest flag is exact, and that is the only one used.
fn special_mask(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let quote = zero(x ^ (ONES * u64::from(b'"')));
    let backslash = zero(x ^ (ONES * u64::from(b'\\')));
    // A byte below 0x20: subtracting 0x20 borrows into its top bit, unless that bit was set.
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    quote | backslash | control
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every wire field is found under its own index, and the string-typed ones are exactly
    /// those the wire struct declares as strings.
    #[test]
    fn keys_map_to_their_fields() {
        for (i, name) in FIELD_NAMES.iter().enumerate() {
            assert_eq!(field_index(name.as_bytes()), Some(i), "{name}");
            assert_eq!(field_index(&name.as_bytes()[1..]), None, "{name}");
            assert_eq!(field_index(format!("{name}_").as_bytes()), None, "{name}");
        }
        let mut strings = FIELD_NAMES[..N_STR].to_vec();
        let mut wire = super::super::input::STRING_FIELDS.to_vec();
        strings.sort_unstable();
        wire.sort_unstable();
        assert_eq!(strings, wire);
    }

    #[test]
    fn special_bytes_are_found_where_they_are() {
        for at in 0..8 {
            for special in [b'"', b'\\', 0, 0x1f] {
                let mut w = [b'a'; 8];
                w[at] = special;
                // Bytes after the first special one may also be flagged; before it, never.
                if at + 1 < 8 {
                    w[at + 1] = 0xe9;
                }
                let m = special_mask(u64::from_le_bytes(w));
                assert_eq!(m.trailing_zeros() / 8, at as u32, "{w:?}");
            }
        }
        assert_eq!(special_mask(u64::from_le_bytes(*b" !#[]~\x7f\xff")), 0);
    }
}
