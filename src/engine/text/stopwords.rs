//! The word list and stemming of the near-duplicate features: which words carry no content,
//! and the light suffix stripping that lets `files` meet `file`.

/// Whether a lowercased word is one of [`STOPWORDS`] (all ASCII: no other word is).
pub(super) fn is_stopword(w: &str) -> bool {
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
pub(super) fn stem(w: &str) -> &str {
    for suf in ["ing", "ed", "es", "s"] {
        if w.len() > suf.len() + 3 && w.ends_with(suf) {
            return &w[..w.len() - suf.len()];
        }
    }
    w
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
pub(super) fn is_stopword_head(len: usize, head: u64) -> bool {
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
pub(super) fn ascii_stem(w: &[u8]) -> &[u8] {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
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
    }
}
