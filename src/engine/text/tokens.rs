//! Words: the one definition of where a word breaks, and the tokenisers that apply it.
//!
//! A word is a maximal run of characters that are not breaks, with `.`, `-`, `_` and `/`
//! trimmed from its ends but kept inside it, so `auth.py` stays whole and never reads as the
//! word `auth`. A break is whitespace (Unicode's) or ASCII punctuation other than those four.
//! [`is_break`] says it for a byte, [`is_word_break`] for a char (the same, plus non-ASCII
//! whitespace), [`is_trimmed`] names the four, and [`trim`] cuts them: no tokeniser here
//! decides anything of its own.
//!
//! Three scanners apply that rule, each where it is fastest; the tests hold each of them, and
//! the rule itself, to the word break as first written (a list of cases, split by chars):
//! - [`Words::of`]: the lowercased words, copied into one buffer; any text, split by chars;
//! - [`ascii_tokens`]: the same words of ASCII text, in place and lazily, for a caller that
//!   stops at the first word or reads a phrase ahead;
//! - [`for_each_ascii_token`]: every word of ASCII text, its bounds found 64 bytes at a time.
//!
//! Other splitters in the engine read something other than words, and differ on purpose:
//! - `normalize_message` and `normalize_error` (`normalize`) split on whitespace only: a
//!   message's identity keeps its punctuation;
//! - the near-duplicate detector's `unordered_key` (`detectors/neardup.rs`) splits on
//!   whitespace and `,;"'()` only, keeps case and keeps `:`, `=`, brackets inside a token, then
//!   cuts it at `.`, `/`, `_`, `-`, `:` to drop generated ids: its keys are stored in run state,
//!   so its rule stays its own;
//! - the step view cuts tool names at case changes (`getJobStatus`) and reads shell commands on
//!   whitespace (`detectors/view/tool_class.rs`): names and commands, not prose.
use super::blocks::{byte_mask, each_block64};

/// Word-level tokens: lowercased, split on whitespace and on punctuation that cannot be part of
/// a word, keeping `.`, `_`, `-` and `/` *inside* a token. So `auth.py` stays one token and
/// never reads as the word `auth`, and `"failed":0` yields `failed` only as a key, which failure
/// classification never looks at (it reads error fields, not keys).
#[cfg(test)]
pub(crate) fn words(s: &str) -> Vec<String> {
    Words::of(s).iter().map(str::to_string).collect()
}

/// Whether byte `c` breaks a word: ASCII whitespace (tab, LF, VT, FF, CR, space, as
/// `char::is_whitespace` has them), or printable ASCII punctuation other than the four kept
/// inside words. No byte of a non-ASCII char breaks (they are all 0x80 and up).
///
/// Arithmetic, not a lookup or a list of cases, so that [`byte_mask`] tests 64 bytes at once in
/// vector registers.
#[inline(always)]
pub(super) const fn is_break(c: u8) -> bool {
    let space = (c.wrapping_sub(0x09) < 5) | (c == b' ');
    let kept = c.is_ascii_alphanumeric() | is_trimmed(c);
    space | ((c.wrapping_sub(0x21) < 0x5e) & !kept)
}

/// The punctuation kept inside a word but trimmed from its ends.
#[inline(always)]
const fn is_trimmed(c: u8) -> bool {
    (c == b'.') | (c == b'-') | (c == b'_') | (c == b'/')
}

/// [`is_break`] for a char: the same on ASCII, and Unicode whitespace beyond it.
fn is_word_break(c: char) -> bool {
    if c.is_ascii() {
        is_break(c as u8)
    } else {
        c.is_whitespace()
    }
}

/// [`is_break`] of each byte, as a table: the byte-at-a-time scan of [`AsciiTokens`] was tuned
/// with a lookup. Built from [`is_break`], so the two cannot disagree.
const ASCII_BREAK: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = is_break(i as u8);
        i += 1;
    }
    t
};

/// The bounds of the word `b[start..end]` once [`is_trimmed`] bytes are cut from both ends
/// (equal when nothing is left). Every byte cut is ASCII, so both ends stay on char boundaries
/// whatever the text.
#[inline(always)]
fn trim(b: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    while start < end && is_trimmed(b[start]) {
        start += 1;
    }
    while start < end && is_trimmed(b[end - 1]) {
        end -= 1;
    }
    (start, end)
}

