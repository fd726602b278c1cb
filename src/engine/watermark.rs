//! Partition time: the watermark (the maximum event time seen in the partition, guarded against
//! single runs far ahead of or behind it) and the idle-timeout sweep it drives. Apart from the
//! per-run event path because it is the one place where time moves.
use super::{run, text, PartitionEngine};
use crate::contract::{OutputEvent, RunKey};
use std::cmp::Reverse;

impl PartitionEngine {
    /// The watermark is the maximum event time of the partition, except that one run cannot
    /// drag it far ahead: a jump beyond `max_future_skew_ms` counts only once
    /// `watermark_jump_quorum` distinct runs made one (then to the earliest of their times).
    pub(super) fn advance_watermark(&mut self, key: &RunKey, ts: i64, out: &mut Vec<OutputEvent>) {
        let skew = self.cfg.max_future_skew_ms;
        // A run that caught up is no longer evidence against the watermark.
        if !self.meta.behind.is_empty()
            && self
                .meta
                .watermark_ms
                .is_some_and(|w| w.saturating_sub(ts) <= skew)
        {
            let run = text::key64(
                "watermark.behind",
                &[key.project_id.as_bytes(), key.run_id.as_bytes()],
            );
            self.meta.behind.retain(|(r, _)| *r != run);
        }
        let wm = match self.meta.watermark_ms {
            Some(w) if w >= ts => {
                if skew > 0 && w.saturating_sub(ts) > skew {
                    self.note_behind(key, ts);
                }
                return;
            }
            Some(w) if skew > 0 && ts.saturating_sub(w) > skew => {
                let run = text::key64(
                    "watermark.jump",
                    &[key.project_id.as_bytes(), key.run_id.as_bytes()],
                );
                if !self.meta.jumps.iter().any(|(r, _)| *r == run) {
                    self.meta.jumps.push((run, ts));
                }
                if self.meta.jumps.len() < self.cfg.watermark_jump_quorum.max(1) {
                    return;
                }
                let to = self.meta.jumps.iter().map(|j| j.1).min().unwrap_or(ts);
                self.meta.jumps.clear();
                to
            }
            _ => ts,
        };
        // Pending jumps that the watermark has now come close to are ordinary again.
        self.meta
            .jumps
            .retain(|(_, t)| skew > 0 && t.saturating_sub(wm) > skew);
        self.meta.watermark_ms = Some(wm);
        let timeout = self.cfg.idle_timeout_ms;
        if timeout <= 0 {
            return;
        }
        // Expire in (last_ts, key) order: deterministic for a given event sequence.
        while let Some(Reverse((last_ts, _))) = self.idle.peek() {
            if last_ts.saturating_add(timeout) >= wm {
                break;
            }
            let Some(Reverse((last_ts, key))) = self.idle.pop() else {
                break;
            };
            if let Some(Err(later)) = self.end_if_current(
                key,
                |s| s.last_ts,
                last_ts,
                |_| run::End::Idle {
                    at_ms: last_ts.saturating_add(timeout),
                },
                out,
            ) {
                self.idle.push(Reverse(later));
            }
        }
    }

    /// A watermark an outlier set (a far-future *first* event of a partition, which no guard
    /// can judge) would stop idle timeouts: once `watermark_jump_quorum` distinct runs report
    /// times more than `max_future_skew_ms` behind it, it comes back to the earliest of theirs.
    /// Moving back only delays timeouts, never causes one.
    fn note_behind(&mut self, key: &RunKey, ts: i64) {
        let run = text::key64(
            "watermark.behind",
            &[key.project_id.as_bytes(), key.run_id.as_bytes()],
        );
        match self.meta.behind.iter_mut().find(|(r, _)| *r == run) {
            Some(e) => e.1 = e.1.max(ts),
            None => self.meta.behind.push((run, ts)),
        }
        if self.meta.behind.len() < self.cfg.watermark_jump_quorum.max(1) {
            return;
        }
        let back = self.meta.behind.iter().map(|b| b.1).min().unwrap_or(ts);
        self.meta.behind.clear();
        self.meta.jumps.clear();
        self.meta.watermark_ms = Some(back);
    }
}
