//! What a page's query string asks for, checked before anything is queried: a value the page
//! does not offer is a 400 that names it, not a silent default.
use super::queries::{Search, Window};
use super::UiError;
use crate::query::parse_datetime;
use std::collections::BTreeMap;

/// Named ranges offered on the fleet page, in seconds.
pub(crate) const RANGES: &[(&str, i64)] = &[
    ("1h", 3600),
    ("6h", 6 * 3600),
    ("24h", 86400),
    ("7d", 7 * 86400),
    ("30d", 30 * 86400),
];
pub(crate) const BUCKETS: &[u32] = &[60, 300, 900, 3600, 6 * 3600, 86400];
const DEFAULT_RANGE: &str = "24h";

fn bad(what: &str, v: &str) -> UiError {
    UiError::BadRequest(format!("{what}: `{v}` is not valid"))
}

/// A parameter, absent and empty alike meaning "not given".
fn given<'a>(p: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    p.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

/// The fleet page's choices, as asked; `to` is resolved later (its default needs a query).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FleetParams {
    pub(crate) range_name: String,
    range: i64,
    pub(crate) bucket: u32,
    pub(crate) project: Option<String>,
    pub(crate) to: Option<i64>,
    /// `to` as typed, shown back in the form.
    pub(crate) to_text: String,
}

impl FleetParams {
    pub(crate) fn parse(p: &BTreeMap<String, String>) -> Result<Self, UiError> {
        let range_name = p.get("range").map_or(DEFAULT_RANGE, String::as_str);
        let range = RANGES
            .iter()
            .find(|r| r.0 == range_name)
            .map(|r| r.1)
            .ok_or_else(|| bad("range", range_name))?;
        let to = given(p, "to")
            .map(|v| parse_datetime(v).ok_or_else(|| bad("to", v)))
            .transpose()?;
        let bucket = match given(p, "bucket") {
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|b| BUCKETS.contains(b))
                .ok_or_else(|| bad("bucket", v))?,
            // About 60 points across the range.
            None => BUCKETS
                .iter()
                .copied()
                .find(|b| range / i64::from(*b) <= 60)
                .unwrap_or(86400),
        };
        Ok(Self {
            range_name: range_name.to_string(),
            range,
            bucket,
            project: given(p, "project").map(str::to_string),
            to,
            to_text: p.get("to").cloned().unwrap_or_default(),
        })
    }

    /// The window ending at `to`.
    pub(crate) fn window(&self, to: i64) -> Window {
        Window {
            from: to - self.range,
            to,
            bucket: self.bucket,
            project: self.project.clone(),
        }
    }
}

/// The search form's fields as typed (trimmed), and the search they ask for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchParams {
    pub(crate) from_text: String,
    pub(crate) to_text: String,
    pub(crate) search: Search,
}

impl SearchParams {
    pub(crate) fn parse(p: &BTreeMap<String, String>) -> Result<Self, UiError> {
        let text = |k: &str| p.get(k).map(|v| v.trim().to_string()).unwrap_or_default();
        let time_of = |k: &str, v: &str| -> Result<Option<i64>, UiError> {
            if v.is_empty() {
                return Ok(None);
            }
            parse_datetime(v).map(Some).ok_or_else(|| bad(k, v))
        };
        let (from_text, to_text) = (text("from"), text("to"));
        let search = Search {
            run_id: text("run_id"),
            agent: text("agent"),
            from: time_of("from", &from_text)?,
            to: time_of("to", &to_text)?,
        };
        Ok(Self {
            from_text,
            to_text,
            search,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_fleet_defaults_to_a_day_in_buckets_of_about_sixty_points() {
        let f = FleetParams::parse(&params(&[])).unwrap();
        assert_eq!((f.range_name.as_str(), f.bucket), ("24h", 3600));
        let w = f.window(100_000);
        assert_eq!((w.from, w.to, w.project), (100_000 - 86400, 100_000, None));
        let f = FleetParams::parse(&params(&[("range", "1h"), ("project", "")])).unwrap();
        assert_eq!((f.bucket, f.project), (60, None));
    }

    #[test]
    fn values_the_page_does_not_offer_are_refused_by_name() {
        for (k, v) in [("range", "2h"), ("bucket", "61"), ("to", "yesterday")] {
            let e = FleetParams::parse(&params(&[(k, v)])).unwrap_err();
            assert!(
                matches!(&e, UiError::BadRequest(m) if m.contains(k) && m.contains(v)),
                "{e}"
            );
        }
        let e = SearchParams::parse(&params(&[("from", " soon ")])).unwrap_err();
        assert!(
            matches!(&e, UiError::BadRequest(m) if m.contains("`soon`")),
            "{e}"
        );
    }

    #[test]
    fn search_fields_are_trimmed_and_times_parsed() {
        let s = SearchParams::parse(&params(&[
            ("run_id", " r-1 "),
            ("agent", "coder"),
            ("to", "2026-01-01T00:00:00Z"),
        ]))
        .unwrap();
        assert_eq!(s.search.run_id, "r-1");
        assert_eq!(s.search.agent, "coder");
        assert_eq!(s.search.from, None);
        assert_eq!(s.search.to, parse_datetime("2026-01-01T00:00:00Z"));
        assert_eq!(s.to_text, "2026-01-01T00:00:00Z");
    }
}