/// The tokens of [`Words::of`] for ASCII text, in their original case and in place (no copy):
/// for a caller that only compares them, ASCII-case-insensitively. Meaningless for non-ASCII
/// text, whose words [`Words::of`] splits on Unicode whitespace.
pub(crate) fn ascii_tokens(s: &str) -> impl Iterator<Item = &str> + '_ {
    AsciiTokens { s, i: 0 }
}

/// The iterator of [`ascii_tokens`], cloneable to read a phrase ahead.
#[derive(Clone)]
struct AsciiTokens<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Iterator for AsciiTokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let b = self.s.as_bytes();
        let mut i = self.i;
        loop {
            while i < b.len() && ASCII_BREAK[usize::from(b[i])] {
                i += 1;
            }
            if i == b.len() {
                self.i = i;
                return None;
            }
            let start = i;
            while i < b.len() && !ASCII_BREAK[usize::from(b[i])] {
                i += 1;
            }
            let (start, end) = trim(b, start, i);
            if start < end {
                self.i = i;
                return Some(&self.s[start..end]);
            }
        }
    }
}

/// The tokens of [`words`] in one buffer: detectors tokenise several texts per step, and one
/// allocation per token was a large share of their time.
#[derive(Debug, Default)]
pub(crate) struct Words {
    buf: String,
    spans: Vec<(usize, usize)>,
}

