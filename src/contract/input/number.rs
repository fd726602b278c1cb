//! Numbers on the wire: non-negative integers and decimals, with shortcuts for the plain
//! digits nearly every event carries. Its own file because the shortcuts must agree with
//! `str::parse` and serde_json bit for bit, and the tests that hold them to it are long.
use super::checks::truncate;
use super::error::DecodeError;

pub(super) fn non_negative_f64(raw: &str) -> Option<f64> {
    if let Some(x) = plain_decimal(raw.as_bytes()) {
        return Some(x);
    }
    serde_json::from_str::<f64>(raw)
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
}

pub(super) fn parse_u64_text(raw: &str, field: &'static str) -> Result<u64, DecodeError> {
    if let Some(n) = plain_u64(raw.as_bytes()) {
        return Ok(n);
    }
    let s = raw.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    // Some producers serialise integers as floats (`3.0`); accept exact integral values only.
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 => Ok(f as u64),
        _ => Err(DecodeError::InvalidField {
            field,
            why: format!("expected a non-negative integer, got {}", truncate(raw, 64)),
        }),
    }
}

/// Up to 19 ASCII digits, nothing else: the usual integer field, read without `str::parse`'s
/// sign and overflow handling (19 digits cannot overflow a `u64`). `None`: let the general
/// parse decide.
fn plain_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    Some(n)
}

/// Powers of ten that are exact in an `f64`, up to the largest [`plain_decimal`] divides by.
const EXACT_POW10: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// `ddd` or `ddd.ddd` with at most 15 digits in all (the usual cost or latency), as the
/// correctly rounded `f64` that serde_json (with `float_roundtrip`) also returns: the digits as
/// an integer below 2^53 and the power of ten are both exact, so their one division rounds
/// correctly. `None`: anything else, for the general parse.
fn plain_decimal(b: &[u8]) -> Option<f64> {
    let (mut m, mut digits, mut frac, mut dot) = (0u64, 0usize, 0usize, false);
    for (i, &c) in b.iter().enumerate() {
        if c == b'.' {
            if dot || i == 0 || i + 1 == b.len() {
                return None;
            }
            dot = true;
            continue;
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 || digits == 15 {
            return None;
        }
        m = m * 10 + u64::from(d);
        digits += 1;
        frac += usize::from(dot);
    }
    if digits == 0 {
        return None;
    }
    // A u64 below 10^15 converts exactly.
    Some(m as f64 / *EXACT_POW10.get(frac)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wherever the shortcut answers, it answers as `str::parse` does; it declines the rest.
    #[test]
    fn plain_u64_agrees_with_str_parse() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut cases: Vec<String> = [
            "",
            "0",
            "00",
            "007",
            "9",
            "+1",
            "-0",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "a",
            "١",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x >> (x % 64)).to_string());
            cases.push(format!("{}", x % 1000));
        }
        for c in &cases {
            match plain_u64(c.as_bytes()) {
                Some(n) => assert_eq!(c.parse::<u64>().ok(), Some(n), "{c:?}"),
                None => assert!(
                    c.len() > 19 || !c.bytes().all(|b| b.is_ascii_digit()) || c.is_empty(),
                    "declined {c:?}"
                ),
            }
        }
        assert_eq!(
            plain_u64(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(plain_u64(b"18446744073709551615"), None);
    }

    /// Wherever the shortcut answers, it answers as serde_json does, bit for bit.
    #[test]
    fn plain_decimal_agrees_with_serde_json() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut cases: Vec<String> = [
            "0",
            "0.0",
            "0.5",
            "1",
            "350",
            "0.0021",
            "0.1",
            "0.3",
            "2.675",
            "123456789012345",
            "1234567890123456",
            "12345678.9012345",
            "1.234567890123456",
            "999999999999999",
            "0.000000000000001",
            "9007199254740993",
            "1.",
            ".5",
            "1..2",
            "1.2.3",
            "-1",
            "1e3",
            "",
            ".",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 10_u64.pow(1 + (x >> 40) as u32 % 16)).to_string();
            let at = (x >> 20) as usize % (digits.len() + 1);
            cases.push(digits.clone());
            if at > 0 && at < digits.len() {
                cases.push(format!("{}.{}", &digits[..at], &digits[at..]));
            }
            cases.push(format!("0.{digits}"));
        }
        let mut answered = 0;
        for c in &cases {
            if let Some(v) = plain_decimal(c.as_bytes()) {
                answered += 1;
                let want: f64 = serde_json::from_str(c).expect(c);
                assert_eq!(v.to_bits(), want.to_bits(), "{c}");
            }
        }
        assert!(answered > cases.len() / 2, "{answered} of {}", cases.len());
        for declined in ["1234567890123456", "1.", ".5", "1..2", "-1", "1e3", "", "."] {
            assert_eq!(plain_decimal(declined.as_bytes()), None, "{declined}");
        }
    }
}
