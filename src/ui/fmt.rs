//! How times read on the pages, all in UTC. A time that cannot be shown is left blank rather
//! than failing the page.
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// RFC 3339 of epoch seconds: the fleet page's window.
pub(crate) fn rfc3339(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| d.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// `hh:mm:ss.mmm` of epoch milliseconds: a step's time (its run's date is in the summary).
pub(crate) fn clock_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map(|d| {
            format!(
                "{:02}:{:02}:{:02}.{:03}",
                d.hour(),
                d.minute(),
                d.second(),
                d.millisecond()
            )
        })
        .unwrap_or_default()
}

/// `MM-DD hh:mm` of epoch seconds: a chart's x axis, short enough for three labels.
pub(crate) fn short_time(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .map(|d| {
            format!(
                "{:02}-{:02} {:02}:{:02}",
                u8::from(d.month()),
                d.day(),
                d.hour(),
                d.minute()
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_utc() {
        // 2026-03-04T05:06:07Z, from the calendar.
        let secs = 1_772_600_767;
        assert_eq!(rfc3339(secs), "2026-03-04T05:06:07Z");
        assert_eq!(short_time(secs), "03-04 05:06");
        assert_eq!(clock_ms(secs * 1000 + 89), "05:06:07.089");
    }
}
