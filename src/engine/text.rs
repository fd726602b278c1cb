//! Text utilities shared by the fingerprints and the detectors: volatile-value normalisation,
//! word-level tokens, phrase matching and a deterministic MinHash.
//!
//! Everything here is a pure function of its input (no random seeds, no process-dependent
//! hashers) because fingerprints and MinHash signatures are persisted in the changelog and must
//! compare equal after a restore on another machine or Rust version.
use super::memo::Memo;
use sha2::{Digest, Sha256};

/// Replace values that differ on every call although they mean nothing for the operation:
/// UUIDs, ISO-8601 date-times, wall-clock times, long hex ids, epoch timestamps and measured
/// durations (`0.532s`). Works on whole strings and on tokens embedded in prose alike.
#[cfg(test)]
pub(crate) fn normalize_volatile(s: &str) -> String {
    normalize_volatile_cow(s).into_owned()
}

/// [`normalize_volatile`], borrowing when nothing changed (most strings): no copy of them.
///
/// Every value replaced here must hold an ASCII digit or `-`: the fingerprint's one-pass parse
/// skips strings holding neither (`fingerprint::may_hold_volatile`). A new pattern without
/// either needs that check widened too.
pub fn normalize_volatile_cow(s: &str) -> std::borrow::Cow<'_, str> {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut last = 0;
    // Where the last replacement ended: no match starts inside one.
    let mut resume = 0;
    // Whether the byte before the current block is part of a word.
    let mut in_word = false;
    // Blocks of 64 bytes, classified into bit masks without a branch per byte: a scan that
    // branched at every word's start and end mispredicted twice a word, and this runs over
    // every payload string and message. The last block is padded with spaces (neither class).
    each_block64(b, b' ', |n, block| {
        let word = byte_mask(block, |c| c.is_ascii_alphanumeric());
        let hex = byte_mask(block, |c| c.is_ascii_hexdigit());
        // Only start a match at a token boundary, so `abc123...` inside a word is left alone;
        // and every volatile value starts with a hex digit (most words do not: nothing to try).
        let mut starts = hex & !((word << 1) | u64::from(in_word));
        // A value starting with a letter is a UUID or a hex run, eight hex digits at least: a
        // word like `data` or `each` is not tried. Bit j of `hex8`: bytes j..j+8 are all hex
        // (from bit 57 up it cannot tell, the run going on into the next block: tried).
        let mut hex8 = hex & (hex >> 1);
        hex8 &= hex8 >> 2;
        hex8 &= hex8 >> 4;
        let digit = byte_mask(block, |c| c.is_ascii_digit());
        starts &= digit | hex8 | (!0u64 << 57);
        in_word = word >> 63 == 1;
        while starts != 0 {
            let i = n * 64 + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            if i < resume {
                continue;
            }
            if let Some((len, repl)) = match_volatile(&b[i..]) {
                if out.is_empty() {
                    out.reserve(s.len());
                }
                out.push_str(&s[last..i]);
                out.push_str(repl);
                resume = i + len;
                last = resume;
            }
        }
    });
    if last == 0 {
        return std::borrow::Cow::Borrowed(s);
    }
    out.push_str(&s[last..]);
    std::borrow::Cow::Owned(out)
}

/// `f(n, block)` for each block of 64 bytes of `b` in turn, the last one padded with `pad`.
#[inline(always)]
fn each_block64(b: &[u8], pad: u8, mut f: impl FnMut(usize, &[u8; 64])) {
    let mut full = b.chunks_exact(64);
    let mut n = 0;
    for c in &mut full {
        if let Ok(block) = <&[u8; 64]>::try_from(c) {
            f(n, block);
        }
        n += 1;
    }
    let rest = full.remainder();
    if !rest.is_empty() {
        let mut block = [pad; 64];
        block[..rest.len()].copy_from_slice(rest);
        f(n, &block);
    }
}

