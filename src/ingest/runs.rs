//! Run ids (UUIDv7) and the bounded table of open runs the bridge remembers across requests.
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use time::OffsetDateTime;

/// Runs remembered at most; the oldest started runs are forgotten first. A forgotten run can
/// still finish: its id carries its start millisecond (see [`RunTable::finish_check`]).
pub(crate) const RUN_TABLE_CAPACITY: usize = 1_000_000;

/// A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits, variant 10.
pub(crate) fn uuid_v7(at: OffsetDateTime) -> u128 {
    let ms = (at.unix_timestamp_nanos() / 1_000_000).clamp(0, (1 << 48) - 1) as u128;
    let r: u128 = rand::random();
    let rand_a = (r >> 64) & 0x0fff;
    let rand_b = r & ((1u128 << 62) - 1);
    (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
}

/// Unix milliseconds of a v7 id, if it is one.
pub(crate) fn v7_millis(id: u128) -> Option<i64> {
    let version = (id >> 76) & 0xf;
    let variant = (id >> 62) & 0b11;
    (version == 7 && variant == 0b10).then_some((id >> 80) as i64)
}

/// Lower-case hyphenated form, as google/uuid prints it.
pub(crate) fn format_uuid(id: u128) -> String {
    let h = format!("{id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// keelwave's run start timestamp: the instant, at the microsecond precision Postgres keeps.
pub(crate) fn now_micros() -> OffsetDateTime {
    truncate_micros(OffsetDateTime::now_utc())
}

pub(crate) fn truncate_micros(t: OffsetDateTime) -> OffsetDateTime {
    let ns = t.nanosecond();
    t.replace_nanosecond(ns - ns % 1_000).unwrap_or(t)
}

#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    pub(crate) project: Arc<str>,
    pub(crate) agent_name: String,
    pub(crate) started: OffsetDateTime,
    pub(crate) finished: bool,
}

/// What a finish call may do.
#[derive(Debug, PartialEq)]
pub(crate) enum FinishCheck {
    /// Known run, timestamp matches: publish run_finished.
    Open,
    /// Already finished through this bridge: answer 204 again, publish nothing.
    AlreadyFinished,
    /// Not remembered (evicted, or the bridge restarted), but the id is a v7 whose millisecond
    /// is the echoed timestamp's: publish.
    Forgotten,
    /// keelwave answers 404 here: unknown (id, timestamp), or another project's run.
    NotFound,
}

pub(crate) struct RunTable {
    map: HashMap<u128, RunInfo>,
    order: VecDeque<u128>,
    cap: usize,
}

impl RunTable {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    pub(crate) fn insert(&mut self, id: u128, info: RunInfo) {
        while self.map.len() >= self.cap {
            match self.order.pop_front() {
                Some(old) => {
                    self.map.remove(&old);
                }
                None => break,
            }
        }
        if self.map.insert(id, info).is_none() {
            self.order.push_back(id);
        }
    }

    pub(crate) fn get(&self, id: u128) -> Option<&RunInfo> {
        self.map.get(&id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn finish_check(&self, id: u128, project: &str, ts: OffsetDateTime) -> FinishCheck {
        let ts = truncate_micros(ts);
        match self.map.get(&id) {
            Some(r) if &*r.project != project || truncate_micros(r.started) != ts => {
                FinishCheck::NotFound
            }
            Some(r) if r.finished => FinishCheck::AlreadyFinished,
            Some(_) => FinishCheck::Open,
            None => {
                let ms = i64::try_from(ts.unix_timestamp_nanos().div_euclid(1_000_000)).ok();
                if ms.is_some() && v7_millis(id) == ms {
                    FinishCheck::Forgotten
                } else {
                    FinishCheck::NotFound
                }
            }
        }
    }

    pub(crate) fn mark_finished(&mut self, id: u128) {
        if let Some(r) = self.map.get_mut(&id) {
            r.finished = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(p: &str, at: OffsetDateTime) -> RunInfo {
        RunInfo {
            project: Arc::from(p),
            agent_name: "a".into(),
            started: at,
            finished: false,
        }
    }

    #[test]
    fn v7_layout() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_767_225_600_123_456_000).unwrap();
        let id = uuid_v7(at);
        assert_eq!(v7_millis(id), Some(1_767_225_600_123));
        let s = format_uuid(id);
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "7");
        assert!(matches!(&s[19..20], "8" | "9" | "a" | "b"), "{s}");
        assert_eq!(super::super::wire::parse_uuid(&s), Ok(id));
        assert_ne!(uuid_v7(at), id, "random bits differ");
    }

    #[test]
    fn finish_needs_the_start_timestamp_and_the_project() {
        let at = now_micros();
        let id = uuid_v7(at);
        let mut t = RunTable::new(10);
        t.insert(id, info("p", at));
        assert_eq!(t.finish_check(id, "p", at), FinishCheck::Open);
        assert_eq!(t.finish_check(id, "q", at), FinishCheck::NotFound);
        let later = at + time::Duration::milliseconds(3);
        assert_eq!(t.finish_check(id, "p", later), FinishCheck::NotFound);
        t.mark_finished(id);
        assert_eq!(t.finish_check(id, "p", at), FinishCheck::AlreadyFinished);
        // Forgotten runs: only a v7 id whose millisecond is the timestamp's.
        let other = uuid_v7(at);
        assert_eq!(t.finish_check(other, "p", at), FinishCheck::Forgotten);
        assert_eq!(t.finish_check(other, "p", later), FinishCheck::NotFound);
        assert_eq!(t.finish_check(42, "p", at), FinishCheck::NotFound);
    }

    #[test]
    fn bounded_oldest_first() {
        let at = now_micros();
        let mut t = RunTable::new(3);
        for id in 1..=5u128 {
            t.insert(id, info("p", at));
        }
        assert_eq!(t.len(), 3);
        assert!(t.get(1).is_none() && t.get(2).is_none());
        assert!(t.get(5).is_some());
    }
}