impl Words {
    pub(crate) fn of(s: &str) -> Self {
        let mut w = Self {
            buf: String::with_capacity(s.len()),
            spans: Vec::with_capacity(s.len() / 6 + 1),
        };
        if s.is_ascii() {
            // Same tokens as below: for ASCII text `is_word_break` and the lowercasing are per
            // byte.
            for t in ascii_tokens(s) {
                let at = w.buf.len();
                w.buf
                    .extend(t.bytes().map(|c| char::from(c.to_ascii_lowercase())));
                w.spans.push((at, w.buf.len()));
            }
            return w;
        }
        for raw in s.split(is_word_break) {
            let t = raw.trim_matches(|c: char| c.is_ascii() && is_trimmed(c as u8));
            if t.is_empty() {
                continue;
            }
            let start = w.buf.len();
            w.buf.push_str(&t.to_lowercase());
            w.spans.push((start, w.buf.len()));
        }
        w
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&str> {
        self.spans.get(i).map(|&(a, b)| &self.buf[a..b])
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.spans.iter().map(|&(a, b)| &self.buf[a..b])
    }

    /// Whether `phrase` occurs as a contiguous word sequence.
    pub(crate) fn has_phrase(&self, phrase: &[&str]) -> bool {
        let n = phrase.len();
        if n == 0 || self.len() < n {
            return false;
        }
        (0..=self.len() - n).any(|i| {
            phrase
                .iter()
                .enumerate()
                .all(|(j, p)| self.get(i + j) == Some(*p))
        })
    }

    /// Whether the space-separated `phrase` occurs word by word.
    pub(crate) fn has_phrase_str(&self, phrase: &str) -> bool {
        if !phrase.is_ascii() {
            let p = Words::of(phrase);
            let refs: Vec<&str> = p.iter().collect();
            return self.has_phrase(&refs);
        }
        // Called for every configured phrase on every failure, and most phrases miss on their
        // first word: the phrase is tokenised lazily, in place, only where that word matches.
        let eq = |tok: &str, p: &str| {
            tok.len() == p.len()
                && tok
                    .bytes()
                    .zip(p.bytes())
                    .all(|(a, b)| a == b.to_ascii_lowercase())
        };
        let mut parts = AsciiTokens { s: phrase, i: 0 };
        let Some(first) = parts.next() else {
            return false;
        };
        (0..self.len()).any(|i| {
            self.get(i).is_some_and(|t| eq(t, first))
                && parts
                    .clone()
                    .enumerate()
                    .all(|(j, p)| self.get(i + 1 + j).is_some_and(|t| eq(t, p)))
        })
    }
}

/// Whether `phrase` occurs in `tokens` as a contiguous word sequence.
#[cfg(test)]
pub(crate) fn has_phrase(tokens: &[String], phrase: &[&str]) -> bool {
    if phrase.is_empty() || tokens.len() < phrase.len() {
        return false;
    }
    tokens
        .windows(phrase.len())
        .any(|w| w.iter().zip(phrase).all(|(a, b)| a == b))
}

/// Whether the space-separated `phrase` occurs in `tokens` word by word.
#[cfg(test)]
pub(crate) fn has_phrase_str(tokens: &[String], phrase: &str) -> bool {
    let p = words(phrase);
    let refs: Vec<&str> = p.iter().map(String::as_str).collect();
    has_phrase(tokens, &refs)
}

/// The tokens of [`ascii_tokens`], handed to `f` in order with their first eight bytes as
/// one little-endian integer (zeros past the text's end; bytes past the token's end are
/// whatever follows it). Token bounds come from bit masks of 64 bytes at a time, classified
/// without a branch per byte: the iterator's scan to each token's end mispredicted at every
/// word, and every thought and argument set is tokenised.
#[inline(always)]
pub(super) fn for_each_ascii_token<'a>(b: &'a [u8], mut f: impl FnMut(&'a [u8], u64)) {
    // Trims the word `b[start..end]` and hands on what is left.
    let mut emit = |start: usize, end: usize| {
        let (start, end) = trim(b, start, end);
        if start == end {
            return;
        }
        let head = match b.get(start..start + 8) {
            Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
            None => b[start..]
                .iter()
                .rev()
                .fold(0, |k, &c| k << 8 | u64::from(c)),
        };
        f(&b[start..end], head);
    };
    // Where the open token started, if one runs into the current block.
    let mut open: Option<usize> = None;
    // Padded with a break: a token open at the text's end ends there.
    each_block64(b, b' ', |n, block| {
        let word = !byte_mask(block, is_break);
        let carry = u64::from(open.is_some());
        // A start is a word byte after a break; an end, a break byte after a word byte.
        let mut starts = word & !((word << 1) | carry);
        let mut ends = !word & ((word << 1) | carry);
        // Starts and ends alternate: take whichever comes first.
        while starts | ends != 0 {
            let at = (starts | ends).trailing_zeros();
            let i = n * 64 + at as usize;
            if starts >> at & 1 == 1 {
                starts &= starts - 1;
                open = Some(i);
            } else {
                ends &= ends - 1;
                if let Some(s) = open.take() {
                    emit(s, i);
                }
            }
        }
    });
    if let Some(s) = open {
        emit(s, b.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_file_names_whole() {
        assert_eq!(
            words("Opened lib/auth.py: 401."),
            vec!["opened", "lib/auth.py", "401"]
        );
        assert!(!words("auth.py").contains(&"auth".to_string()));
        assert!(has_phrase_str(
            &words("Error: old text NOT found in file"),
            "old text not found"
        ));
    }

    /// The word break as first written, a list of cases: what [`is_break`], [`ASCII_BREAK`] and
    /// [`is_word_break`] must all say.
    fn reference_is_word_break(c: char) -> bool {
        c.is_whitespace()
            || matches!(
                c,
                ',' | ';'
                    | ':'
                    | '('
                    | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '<'
                    | '>'
                    | '"'
                    | '\''
                    | '`'
                    | '='
                    | '|'
                    | '!'
                    | '?'
                    | '*'
                    | '#'
                    | '\\'
                    | '&'
                    | '+'
                    | '~'
                    | '^'
                    | '$'
                    | '%'
                    | '@'
            )
    }

    /// The trim as first written, on chars.
    fn reference_trim(t: &str) -> &str {
        t.trim_matches(|c: char| matches!(c, '.' | '-' | '_' | '/'))
    }

    #[test]
    fn one_word_break_whatever_the_form() {
        for c in 0..=u8::MAX {
            let want = c.is_ascii() && reference_is_word_break(char::from(c));
            assert_eq!(is_break(c), want, "{c}");
            assert_eq!(ASCII_BREAK[usize::from(c)], want, "{c}");
        }
        // Every char of the Basic Multilingual Plane and a few beyond it.
        for c in (0..0x1_0000).chain([0x1_f600, 0x2_0000, 0x10_ffff]) {
            if let Some(c) = char::from_u32(c) {
                assert_eq!(is_word_break(c), reference_is_word_break(c), "{c:?}");
                let mut buf = [0u8; 4];
                let enc = c.encode_utf8(&mut buf);
                let trimmed = c.is_ascii() && is_trimmed(c as u8);
                assert_eq!(trimmed, reference_trim(enc).is_empty(), "{c:?}");
            }
        }
        // The char split of `Words::of`, on text both ASCII and not.
        for t in [
            "caf\u{e9}\u{3000}Ol\u{e9}:x.py\u{a0}-a_b- \u{2003}\u{1f600}/\u{e9}/ z",
            "\u{85}a\u{85}.b.\u{2028}C",
        ] {
            let want: Vec<String> = t
                .split(reference_is_word_break)
                .map(reference_trim)
                .filter(|t| !t.is_empty())
                .map(str::to_lowercase)
                .collect();
            assert_eq!(words(t), want, "{t}");
        }
    }

    #[test]
    fn ascii_fast_paths_agree_with_the_general_ones() {
        let ascii = "Error: Old TEXT\x0bnot found\tin x.py (see /tmp/a_b-); __init__.py -- a.b. c/";
        let reference: Vec<String> = ascii
            .split(reference_is_word_break)
            .map(reference_trim)
            .filter(|t| !t.is_empty())
            .map(str::to_lowercase)
            .collect();
        assert_eq!(words(ascii), reference);
        let text = "Error: Old TEXT not found\tin x.py (see /tmp/a_b-); caf\u{e9}";
        let w = Words::of(text);
        for p in [
            "old text not found",
            "OLD text",
            "x.py",
            "caf\u{e9}",
            "",
            "found in x.py see",
        ] {
            let q = Words::of(p);
            let refs: Vec<&str> = q.iter().collect();
            assert_eq!(w.has_phrase_str(p), w.has_phrase(&refs), "{p}");
        }
    }

    /// The tokens of `ascii_tokens` as first written (trimmed as chars), for any text.
    fn reference_ascii_tokens(s: &str) -> Vec<&str> {
        s.split(|c: char| c.is_ascii() && reference_is_word_break(c))
            .map(reference_trim)
            .filter(|t| !t.is_empty())
            .collect()
    }

    #[test]
    fn ascii_tokens_trim_bytes_like_chars() {
        for t in [
            "",
            "-",
            "._-/",
            "a",
            "--a--",
            "./x.py/ ,, -_- a_b _c_ d.",
            "caf\u{e9}. -\u{e9}- /\u{3a3}/ x\u{3a3}.-",
            "\u{e9}\u{e9}\t..\n\u{3000}a\u{3000}b",
            "(old) [text] {not} found!? at 'a.b'",
        ] {
            assert_eq!(
                ascii_tokens(t).collect::<Vec<_>>(),
                reference_ascii_tokens(t),
                "{t}"
            );
        }
    }

    #[test]
    fn lazy_phrase_match_agrees_with_tokenised_phrases() {
        let texts = [
            "",
            "a",
            "a a b a a a b c",
            "Error: old text NOT found. Old text not",
            "x y z x y z x y",
            "caf\u{e9} au lait, caf\u{e9} noir",
        ];
        let long = "a ".repeat(20);
        let phrases = [
            "",
            "  .. ",
            "a",
            "A a B",
            "a a a b",
            "a b c d",
            "old text not found",
            "OLD TEXT NOT",
            "text not found. old",
            "x y z x y z x y",
            "x y z x y z x y z",
            "z",
            "caf\u{e9} noir",
            long.as_str(),
        ];
        for t in texts {
            let w = Words::of(t);
            for p in phrases {
                let q = Words::of(p);
                let refs: Vec<&str> = q.iter().collect();
                assert_eq!(w.has_phrase_str(p), w.has_phrase(&refs), "{t:?} / {p:?}");
            }
        }
        assert!(Words::of(&"a ".repeat(30)).has_phrase_str(&long));
        assert!(!Words::of(&"a ".repeat(19)).has_phrase_str(&long));
    }

    proptest::proptest! {
        /// The block scan gives the tokens the iterator gives: across block boundaries, at the
        /// text's ends, with tokens trimmed to nothing.
        #[test]
        fn token_spans_match_the_iterator(
            parts in proptest::collection::vec(proptest::prop_oneof![
                proptest::string::string_regex("[a-zA-Z0-9]{1,70}").unwrap(),
                proptest::string::string_regex("[-._/]{1,3}").unwrap(),
                proptest::string::string_regex("[ ,:()\t\n]{1,3}").unwrap(),
            ], 0..40)
        ) {
            let s: String = parts.concat();
            let mut got: Vec<&str> = Vec::new();
            for_each_ascii_token(s.as_bytes(), |t, head| {
                // The head is the token's first bytes, then what follows it (or zeros).
                let at = t.as_ptr() as usize - s.as_ptr() as usize;
                let mut want = [0u8; 8];
                let follow = &s.as_bytes()[at..];
                let n = follow.len().min(8);
                want[..n].copy_from_slice(&follow[..n]);
                assert_eq!(head, u64::from_le_bytes(want));
                got.push(std::str::from_utf8(t).unwrap_or("?"));
            });
            proptest::prop_assert_eq!(got, reference_ascii_tokens(&s));
        }
    }
}
