//! How data outputs are compared: whether an answer is rich (enough distinct words to say the
//! questions were the same), whether it holds records, and its key with lists taken in any
//! order and generated ids and scores left out (the same documents, reshuffled, are one answer).
use crate::engine::json::Json;
use crate::engine::text::Words;

/// Outputs longer than this are compared by their exact key only: hashing them again on every
/// call would cost more than the rare reshuffled long answer is worth.
pub(super) const BAG_MAX_OUTPUT: usize = 16 * 1024;

/// Whether data has at least `rich_words` distinct words.
pub(super) fn is_rich_text(output_text: &str, rich_words: usize) -> bool {
    let w = Words::of(output_text);
    let mut all: Vec<&str> = w.iter().collect();
    all.sort_unstable();
    all.dedup();
    all.len() >= rich_words
}

/// Whether the value is, or holds at its top level, a list of two or more objects.
pub(super) fn holds_records(v: &Json<'_>) -> bool {
    let records = |a: &[Json<'_>]| a.iter().filter(|e| matches!(e, Json::Object(_))).count() >= 2;
    match v {
        Json::Array(a) => records(a),
        Json::Object(o) => o
            .values()
            .any(|x| matches!(x, Json::Array(a) if records(a))),
        _ => false,
    }
}

fn fold(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x0100_0000_01b3)
}

/// The key of a value with every list's elements in sorted order and generated identifiers
/// and scores (see [`token_key`], [`is_score`]) left out: a search that answers again with the
/// same documents in a new order, each with a fresh result id and relevance score, gives the
/// same key. Only lists are reordered: a text keeps its word order (the same words rearranged
/// are another text).
pub(super) fn unordered_key(v: &Json<'_>) -> u64 {
    match v {
        Json::Null => 1,
        Json::Bool(b) => 2 + u64::from(*b),
        Json::Number(n) => match n.as_f64() {
            Some(x) if is_score(x) => 4,
            Some(x) => fold(8, x.to_bits()),
            None => fold(9, bytes_key(n.to_string().as_bytes())),
        },
        // Without a digit nothing in it is generated: the text as it is (most texts).
        Json::String(t) if !t.bytes().any(|c| c.is_ascii_digit()) => {
            fold(5, bytes_key(t.as_bytes()))
        }
        Json::String(t) => t
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '(' | ')'))
            .filter(|t| !t.is_empty())
            .fold(10, |h, t| fold(h, token_key(t))),
        Json::Array(a) => {
            let mut keys: smallvec::SmallVec<[u64; 16]> = a.iter().map(unordered_key).collect();
            keys.sort_unstable();
            keys.into_iter().fold(6, fold)
        }
        // Entries are held in key order already.
        Json::Object(o) => o.iter().fold(7, |h, (k, v)| {
            fold(fold(h, bytes_key(k.as_bytes())), unordered_key(v))
        }),
    }
}

/// A number strictly between 0 and 1 with a fraction: a relevance score or a probability,
/// which a reworded query changes while the documents stay the same.
fn is_score(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// A token's hash with its generated identifiers left out: a segment (between `.`, `/`, `_`,
/// `-`, `:`) of five characters or more that mixes letters with at least two digits, as in
/// `res_01f3a7` or `u_8c2d1e`. Names such as `manifest_0` or `v2` keep their digits.
fn token_key(t: &str) -> u64 {
    let mut h = 11;
    for seg in t.split(['.', '/', '_', '-', ':']) {
        let digits = seg.bytes().filter(u8::is_ascii_digit).count();
        let letters = seg.bytes().filter(u8::is_ascii_alphabetic).count();
        let generated = seg.len() >= 5 && digits >= 2 && letters >= 1;
        let part: &[u8] = if generated { b"#" } else { seg.as_bytes() };
        h = fold(h, bytes_key(part));
    }
    h
}

/// A hash of `b`, eight bytes at a step (splitmix64's finaliser after each): a key compared for
/// equality within one run's window, written to its records, so it must not change between
/// builds (no `std` hasher).
fn bytes_key(b: &[u8]) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut h = mix(b.len() as u64 ^ 0x9e37_79b9_7f4a_7c15);
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = mix(h ^ u64::from_le_bytes(c.try_into().expect("eight bytes")));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = mix(h ^ u64::from_le_bytes(last));
    }
    h
}
