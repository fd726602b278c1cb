//! The contract's timestamps: `ts` read from RFC 3339 text or epoch milliseconds, and written
//! back as RFC 3339 UTC for output events. Both directions live here so that the accepted
//! range (1970 .. year 9999) is stated once.
use super::checks::truncate;
use super::error::DecodeError;
use super::number::parse_u64_text;
use crate::contract::limits::MAX_TS_MS;
use serde_json::value::RawValue;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// `ts` is RFC 3339 (any offset, stored as UTC) or integer epoch milliseconds.
pub(crate) fn parse_ts(raw: &RawValue) -> Result<i64, DecodeError> {
    parse_ts_text(raw.get())
}
pub(super) fn parse_ts_text(raw: &str) -> Result<i64, DecodeError> {
    let s = raw.trim();
    let bad = |why: String| DecodeError::InvalidField { field: "ts", why };
    if s.starts_with('"') {
        let text: String = serde_json::from_str(s).map_err(|e| bad(e.to_string()))?;
        let dt = OffsetDateTime::parse(&text, &Rfc3339)
            .map_err(|e| bad(format!("`{}` is not RFC 3339: {e}", truncate(&text, 64))))?;
        let ms = dt.unix_timestamp_nanos() / 1_000_000;
        match i64::try_from(ms) {
            Ok(ms) if (0..=MAX_TS_MS).contains(&ms) => Ok(ms),
            _ => Err(bad(format!(
                "`{}` is outside 1970-01-01 .. 9999-12-31",
                truncate(&text, 64)
            ))),
        }
    } else {
        let ms = parse_u64_text(raw, "ts").map_err(|_| {
            bad(format!(
                "expected RFC 3339 text or epoch milliseconds, got {}",
                truncate(s, 64)
            ))
        })?;
        match i64::try_from(ms) {
            Ok(ms) if ms <= MAX_TS_MS => Ok(ms),
            _ => Err(bad(format!(
                "{ms} ms is after 9999-12-31 (epoch milliseconds expected)"
            ))),
        }
    }
}

/// Format epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub(crate) fn format_ts(ms: i64) -> String {
    if (0..=MAX_TS_MS).contains(&ms) {
        return format_ts_civil(ms);
    }
    format_ts_time(ms)
}

/// [`format_ts`] of a time from 1970 to year 9999, computed directly (days to civil date, as in
/// H. Hinnant's `civil_from_days`): it runs for every output event, and the `time` crate's
/// general formatter cost more than the rest of building one.
fn format_ts_civil(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, rem / 3_600_000);
    put(14, 2, rem / 60_000 % 60);
    put(17, 2, rem / 1000 % 60);
    put(20, 3, rem % 1000);
    b.iter().map(|&c| char::from(c)).collect()
}

/// [`format_ts`] by the `time` crate: any instant it can represent.
fn format_ts_time(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(dt) => {
            let fmt = time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            );
            dt.format(&fmt).unwrap_or_else(|_| ms.to_string())
        }
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_timestamps_are_the_time_crate_s() {
        let mut ms: i64 = 0;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let fixed = [
            0,
            1,
            999,
            86_399_999,
            86_400_000,
            951_782_400_000,   // 2000-02-29
            4_107_542_400_000, // 2100-03-01
            1_767_225_600_000,
            MAX_TS_MS,
        ];
        for &f in &fixed {
            assert_eq!(format_ts_civil(f), format_ts_time(f), "{f}");
        }
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ms = (ms + (x % 400_000_000_000) as i64) % (MAX_TS_MS + 1);
            assert_eq!(format_ts_civil(ms), format_ts_time(ms), "{ms}");
            assert_eq!(format_ts(ms), format_ts_time(ms), "{ms}");
        }
        assert_eq!(format_ts(-1), format_ts_time(-1));
        assert_eq!(format_ts(MAX_TS_MS + 1), format_ts_time(MAX_TS_MS + 1));
    }
}
