//! The canonical text (docs/fingerprints.md): sorted keys, no whitespace, serde_json's string
//! escapes and number forms. Hand-written because it runs over every byte of every payload;
//! the tests hold it to serde_json's output.
use super::normalize::normalize_number;
use crate::engine::json::Json;

/// eddy's canonical serialisation (docs/fingerprints.md): object keys sorted by UTF-8 bytes at
/// every depth (a [`Json`] object holds them so), no whitespace, strings escaped the way
/// serde_json does.
pub(crate) fn write_canonical(v: &Json<'_>, out: &mut String) {
    match v {
        Json::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(x, out);
            }
            out.push('}');
        }
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Json::String(s) => write_string(s, out),
        Json::Number(n) => {
            // Integers (nearly every number) without the formatting machinery: digits as
            // serde_json's `Display` writes them.
            if let Some(u) = n.as_u64() {
                write_u64(u, out);
            } else if let Some(i) = n.as_i64() {
                if i < 0 {
                    out.push('-');
                }
                write_u64(i.unsigned_abs(), out);
            } else {
                use std::fmt::Write;
                // Writing to a String cannot fail.
                let _ = write!(out, "{}", normalize_number(n));
            }
        }
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Null => out.push_str("null"),
    }
}

fn write_u64(mut u: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or(""));
}

/// A JSON string exactly as serde_json writes it: `"` and `\` escaped, control characters as
/// `\b \t \n \f \r` or `\u00xx` (lowercase hex), everything else (non-ASCII included) as is.
fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let b = s.as_bytes();
    let mut start = 0;
    loop {
        let i = start + to_escape(&b[start..]);
        let Some(&c) = b.get(i) else {
            break;
        };
        let esc: &str = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            _ => "",
        };
        // Escaped bytes are ASCII, so `i` is a character boundary.
        out.push_str(&s[start..i]);
        start = i + 1;
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 0xf)]));
        } else {
            out.push_str(esc);
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Where the first byte [`write_string`] escapes (`"`, `\\` or a control character) is in `b`,
/// or `b.len()`. Eight bytes per step: nearly every string has nothing to escape, and this runs
/// over every byte of every payload's canonical text.
fn to_escape(b: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // Whether any byte of `x` is zero; exact as a whole (no false positives), which is all
    // that is asked here: the bytes of a flagged word are then read one by one.
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH != 0;
    let special = |c: u8| c < 0x20 || c == b'"' || c == b'\\';
    let mut chunks = b.chunks_exact(8);
    let mut at = 0;
    for c in chunks.by_ref() {
        let mut w = [0; 8];
        w.copy_from_slice(c);
        let x = u64::from_ne_bytes(w);
        // Whether any byte is below 0x20: exact as a whole, like `has_zero` (bytes from 0x80
        // up, which UTF-8 text has, are cleared by the `!x`).
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
        if control
            || has_zero(x ^ (ONES * u64::from(b'"')))
            || has_zero(x ^ (ONES * u64::from(b'\\')))
        {
            if let Some(p) = c.iter().position(|&c| special(c)) {
                return at + p;
            }
        }
        at += 8;
    }
    at + chunks
        .remainder()
        .iter()
        .position(|&c| special(c))
        .unwrap_or(chunks.remainder().len())
}

pub(crate) fn canonical_string(v: &Json<'_>) -> String {
    let mut s = String::new();
    write_canonical(v, &mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_like_serde_json() {
        let mut cases: Vec<String> = (0u32..0x80)
            .filter_map(char::from_u32)
            .map(|c| format!("a{c}b"))
            .collect();
        cases.extend(
            ["", "caf\u{e9} \u{1f600} \u{2028}", "\"\\\u{7f}\u{0}\u{1f}"].map(String::from),
        );
        for c in cases {
            let mut out = String::new();
            write_string(&c, &mut out);
            assert_eq!(out, serde_json::to_string(&c).unwrap(), "{c:?}");
        }
    }

    /// The scan reads eight bytes at a time: every ASCII byte at every offset of a word, and
    /// in the tail, next to multi-byte characters, must still be escaped where serde_json does.
    #[test]
    fn long_strings_are_escaped_like_serde_json() {
        for c in (0u32..0x80).filter_map(char::from_u32) {
            for at in 0..19 {
                for filler in ["x", "\u{e9}"] {
                    let mut s: String = filler.repeat(at);
                    s.push(c);
                    s.push_str(&"y".repeat(19 - at));
                    s.push(c);
                    let mut out = String::new();
                    write_string(&s, &mut out);
                    assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn integers_are_written_like_serde_json() {
        for n in [0i64, 7, -7, 10, -10, 1767225600024, i64::MIN, i64::MAX] {
            assert_eq!(canonical_string(&Json::Number(n.into())), n.to_string());
        }
        assert_eq!(
            canonical_string(&Json::Number(u64::MAX.into())),
            u64::MAX.to_string()
        );
        assert_eq!(canonical_string(&Json::from_value(2.5.into())), "2.5");
    }
}