/// Bit `j` set where `f(block[j])`. The test runs on all 64 bytes as 0/1 bytes, which the
/// compiler does in vector registers when `f` is arithmetic (not a table lookup); each eight
/// of them are then gathered into a byte by one multiply. A byte loop shifting each bit into
/// place took about five times as long, and this classifies every message and payload string.
#[inline(always)]
fn byte_mask(block: &[u8; 64], f: impl Fn(u8) -> bool) -> u64 {
    let mut ones = [0u8; 64];
    for (o, &c) in ones.iter_mut().zip(block) {
        *o = u8::from(f(c));
    }
    let mut m = 0;
    for (k, e) in ones.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        // Byte i (0 or 1) lands on bit 56 + i and nothing else reaches bits 56..64.
        m |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    m
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn digits(b: &[u8], n: usize) -> bool {
    b.len() >= n && b[..n].iter().all(u8::is_ascii_digit)
}

fn ends_token(b: &[u8], at: usize) -> bool {
    b.get(at).is_none_or(|c| !c.is_ascii_alphanumeric())
}

fn match_volatile(b: &[u8]) -> Option<(usize, &'static str)> {
    // UUID 8-4-4-4-12.
    if b.len() >= 36 {
        let groups = [8usize, 4, 4, 4, 12];
        let mut p = 0;
        let mut ok = true;
        for (gi, g) in groups.iter().enumerate() {
            if !b[p..p + g].iter().all(|c| is_hex(*c)) {
                ok = false;
                break;
            }
            p += g;
            if gi < 4 {
                if b[p] != b'-' {
                    ok = false;
                    break;
                }
                p += 1;
            }
        }
        if ok && ends_token(b, 36) {
            return Some((36, "<uuid>"));
        }
    }
    // ISO-8601 date-time: YYYY-MM-DD[T ]HH:MM[:SS[.fff]][Z|±HH[:]MM]
    if digits(b, 4)
        && b.get(4) == Some(&b'-')
        && digits(&b[5..], 2)
        && b.get(7) == Some(&b'-')
        && digits(&b[8..], 2)
        && matches!(b.get(10), Some(b'T') | Some(b' ') | Some(b't'))
        && b.len() >= 16
        && digits(&b[11..], 2)
        && b.get(13) == Some(&b':')
        && digits(&b[14..], 2)
    {
        let mut p = 16;
        p += time_tail(&b[p..]);
        if b.get(p) == Some(&b'Z') || b.get(p) == Some(&b'z') {
            p += 1;
        } else if matches!(b.get(p), Some(b'+') | Some(b'-')) && digits(&b[p + 1..], 2) {
            let mut q = p + 3;
            if b.get(q) == Some(&b':') {
                q += 1;
            }
            if digits(&b[q..], 2) {
                p = q + 2;
            }
        }
        return Some((p, "<ts>"));
    }
    // Wall-clock time HH:MM:SS[.fff] (log lines).
    if digits(b, 2)
        && b.get(2) == Some(&b':')
        && digits(&b[3..], 2)
        && b.get(5) == Some(&b':')
        && digits(&b[6..], 2)
    {
        let mut p = 8;
        if b.get(p) == Some(&b'.') && b.get(p + 1).is_some_and(u8::is_ascii_digit) {
            p += 1;
            while b.get(p).is_some_and(u8::is_ascii_digit) {
                p += 1;
            }
        }
        if ends_token(b, p) {
            return Some((p, "<time>"));
        }
    }
    // Hex run of 16+ with at least one digit and one letter (request ids, hashes, nonces).
    let hex_len = b.iter().take_while(|c| is_hex(**c)).count();
    if hex_len >= 16 && ends_token(b, hex_len) {
        let run = &b[..hex_len];
        if run.iter().any(u8::is_ascii_digit) && run.iter().any(u8::is_ascii_alphabetic) {
            return Some((hex_len, "<hex>"));
        }
    }
    let dig = b.iter().take_while(|c| c.is_ascii_digit()).count();
    // Epoch seconds or milliseconds (2001..2286): 10 or 13 digits starting with 1.
    if (dig == 10 || dig == 13) && b[0] == b'1' && ends_token(b, dig) && b.get(dig) != Some(&b'.') {
        return Some((dig, "<epoch>"));
    }
    // Measured durations with a fraction: `0.532s`, `12.5 ms`, `1.02sec`.
    if dig >= 1 && b.get(dig) == Some(&b'.') {
        let frac = b[dig + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if frac >= 1 {
            let mut p = dig + 1 + frac;
            if b.get(p) == Some(&b' ') {
                p += 1;
            }
            for unit in ["seconds", "secs", "sec", "ms", "s"] {
                let u = unit.as_bytes();
                if b.len() >= p + u.len()
                    && b[p..p + u.len()].eq_ignore_ascii_case(u)
                    && ends_token(b, p + u.len())
                {
                    return Some((p + u.len(), "<dur>"));
                }
            }
        }
    }
    None
}

fn time_tail(b: &[u8]) -> usize {
    let mut p = 0;
    if b.first() == Some(&b':') && digits(&b[1..], 2) {
        p = 3;
        if b.get(p) == Some(&b'.') || b.get(p) == Some(&b',') {
            let n = b[p + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n > 0 {
                p += 1 + n;
            }
        }
    }
    p
}

/// Word-level tokens: lowercased, split on whitespace and on punctuation that cannot be part of
/// a word, keeping `.`, `_`, `-` and `/` *inside* a token. So `auth.py` stays one token and
/// never reads as the word `auth`, and `"failed":0` yields `failed` only as a key, which failure
/// classification never looks at (it reads error fields, not keys).
#[cfg(test)]
pub(crate) fn words(s: &str) -> Vec<String> {
    Words::of(s).iter().map(str::to_string).collect()
}

fn is_word_break(c: char) -> bool {
    c.is_whitespace() || is_word_punct(c)
}

const fn is_word_punct(c: char) -> bool {
    matches!(
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

/// [`is_word_break`] for each ASCII byte.
const ASCII_BREAK: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 128 {
        // `char::is_whitespace` on ASCII: tab, LF, VT, FF, CR and space.
        t[i] = matches!(i, 0x09..=0x0d | 0x20) || is_word_punct(i as u8 as char);
        i += 1;
    }
    t
};

/// [`ASCII_BREAK`] by arithmetic instead of a lookup, for [`byte_mask`] to test 64 bytes at
/// once: whitespace, and printable punctuation other than the four kept inside words.
#[inline(always)]
fn is_break(c: u8) -> bool {
    let space = (c.wrapping_sub(0x09) < 5) | (c == b' ');
    let kept = c.is_ascii_alphanumeric() | (c == b'.') | (c == b'-') | (c == b'_') | (c == b'/');
    space | ((c.wrapping_sub(0x21) < 0x5e) & !kept)
}

/// The tokens of [`Words::of`] for ASCII text, in their original case and in place (no copy):
/// for a caller that only compares them, ASCII-case-insensitively. Meaningless for non-ASCII
/// text, whose words [`Words::of`] splits on Unicode whitespace.
pub fn ascii_tokens(s: &str) -> impl Iterator<Item = &str> + '_ {
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
            let mut start = i;
            while i < b.len() && !ASCII_BREAK[usize::from(b[i])] {
                i += 1;
            }
            // The trim of `Words::of`, on bytes: every byte trimmed is ASCII, so both ends
            // stay on char boundaries whatever the text.
            let mut end = i;
            while start < end && is_trimmed(b[start]) {
                start += 1;
            }
            while start < end && is_trimmed(b[end - 1]) {
                end -= 1;
            }
            if start < end {
                self.i = i;
                return Some(&self.s[start..end]);
            }
        }
    }
}

/// The punctuation kept inside a token but trimmed from its ends.
fn is_trimmed(c: u8) -> bool {
    matches!(c, b'.' | b'-' | b'_' | b'/')
}

/// The tokens of [`words`] in one buffer: detectors tokenise several texts per step, and one
/// allocation per token was a large share of their time.
#[derive(Debug, Default)]
pub struct Words {
    buf: String,
    spans: Vec<(usize, usize)>,
}

impl Words {
    pub fn of(s: &str) -> Self {
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
            let t = raw.trim_matches(|c: char| matches!(c, '.' | '-' | '_' | '/'));
            if t.is_empty() {
                continue;
            }
            let start = w.buf.len();
            w.buf.push_str(&t.to_lowercase());
            w.spans.push((start, w.buf.len()));
        }
        w
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        self.spans.get(i).map(|&(a, b)| &self.buf[a..b])
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.spans.iter().map(|&(a, b)| &self.buf[a..b])
    }

    /// Whether `phrase` occurs as a contiguous word sequence.
    pub fn has_phrase(&self, phrase: &[&str]) -> bool {
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
    pub fn has_phrase_str(&self, phrase: &str) -> bool {
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

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a: stable across platforms and Rust versions (unlike `DefaultHasher`).
pub fn fnv64(bytes: &[u8]) -> u64 {
    fnv64_from(FNV_OFFSET, bytes)
}

/// FNV-1a continued from state `h`: `fnv64_from(fnv64(a), b) == fnv64(a ++ b)`.
fn fnv64_from(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[inline(always)]
fn mix(mut z: u64) -> u64 {
    // splitmix64 finaliser: cheap, well-distributed permutation for the MinHash family.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub const MINHASH_K: usize = 32;

/// A stored MinHash signature: b-bit MinHash with b = 8, the low byte of each slot's 32-bit
/// minimum. Signatures are most of an open run's state (a window of thoughts and one of
/// argument sets), and a byte per slot loses little: two different minima share their low byte
/// with probability 2⁻⁸, which [`similarity`] corrects for, so its estimate stays unbiased and
/// its spread grows only slightly against thresholds set in tenths. Fixed-size, so it lives
/// inline, not behind a pointer.
pub type Signature = [u8; MINHASH_K];

/// The probability that two different 32-bit minima share a stored slot.
const CHANCE: f64 = 1.0 / 256.0;

/// MinHash signature of a feature set. Empty sets get an all-`u8::MAX` signature, which
/// compares equal to another empty set (and to a non-empty one only with probability 2⁻²⁵⁶).
#[cfg(test)]
pub(crate) fn minhash<'a>(features: impl IntoIterator<Item = &'a str>) -> Signature {
    let hashes: Vec<u64> = features.into_iter().map(|f| fnv64(f.as_bytes())).collect();
    minhash_of(&hashes)
}

/// [`minhash`] of features given by their [`fnv64`].
pub fn minhash_of(hashes: &[u64]) -> Signature {
    let mut sig = [0; MINHASH_K];
    minhash_into(&mut sig, hashes);
    truncate(&sig)
}

/// The stored form of a full 32-bit signature (minimum first, then its low bits: b-bit
/// MinHash keeps the low bits of the minimum, not the minimum of the low bits).
pub fn truncate(full: &[u32; MINHASH_K]) -> Signature {
    full.map(|x| x as u8)
}

/// Reads a signature written with 32-bit slots (records of versions 1 and 2), 16-bit ones
/// (version 3) or bytes: the low byte of any of them is the stored slot. Any length is
/// accepted, as earlier versions did: surplus slots are dropped and missing ones read as an
/// empty set's, so a malformed record restores instead of failing.
pub fn signature_from(values: impl IntoIterator<Item = u64>) -> Signature {
    let mut sig = [u8::MAX; MINHASH_K];
    for (slot, v) in sig.iter_mut().zip(values) {
        *slot = v as u8;
    }
    sig
}

/// Serde `deserialize_with` for a [`Signature`] field of a record (written as its list of
/// slots): reads either slot width (see [`signature_from`]).
pub fn deserialize_signature<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Signature, D::Error> {
    use serde::Deserialize;
    Ok(signature_from(Vec::<u64>::deserialize(d)?))
}

/// [`minhash_of`] into `sig`, without allocating.
///
/// The hottest loop of the text detectors: 32 mixes per feature, for every thought and every
/// large argument set. Compiled a second time for AVX2 and picked at run time: there the 32
/// slots run four to a vector (the 64-bit multiplies emulated from 32-bit ones), about 3× faster
/// than baseline x86-64 on the 40-feature signature of a sentence. A third build for AVX-512
/// (with DQ's native 64-bit multiply, no emulation) runs eight slots to a vector where the CPU
/// has it. Integer arithmetic, so every version gives the same bits.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512dq+avx512vl+avx2", "x86_64+avx2"))]
pub fn minhash_into(sig: &mut [u32; MINHASH_K], hashes: &[u64]) {
    sig.fill(u32::MAX);
    for &base in hashes {
        for (k, slot) in sig.iter_mut().enumerate() {
            let h = (mix(base ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32) as u32;
            // `min`, not a compare-and-store: it compiles to a branch-free lane-wise minimum.
            *slot = (*slot).min(h);
        }
    }
}

/// Estimated Jaccard similarity of two MinHash signatures.
pub fn similarity(a: &Signature, b: &Signature) -> f64 {
    let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
    estimate(same as u32)
}

/// The Jaccard similarity estimated from `same` agreeing slots of [`MINHASH_K`]. A slot agrees
/// when the two minima are equal (probability J) or, failing that, by chance ([`CHANCE`]):
/// P = J + (1 − J)·c, so J = (P − c) / (1 − c). Clamped at 0 (fewer agreements than chance
/// alone gives); all slots agreeing estimates exactly 1.
pub fn estimate(same: u32) -> f64 {
    corrected(f64::from(same) / MINHASH_K as f64)
}

/// J from the share `p` of agreeing slots.
fn corrected(p: f64) -> f64 {
    ((p - CHANCE) / (1.0 - CHANCE)).max(0.0)
}

/// Whether a lowercased word is one of [`STOPWORDS`] (all ASCII: no other word is).
fn is_stopword(w: &str) -> bool {
    is_ascii_stopword(w.as_bytes())
}

const STOPWORDS: [&str; 43] = [
    "a", "an", "the", "of", "in", "on", "for", "to", "and", "or", "is", "are", "be", "with", "by",
    "at", "from", "this", "that", "it", "as", "please", "me", "my", "i", "you", "we", "can",
    "could", "would", "should", "what", "which", "about", "into", "current", "today", "now",
    "again", "also", "just", "some", "any",
];

/// A token of up to seven bytes, ASCII-lowercased, as one integer: its bytes, then its length
/// in the top byte, so two tokens pack alike only when equal (zero bytes included).
const fn pack_lower(t: &[u8]) -> Option<u64> {
    if t.len() > 7 {
        return None;
    }
    let mut k = (t.len() as u64) << 56;
    let mut i = 0;
    while i < t.len() {
        k |= (t[i].to_ascii_lowercase() as u64) << (8 * i);
        i += 1;
    }
    Some(k)
}

/// [`STOPWORDS`] packed, each in its own slot: every token of every thought and argument set
/// is looked up, and one load and one compare, without a loop, decide (probing an
/// open-addressed table mispredicted on the stopwords found at their first slot).
const STOP_SLOTS: usize = 256;
const STOP_TABLE: [u64; STOP_SLOTS] = {
    let mut t = [0u64; STOP_SLOTS];
    let mut i = 0;
    while i < STOPWORDS.len() {
        let k = match pack_lower(STOPWORDS[i].as_bytes()) {
            Some(k) => k,
            None => panic!("a stopword is longer than seven bytes"),
        };
        let at = stop_slot(k);
        if t[at] != 0 {
            panic!("two stopwords share a slot: pick another multiplier for stop_slot");
        }
        t[at] = k;
        i += 1;
    }
    t
};

/// A multiplicative hash under which the stopwords' slots are all distinct (found by trying
/// odd multipliers; the table's construction fails to compile if one is not).
const fn stop_slot(k: u64) -> usize {
    (k.wrapping_mul(0x6b4c_b242_4a23_d597) >> 56) as usize
}

/// Light stemming so `files`/`file`, `searching`/`search` meet; deterministic and dependency-free.
fn stem(w: &str) -> &str {
    for suf in ["ing", "ed", "es", "s"] {
        if w.len() > suf.len() + 3 && w.ends_with(suf) {
            return &w[..w.len() - suf.len()];
        }
    }
    w
}

/// Features for near-duplicate comparison of free text: content words (stopwords removed,
/// stemmed) plus their adjacent pairs, so both vocabulary and some word order count.
#[cfg(test)]
pub(crate) fn text_features(text: &str) -> Vec<String> {
    let w = Words::of(text);
    let mut f: Vec<String> = features(&w)
        .into_iter()
        .map(|(a, b)| {
            if b.is_empty() {
                a.to_string()
            } else {
                format!("{a} {b}")
            }
        })
        .collect();
    f.sort();
    f
}

/// [`text_features`] as (word, next word or "") pairs, sorted and distinct. Tokens hold no
/// whitespace and are never empty, so two pairs are equal exactly when their joined texts are.
#[cfg(test)]
fn features(w: &Words) -> Vec<(&str, &str)> {
    let toks: Vec<&str> = w.iter().filter(|t| !is_stopword(t)).map(stem).collect();
    let mut f: Vec<(&str, &str)> = toks.iter().map(|t| (*t, "")).collect();
    f.extend(toks.windows(2).map(|p| (p[0], p[1])));
    f.sort_unstable();
    f.dedup();
    f
}

/// Whether `text` has at least `enough` distinct [`text_features`], and their [`minhash`]
/// signature, without building the feature strings. `scratch` is a buffer lent by the caller
/// (its contents are not read).
pub fn feature_sig(text: &str, enough: usize, scratch: &mut Vec<u64>) -> (bool, Signature) {
    if text.is_ascii() {
        // Every thought comes here: the hashes go to a reused buffer, not to a fresh
        // allocation shrunk for keeping (only the signature is kept).
        let h = scratch;
        h.clear();
        // Unsorted, repeats kept: a repeated feature cannot change a minimum, and only
        // `enough` distinct ones need counting, so the sort `feature_hashes` needs for its
        // list is skipped.
        ascii_feature_hashes_raw(text, h);
        let got = (has_distinct(h, enough), minhash_of(h));
        if h.capacity() > 4096 {
            *h = Vec::new();
        }
        return got;
    }
    let h = feature_hashes(text);
    (h.len() >= enough, minhash_of(&h))
}

/// Whether `hashes` holds at least `enough` distinct values (a small number: a linear scan).
fn has_distinct(hashes: &[u64], enough: usize) -> bool {
    let mut seen: smallvec::SmallVec<[u64; 8]> = smallvec::SmallVec::new();
    for &h in hashes {
        if seen.len() >= enough {
            break;
        }
        if !seen.contains(&h) {
            seen.push(h);
        }
    }
    seen.len() >= enough
}

/// The [`fnv64`] of each distinct [`text_features`] of `text`, ordered by hash: what its
/// [`minhash`] is computed from (`minhash_of(&feature_hashes(t)) == feature_sig(t, 0).1`). Equal
/// lists give equal signatures.
pub fn feature_hashes(text: &str) -> Vec<u64> {
    if text.is_ascii() {
        let mut f = Vec::new();
        ascii_feature_hashes(text, &mut f);
        // Kept in run state: no spare capacity.
        f.shrink_to_fit();
        return f;
    }
    let w = Words::of(text);
    let toks: Vec<&str> = w.iter().filter(|t| !is_stopword(t)).map(stem).collect();
    let hash = |a: &str, b: &str| {
        let h = fnv64_from(FNV_OFFSET, a.as_bytes());
        if b.is_empty() {
            h
        } else {
            fnv64_from(fnv64_from(h, b" "), b.as_bytes())
        }
    };
    let mut f: Vec<u64> = Vec::with_capacity(toks.len() * 2);
    f.extend(toks.iter().map(|t| hash(t, "")));
    f.extend(toks.windows(2).map(|p| hash(p[0], p[1])));
    // Distinct by hash: the same as distinct by text but for a 64-bit collision, which would
    // only merge two features of one text.
    f.sort_unstable();
    f.dedup();
    // Kept in run state: no spare capacity.
    f.shrink_to_fit();
    f
}

/// `feature_hashes(&normalize_message(text))` into `out` (cleared first). For ASCII text the
/// tokens are read in place: whitespace collapsing is invisible to [`Words`], which splits on
/// whitespace and lowercases anyway, so only the volatile values need rewriting. This runs on
/// every counted tool call, and the three copies of the text it saves were most of its cost.
pub fn message_feature_hashes(text: &str, out: &mut Vec<u64>) {
    out.clear();
    if text.is_ascii() {
        // The replacements of volatile values are ASCII: the text stays ASCII.
        ascii_feature_hashes(&normalize_volatile_cow(text), out);
    } else {
        out.extend(feature_hashes(&normalize_message(text)));
    }
}

/// [`feature_hashes`] of ASCII text, appended to `out`: the tokens of [`Words::of`] read in place
/// and lowercased as they are hashed, without the token buffer.
fn ascii_feature_hashes(text: &str, out: &mut Vec<u64>) {
    let start_len = out.len();
    ascii_feature_hashes_raw(text, out);
    // Distinct by hash, as in `feature_hashes`.
    out[start_len..].sort_unstable();
    let mut w = start_len;
    for r in start_len..out.len() {
        if w == start_len || out[r] != out[w - 1] {
            out[w] = out[r];
            w += 1;
        }
    }
    out.truncate(w);
}

/// The hashes of [`ascii_feature_hashes`] as the tokens give them: in text order, repeats
/// included.
fn ascii_feature_hashes_raw(text: &str, out: &mut Vec<u64>) {
    let mut prev: Option<u64> = None;
    for_each_ascii_token(text.as_bytes(), |t, head| {
        if is_stopword_head(t.len(), head) {
            return;
        }
        let t = ascii_stem(t);
        let pair_from = prev.map(|p| fnv64_from(p, b" "));
        let (h, pair) = fnv64_lower2(FNV_OFFSET, pair_from.unwrap_or(FNV_OFFSET), t);
        out.push(h);
        if pair_from.is_some() {
            out.push(pair);
        }
        prev = Some(h);
    });
}

/// The tokens of [`ascii_tokens`], handed to `f` in order with their first eight bytes as
/// one little-endian integer (zeros past the text's end; bytes past the token's end are
/// whatever follows it). Token bounds come from bit masks of 64 bytes at a time, classified
/// without a branch per byte: the iterator's scan to each token's end mispredicted at every
/// word, and every thought and argument set is tokenised.
#[inline(always)]
fn for_each_ascii_token<'a>(b: &'a [u8], mut f: impl FnMut(&'a [u8], u64)) {
    // Trims the token `b[start..end]` as `AsciiTokens` does and hands on what is left.
    let mut emit = |mut start: usize, mut end: usize| {
        while start < end && is_trimmed(b[start]) {
            start += 1;
        }
        while start < end && is_trimmed(b[end - 1]) {
            end -= 1;
        }
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

/// [`fnv64_from`] of the ASCII-lowercased bytes, from two states at once: the word's own hash
/// and its pair's with the word before. Each byte costs a multiply whose result the next one
/// waits for; in one loop the two chains overlap, where one after the other they took twice as
/// long.
#[inline(always)]
fn fnv64_lower2(mut a: u64, mut b: u64, bytes: &[u8]) -> (u64, u64) {
    for c in bytes {
        let c = u64::from(c.to_ascii_lowercase());
        a = (a ^ c).wrapping_mul(0x0100_0000_01b3);
        b = (b ^ c).wrapping_mul(0x0100_0000_01b3);
    }
    (a, b)
}

/// [`is_stopword`] of an ASCII token once lowercased, without copying it.
fn is_ascii_stopword(t: &[u8]) -> bool {
    // A packed token is never 0 (its length is in the top byte), the empty slot's value.
    let Some(k) = pack_lower(t).filter(|&k| k != 0) else {
        return false;
    };
    STOP_TABLE[stop_slot(k)] == k
}

/// [`is_ascii_stopword`] of the token of `len` bytes whose first eight bytes are `head`, as
/// [`for_each_ascii_token`] gives them from ASCII text (the lowercasing below needs every
/// byte under 0x80): packed with one lowercasing of the word at once instead of a loop over
/// its bytes.
#[inline(always)]
fn is_stopword_head(len: usize, head: u64) -> bool {
    if len == 0 || len > 7 {
        return false;
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    let x = head & ((1u64 << (8 * len)) - 1);
    // Per byte (all below 0x80, so no sum carries into the next): the high bit of c + 0x3f
    // is set from 'A' up, that of c + 0x25 past 'Z'. Upper-case letters get bit 5.
    let from_a = x + 0x3f * ONES;
    let past_z = x + 0x25 * ONES;
    let upper = from_a & !past_z & (0x80 * ONES);
    let k = (x | upper >> 2) | (len as u64) << 56;
    STOP_TABLE[stop_slot(k)] == k
}

/// [`stem`] of an ASCII token as it is once lowercased, from its last four bytes read at
/// once: setting bit 5 lowercases an ASCII letter and maps no other byte to one, so it
/// compares case-insensitively with the (lower-case) suffixes.
#[inline(always)]
fn ascii_stem(w: &[u8]) -> &[u8] {
    let n = w.len();
    if n < 5 {
        return w;
    }
    let tail = u32::from_le_bytes([w[n - 4], w[n - 3], w[n - 2], w[n - 1]]) | 0x2020_2020;
    let cut = if n > 6 && tail >> 8 == u32::from_le_bytes([b'i', b'n', b'g', 0]) {
        3
    } else if n > 5
        && (tail >> 16 == u32::from_le_bytes([b'e', b'd', 0, 0])
            || tail >> 16 == u32::from_le_bytes([b'e', b's', 0, 0]))
    {
        2
    } else if tail >> 24 == u32::from(b's') {
        1
    } else {
        0
    };
    &w[..n - cut]
}

/// [`key64`] of short names (agents'; the step view memoises tool names with their classes),
/// memoised: a fleet has few names and they recur on every step, so a lookup replaces a
/// SHA-256.
pub struct NameKeys(Memo<(&'static str, Box<str>, u64)>);

impl Default for NameKeys {
    fn default() -> Self {
        Self(Memo::new(4096))
    }
}

impl NameKeys {
    /// `key64(domain, &[name])`, whatever the memo holds.
    pub fn get(&mut self, domain: &'static str, name: &str) -> u64 {
        use std::hash::BuildHasher;
        let hash = |d: &str, n: &str| rustc_hash::FxBuildHasher.hash_one((d, n));
        // The domains are a few literals: usually the same pointer, compared before the bytes.
        let same_domain = |d: &str| std::ptr::eq(d, domain) || d == domain;
        self.0
            .get_or_insert_with(
                hash(domain, name),
                |e| same_domain(e.0) && *e.1 == *name,
                || (domain, name.into(), key64(domain, &[name.as_bytes()])),
                |e| hash(e.0, &e.1),
            )
            .2
    }
}

/// First 8 bytes of SHA-256 with a domain tag, as a compact state key.
pub fn key64(domain: &str, parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let d = h.finalize();
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// Collapse whitespace, lowercase and normalise volatile values: the comparison form of a
/// message or error text.
/// Whether `hay` contains `needle` (ASCII lowercase), ignoring ASCII case, without a
/// lowercased copy: step types and error texts are read on every step.
pub fn contains_ci(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

pub fn normalize_message(s: &str) -> String {
    let v = normalize_volatile_cow(s);
    if v.is_ascii() {
        if !needs_collapse(v.as_bytes()) {
            // Most messages: single spaces between words, nothing to collapse. A copy
            // lowercased in place is the result, without a branch per byte.
            let mut out = v.into_owned();
            out.make_ascii_lowercase();
            return out;
        }
        // The same result in one pass over the bytes: for ASCII text `split_whitespace` breaks
        // at tab, LF, VT, FF, CR and space, and lowercasing is per byte.
        let mut bytes = Vec::with_capacity(v.len());
        let mut gap = false;
        for &b in v.as_bytes() {
            if matches!(b, 0x09..=0x0d | b' ') {
                gap = !bytes.is_empty();
            } else {
                if std::mem::take(&mut gap) {
                    bytes.push(b' ');
                }
                bytes.push(b.to_ascii_lowercase());
            }
        }
        // ASCII bytes only: always valid.
        return String::from_utf8(bytes).unwrap_or_default();
    }
    let mut out = String::with_capacity(v.len());
    for w in v.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        if w.is_ascii() {
            out.extend(w.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.push_str(&w.to_lowercase());
        }
    }
    out
}

/// Whether collapsing the whitespace of ASCII text changes it: a tab, LF, VT, FF or CR
/// anywhere, a space at either end or two spaces in a row.
fn needs_collapse(b: &[u8]) -> bool {
    let ctl = |c: u8| c.wrapping_sub(0x09) < 5;
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    if first == b' ' || last == b' ' || ctl(last) {
        return true;
    }
    let pair = |w: &[u8]| ctl(w[0]) | ((w[0] == b' ') & (w[1] == b' '));
    // 32 pairs at a time (33 bytes), without an exit per pair: vector compares.
    let mut at = 0;
    while let Some(block) = b.get(at..at + 33) {
        if block.windows(2).fold(false, |any, w| any | pair(w)) {
            return true;
        }
        at += 32;
    }
    b[at..].windows(2).any(pair)
}

/// The identity form of an error message: [`normalize_message`] plus the values that differ
/// between two occurrences of the *same* failure although they are not volatile in ordinary
/// data: the frames of a Python traceback (the same exception reached through `python -m` or a
/// direct call is one error), integer durations (`retry in 17s`, `345ms`), temporary paths
/// (`/tmp/tmpa8f3kx2_/out.csv`, `/tmp/pytest-of-u/pytest-12/`), process ids (`pid 4242`) and
/// generated ids that mix letters and digits (`req_7Hq2x9Lm0aZk`). Used for error keys only:
/// in tool inputs and data such tokens can name different things.
pub fn normalize_error(s: &str) -> String {
    let s = strip_traceback_frames(s);
    let norm = normalize_message(&s);
    let mut out = String::with_capacity(norm.len());
    let mut prev_pid = false;
    for (i, tok) in norm.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if prev_pid && tok.chars().all(|c| c.is_ascii_digit()) && !tok.is_empty() {
            out.push_str("<pid>");
        } else {
            normalize_error_token(tok, &mut out);
        }
        let bare = tok.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        prev_pid = matches!(bare, "pid" | "process" | "worker");
    }
    out
}

/// Python tracebacks: keep the header and the exception lines, drop the indented frames.
fn strip_traceback_frames(s: &str) -> std::borrow::Cow<'_, str> {
    // Built once: a searcher for this needle per error text was a visible share of the time.
    static TRACEBACK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| {
            memchr::memmem::Finder::new("Traceback (most recent call last)")
        });
    if TRACEBACK.find(s.as_bytes()).is_none() {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut in_tb = false;
    for line in s.lines() {
        if line
            .trim_start()
            .starts_with("Traceback (most recent call last)")
        {
            in_tb = true;
            out.push_str(line.trim());
            out.push('\n');
            continue;
        }
        if in_tb && (line.starts_with(' ') || line.starts_with('\t')) {
            continue;
        }
        in_tb = false;
        out.push_str(line);
        out.push('\n');
    }
    std::borrow::Cow::Owned(out)
}

const TEMP_ROOTS: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/folders/",
    "/private/tmp/",
    "/dev/shm/",
];

/// Appends the identity form of one token to `out`.
fn normalize_error_token(tok: &str, out: &mut String) {
    // Temporary paths, possibly quoted or embedded (`'/tmp/tmpx/out.csv'`, `rootdir=/tmp/...`).
    // Every root holds a `/`: most tokens have none and need no search.
    let roots = if memchr::memchr(b'/', tok.as_bytes()).is_some() {
        TEMP_ROOTS
    } else {
        &[]
    };
    for root in roots {
        if let Some(at) = tok.find(root) {
            let (head, path) = tok.split_at(at);
            let path = path.trim_end_matches(['\'', '"', ',', ')', ']', ':']);
            let tail = &tok[at + path.len()..];
            let base = path.rsplit('/').find(|x| !x.is_empty()).unwrap_or("");
            let keep = if base.contains('.') && !base.starts_with("tmp") {
                base
            } else {
                ""
            };
            out.push_str(head);
            out.push_str("<tmp>/");
            out.push_str(keep);
            out.push_str(tail);
            return;
        }
    }
    // Integer durations: `17s`, `345ms`, `30sec`.
    let dig = tok.bytes().take_while(u8::is_ascii_digit).count();
    if dig > 0 && dig < tok.len() {
        let unit = tok[dig..].trim_end_matches(['.', ',', ')', ';']);
        if matches!(
            unit,
            "ms" | "s" | "sec" | "secs" | "seconds" | "second" | "min" | "mins" | "minutes"
        ) {
            out.push_str("<dur>");
            return;
        }
    }
    // Generated ids: alphanumeric runs of 8+ mixing letters and digits several times.
    let mut start = 0;
    let mut cur: Option<bool> = None;
    let mut part = |is_word: bool, p: &str| {
        out.push_str(if is_word && looks_generated(p) {
            "<id>"
        } else {
            p
        });
    };
    for (i, c) in tok.char_indices() {
        let w = c.is_ascii_alphanumeric();
        if let Some(x) = cur.filter(|x| *x != w) {
            part(x, &tok[start..i]);
            start = i;
        }
        cur = Some(w);
    }
    if let Some(w) = cur {
        part(w, &tok[start..]);
    }
}

fn looks_generated(run: &str) -> bool {
    if run.len() < 8 {
        return false;
    }
    let b = run.as_bytes();
    let d = b.iter().filter(|c| c.is_ascii_digit()).count();
    let l = b.len() - d;
    let flips = b
        .windows(2)
        .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
        .count();
    d >= 2 && l >= 2 && flips >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_key_is_key64_whatever_the_memo_holds() {
        let mut keys = NameKeys::default();
        for round in 0..2 {
            for i in 0..5000 {
                let n = format!("tool_{i}");
                assert_eq!(
                    keys.get("tool", &n),
                    key64("tool", &[n.as_bytes()]),
                    "{round}"
                );
                assert_eq!(keys.get("agent", &n), key64("agent", &[n.as_bytes()]));
            }
        }
        assert_ne!(keys.get("tool", "a"), keys.get("agent", "a"));
    }

    #[test]
    fn volatile_values_are_normalised() {
        assert_eq!(
            normalize_volatile(
                "req 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab at 2024-05-01T10:00:00.123Z"
            ),
            "req <uuid> at <ts>"
        );
        assert_eq!(
            normalize_volatile("trace=4bf92f3577b34da6a3ce929d0e0e4736"),
            "trace=<hex>"
        );
        assert_eq!(
            normalize_volatile("Ran 3 tests in 0.532s"),
            "Ran 3 tests in <dur>"
        );
        assert_eq!(normalize_volatile("[12:01:02] ready"), "[<time>] ready");
        assert_eq!(
            normalize_volatile("epoch 1767225600000 ok"),
            "epoch <epoch> ok"
        );
        // Ordinary words, short numbers and dates stay.
        assert_eq!(
            normalize_volatile("page 2 of 2024-05-01, deadbeef"),
            "page 2 of 2024-05-01, deadbeef"
        );
        assert_eq!(normalize_volatile("café"), "café");
    }

    #[test]
    fn error_identity_ignores_frames_durations_temp_paths_and_ids() {
        let tb = |frames: &str| {
            format!("Traceback (most recent call last):\n{frames}ModuleNotFoundError: No module named 'x'\n")
        };
        assert_eq!(
            normalize_error(&tb("  File \"a.py\", line 3, in f\n    g()\n")),
            normalize_error(&tb("  File \"<frozen runpy>\", line 198, in _run\n"))
        );
        assert_eq!(
            normalize_error("429: try again in 17s (req_7f3a9c2e1b4d5a)"),
            normalize_error("429: try again in 3s (req_0a1b2c3d4e5f6a)")
        );
        assert_eq!(
            normalize_error(
                "No such file: '/tmp/tmpab3k_x9q/export.csv', pid 4242 exited after 345ms"
            ),
            normalize_error("No such file: '/tmp/tmpzz81kq0w/export.csv', pid 17 exited after 9ms")
        );
        // Different errors stay different; ordinary words and versions are kept.
        assert_ne!(
            normalize_error("permission denied for table orders"),
            normalize_error("permission denied for table payments")
        );
        assert_eq!(
            normalize_error("psycopg2 sha256 x86_64"),
            "psycopg2 sha256 x86_64"
        );
    }

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

    #[test]
    fn minhash_is_stable_and_estimates_overlap() {
        let a = minhash(["x", "y", "z"].iter().copied());
        let b = minhash(["z", "y", "x"].iter().copied());
        assert_eq!(a, b);
        let c = minhash(["p", "q", "r"].iter().copied());
        assert!(similarity(&a, &c) < 0.3);
        assert_eq!(fnv64(b"abc"), 0xe71f_a219_0541_574b);
    }

    #[test]
    fn ascii_fast_paths_agree_with_the_general_ones() {
        for c in 0u8..128 {
            assert_eq!(
                ASCII_BREAK[usize::from(c)],
                is_word_break(char::from(c)),
                "{c}"
            );
        }
        for c in 0..=u8::MAX {
            assert_eq!(is_break(c), ASCII_BREAK[usize::from(c)], "{c}");
        }
        let ascii = "Error: Old TEXT\x0bnot found\tin x.py (see /tmp/a_b-); __init__.py -- a.b. c/";
        let reference: Vec<String> = ascii
            .split(is_word_break)
            .map(|t| t.trim_matches(|c: char| matches!(c, '.' | '-' | '_' | '/')))
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
        s.split(|c: char| c.is_ascii() && ASCII_BREAK[c as usize])
            .map(|t| t.trim_matches(|c: char| matches!(c, '.' | '-' | '_' | '/')))
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

    #[test]
    fn in_place_tokens_and_features_match_the_copies() {
        let texts = [
            "",
            "  ...  ",
            "The Files searching SEARCHED /tmp/a_b- x.py -- a.b. c/ __init__.py",
            "Find release notes for Tokio at 2024-05-01 10:00:00Z, req 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab",
            "Please CHECK the status: it's RUNNING (took 0.53s) id=4bf92f3577b34da6a3ce929d0e0e4736",
            "a\tb\nc\x0bd\x0ce\rf  g\x1ch",
            "caf\u{e9} \u{3a3}\u{3a3}: x-y AUTH.py auth.py",
            "epoch 1767225600000 and 12:01:02 then 0.532 seconds",
        ];
        for t in texts {
            let reference: Vec<u64> = {
                let mut h: Vec<u64> = text_features(&normalize_message(t))
                    .iter()
                    .map(|f| fnv64(f.as_bytes()))
                    .collect();
                h.sort_unstable();
                h.dedup();
                h
            };
            let mut got = vec![7];
            message_feature_hashes(t, &mut got);
            assert_eq!(got, reference, "{t}");
            assert_eq!(feature_hashes(&normalize_message(t)), reference, "{t}");
            if t.is_ascii() {
                let lower: Vec<String> = ascii_tokens(t).map(str::to_ascii_lowercase).collect();
                assert_eq!(lower, words(t), "{t}");
            }
        }
    }

    #[test]
    fn feature_signatures_match_the_feature_strings() {
        for t in [
            "",
            "the a of",
            "search searching files file the files",
            "Find the latest release notes for tokio and the latest for tokio",
            "caf\u{e9} \u{3a3}\u{3a3} x-y auth.py auth.py",
        ] {
            let n = normalize_message(t);
            let f = text_features(&n);
            for enough in [0, 1, f.len(), f.len() + 1, 5] {
                assert_eq!(
                    feature_sig(&n, enough, &mut Vec::new()),
                    (f.len() >= enough, minhash(f.iter().map(String::as_str))),
                    "{t} {enough}"
                );
            }
        }
    }

    #[test]
    fn estimate_corrects_for_chance_agreements() {
        // At the expected number of agreeing slots for a true similarity J, the estimate is J.
        for j in [0.0, 0.1, 0.3, 0.5, 0.6, 0.7, 0.9, 1.0] {
            let k = MINHASH_K as f64;
            let expected_same = j * k + (1.0 - j) * k / 256.0;
            let got = corrected(expected_same / k);
            assert!((got - j).abs() < 1e-12, "{j}: {got}");
        }
        assert_eq!(estimate(MINHASH_K as u32), 1.0);
        assert_eq!(estimate(0), 0.0);
        // Never above the raw share of agreeing slots, and rising with it.
        for same in 1..=MINHASH_K as u32 {
            assert!(estimate(same) <= f64::from(same) / MINHASH_K as f64);
            assert!(estimate(same) > estimate(same - 1));
        }
    }

    #[test]
    fn signatures_read_from_either_slot_width() {
        let mut full = [0u32; MINHASH_K];
        minhash_into(&mut full, &[1, 2, 3, 0xdead_beef]);
        let old = serde_json::to_string(&full.to_vec()).unwrap();
        assert!(
            full.iter().any(|&x| x > u32::from(u16::MAX)),
            "a 32-bit record"
        );
        let mut de = serde_json::Deserializer::from_str(&old);
        let read = deserialize_signature(&mut de).unwrap();
        assert_eq!(read, minhash_of(&[1, 2, 3, 0xdead_beef]));
        // Version 3 records: 16-bit slots.
        let v3 = serde_json::to_string(&full.map(|x| x as u16).to_vec()).unwrap();
        let mut de = serde_json::Deserializer::from_str(&v3);
        assert_eq!(deserialize_signature(&mut de).unwrap(), read);
        let buf = serde_json::to_vec(read.as_slice()).unwrap();
        let mut de = serde_json::Deserializer::from_slice(&buf);
        assert_eq!(deserialize_signature(&mut de).unwrap(), read);
        // A malformed record's signature restores (as an empty set's past its end).
        assert_eq!(signature_from([]), minhash_of(&[]));
        assert_eq!(signature_from([5; 40])[MINHASH_K - 1], 5);
    }

    #[test]
    fn stopwords_are_found_by_their_packed_form() {
        for w in STOPWORDS {
            assert!(is_stopword(w), "{w}");
            assert!(is_ascii_stopword(w.to_ascii_uppercase().as_bytes()), "{w}");
            // Near misses: one byte more, one less, a suffix, the same bytes zero-padded.
            let more = format!("{w}x");
            assert_eq!(
                is_stopword(&more),
                STOPWORDS.contains(&more.as_str()),
                "{more}"
            );
            assert_eq!(is_stopword(&w[1..]), STOPWORDS.contains(&&w[1..]), "{w}");
            assert!(!is_stopword(&format!("{w}\u{e9}")), "{w}");
            assert!(!is_stopword(&format!("{w:\0<9}")), "{w}");
        }
        for w in ["", "x", "them", "thes", "currents", "\u{e9}", "the\0"] {
            assert!(!is_stopword(w), "{w:?}");
        }
    }

    /// `ascii_stem` as first written, a suffix compare at a time.
    fn reference_ascii_stem(w: &[u8]) -> &[u8] {
        for suf in [&b"ing"[..], b"ed", b"es", b"s"] {
            if w.len() > suf.len() + 3 && w[w.len() - suf.len()..].eq_ignore_ascii_case(suf) {
                return &w[..w.len() - suf.len()];
            }
        }
        w
    }

    /// The scan as first written, one byte at a time: what the block scan must equal.
    fn byte_by_byte(s: &str) -> String {
        let b = s.as_bytes();
        let (mut out, mut i, mut last) = (String::new(), 0, 0);
        while i < b.len() {
            let at_boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
            if at_boundary && b[i].is_ascii_hexdigit() {
                if let Some((len, repl)) = match_volatile(&b[i..]) {
                    out.push_str(&s[last..i]);
                    out.push_str(repl);
                    i += len;
                    last = i;
                    continue;
                }
            }
            i += 1;
        }
        out.push_str(&s[last..]);
        out
    }

    proptest::proptest! {
        /// The copy-free test agrees with lowercasing the text and searching it.
        #[test]
        fn contains_ci_agrees_with_lowercasing(
            hay in "[a-zA-Z _\u{e9}]{0,24}",
            needle in "[a-z _]{0,4}",
        ) {
            proptest::prop_assert_eq!(
                contains_ci(&hay, &needle),
                hay.to_ascii_lowercase().contains(&needle)
            );
        }
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

        /// The bit gathered for each byte is the byte's own, in its place.
        #[test]
        fn byte_masks_hold_each_bytes_test(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 64)) {
            let mut block = [0u8; 64];
            block.copy_from_slice(&bytes);
            let mut want = 0u64;
            for (j, &c) in bytes.iter().enumerate() {
                want |= u64::from(c.is_ascii_hexdigit()) << j;
            }
            proptest::prop_assert_eq!(byte_mask(&block, |c| c.is_ascii_hexdigit()), want);
        }

        /// The stopword test and the stem on packed bytes agree with the byte loops, for
        /// stopwords, near misses and suffixed words in any case, and what follows a token.
        #[test]
        fn packed_stopwords_and_stems_agree_with_the_byte_loops(
            w in "(?i)(a|an|the|is|would|should|about|current|please|th|abouts|x|[a-z@\\[`{]{1,9})(ing|ed|es|s|)",
            follow in "[ a-z]{0,8}",
        ) {
            let s = format!("{w}{follow}");
            let mut head = [0u8; 8];
            let n = s.len().min(8);
            head[..n].copy_from_slice(&s.as_bytes()[..n]);
            let t = w.as_bytes();
            proptest::prop_assert_eq!(is_stopword_head(t.len(), u64::from_le_bytes(head)), is_ascii_stopword(t));
            proptest::prop_assert_eq!(ascii_stem(t), reference_ascii_stem(t));
        }

        /// Whichever version of the MinHash loop the CPU gets (AVX-512 or AVX2), it computes the
        /// definition: per slot k, the least high half of mix(feature ^ k·φ).
        #[test]
        fn minhash_matches_its_definition(hashes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..80)) {
            let mut want = [u32::MAX; MINHASH_K];
            for &h in &hashes {
                for (k, w) in want.iter_mut().enumerate() {
                    let v = (mix(h ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32) as u32;
                    if v < *w {
                        *w = v;
                    }
                }
            }
            let mut got = [7; MINHASH_K];
            minhash_into(&mut got, &hashes);
            proptest::prop_assert_eq!(got, want);
        }

        /// The block scan finds the matches a byte-by-byte scan finds: at every word start,
        /// never inside a word or a replaced value, across block boundaries. Texts are drawn
        /// from pieces of the volatile forms so that matches and near misses are common.
        #[test]
        fn volatile_scan_matches_the_byte_by_byte_one(
            parts in proptest::collection::vec(proptest::prop_oneof![
                proptest::string::string_regex("[0-9a-fA-F]{1,20}").unwrap(),
                proptest::string::string_regex("[-:. Tzx_/]{1,3}").unwrap(),
                proptest::string::string_regex("[g-z]{1,9}").unwrap(),
                proptest::prelude::Just("2024-05-01T10:00:00Z".to_string()),
                proptest::prelude::Just("1700000000".to_string()),
                proptest::prelude::Just("0.53s".to_string()),
                proptest::prelude::Just("fa2b1c9e-1a2b-4c3d-8e9f-0123456789ab".to_string()),
                proptest::prelude::Just("deadbeef-".to_string()),
                proptest::prelude::Just("12:30:59".to_string()),
                proptest::prelude::Just("\u{e9}".to_string()),
            ], 0..60)
        ) {
            let s: String = parts.concat();
            proptest::prop_assert_eq!(normalize_volatile_cow(&s).into_owned(), byte_by_byte(&s));
        }

        /// ASCII messages take a byte loop; it must collapse and lowercase exactly as the
        /// general path does (control characters other than whitespace included).
        #[test]
        fn ascii_messages_normalise_as_any_text(s in "[ -~\t\n\x0b\x0c\r\x1c\x00]{0,80}") {
            let v = normalize_volatile_cow(&s);
            let want: Vec<String> = v.split_whitespace().map(str::to_lowercase).collect();
            proptest::prop_assert_eq!(normalize_message(&s), want.join(" "));
        }

        /// Messages spaced as most are, where the result is the text lowercased, and near
        /// misses of that (a double space, a tab, a space at an end), anywhere in 32-byte
        /// blocks or their tail.
        #[test]
        fn single_spaced_messages_normalise_as_any_text(
            words in proptest::collection::vec("[A-Za-z0-9.:-]{1,12}", 0..20),
            seps in proptest::collection::vec(
                proptest::sample::select(vec![" ", " ", " ", " ", "  ", "\t", " \n"]),
                20,
            ),
            ends in 0usize..4,
        ) {
            let mut s = String::new();
            for (i, w) in words.iter().enumerate() {
                if i > 0 {
                    s.push_str(seps[i]);
                }
                s.push_str(w);
            }
            match ends {
                0 => s.insert(0, ' '),
                1 => s.push(' '),
                _ => {}
            }
            let v = normalize_volatile_cow(&s);
            let want: Vec<String> = v.split_whitespace().map(str::to_lowercase).collect();
            proptest::prop_assert_eq!(normalize_message(&s), want.join(" "));
        }

        /// Equal minima keep equal low bytes, so stored slots agree wherever the full ones
        /// do, and beyond that only by chance (2⁻⁸ per differing slot: five or more chance
        /// agreements among 32 slots happen about once in five million pairs).
        #[test]
        fn truncated_signatures_agree_as_the_full_ones(
            shared in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
            a_own in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
            b_own in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
        ) {
            let (mut a, mut b) = ([0; MINHASH_K], [0; MINHASH_K]);
            minhash_into(&mut a, &[shared.as_slice(), &a_own].concat());
            minhash_into(&mut b, &[shared.as_slice(), &b_own].concat());
            let full = a.iter().zip(&b).filter(|(x, y)| x == y).count();
            let (ta, tb) = (truncate(&a), truncate(&b));
            let short = ta.iter().zip(&tb).filter(|(x, y)| x == y).count();
            proptest::prop_assert!(short >= full);
            proptest::prop_assert!(short - full <= 4, "{short} vs {full}");
            proptest::prop_assert_eq!(similarity(&ta, &tb), estimate(short as u32));
        }
    }
}
