//! Volatile values: the parts of a text that differ on every call although they mean nothing
//! for the operation (ids, timestamps, measured durations), replaced by a placeholder so that
//! two calls differing only there compare equal.
use super::blocks::{byte_mask, each_block64};

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
pub(crate) fn normalize_volatile_cow(s: &str) -> std::borrow::Cow<'_, str> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
