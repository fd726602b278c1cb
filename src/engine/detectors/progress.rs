//! The run-wide counters several detectors compare against (steps seen, novel outputs and
//! actions, the repeated operation's streak), and their record form.
use super::compact::grow_exact;
use super::{StepView, ToolClass};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The low half of a 64-bit key, what [`Progress`] keeps of it.
fn low32(k: u64) -> u32 {
    k as u32
}

/// Run-wide counters shared by several detectors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// Steps applied to the detectors (dense, unlike `step_index`).
    pub seq: u64,
    /// Tool outputs not among the recent ones: a proxy for "the agent learned something".
    pub novel_outputs: u64,
    /// Successful, non-repeatable tool calls whose action was not among the recent ones.
    pub novel_actions: u64,
    /// The recent outputs (the first `outputs` values) then the recent actions, each oldest
    /// first: one allocation per open run instead of two queues. Each is the low half of its
    /// key ([`low32`]): they are only tested for membership, among at most [`Self::RECENT`],
    /// so a new key passes for a known one with probability at most 2⁻²⁶, and half the bytes
    /// are a few percent of an open run.
    recent: Vec<u32>,
    outputs: u32,
    /// Repeated operation's streak: how many of the newest counted tool calls were the same
    /// call with the same output, back to back (0 after a failure). Here, in what would be
    /// padding, rather than in the repeat state, which would grow a size class.
    pub(super) streak: u32,
}

/// What records hold: the two recent sets as separate sequences. Records written before the
/// streak was kept restore with none (the next identical call starts one).
#[derive(Serialize, Deserialize)]
#[serde(rename = "Progress")]
struct ProgressRecord<O, A> {
    seq: u64,
    novel_outputs: u64,
    novel_actions: u64,
    recent_outputs: O,
    recent_actions: A,
    #[serde(default)]
    streak: u32,
}

impl Serialize for Progress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (o, a) = self.recent.split_at(self.outputs());
        ProgressRecord {
            seq: self.seq,
            novel_outputs: self.novel_outputs,
            novel_actions: self.novel_actions,
            recent_outputs: o,
            recent_actions: a,
            streak: self.streak,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Progress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Records of version 3 and before hold whole keys: read as their low halves.
        let r = ProgressRecord::<VecDeque<u64>, VecDeque<u64>>::deserialize(d)?;
        let mut recent: Vec<u32> = r.recent_outputs.into_iter().map(low32).collect();
        let outputs = u32::try_from(recent.len()).map_err(serde::de::Error::custom)?;
        recent.extend(r.recent_actions.into_iter().map(low32));
        Ok(Self {
            seq: r.seq,
            novel_outputs: r.novel_outputs,
            novel_actions: r.novel_actions,
            recent,
            outputs,
            streak: r.streak,
        })
    }
}

impl Progress {
    const RECENT: usize = 64;

    /// The counters alone (the recent sets left empty): what detectors compare against as
    /// "before this step", without copying the sets on every step.
    pub(super) fn counters(&self) -> Progress {
        Progress {
            seq: self.seq,
            novel_outputs: self.novel_outputs,
            novel_actions: self.novel_actions,
            recent: Vec::new(),
            outputs: 0,
            streak: self.streak,
        }
    }

    fn outputs(&self) -> usize {
        (self.outputs as usize).min(self.recent.len())
    }

    fn insert(&mut self, at: usize, x: u32) {
        grow_exact(&mut self.recent);
        self.recent.insert(at, x);
    }

    pub(super) fn observe(&mut self, v: &StepView<'_>) {
        self.seq += 1;
        if v.tool.is_none() || v.class == ToolClass::Exempt {
            return;
        }
        let no = self.outputs();
        let output = low32(v.output_key);
        if !self.recent[..no].contains(&output) {
            self.novel_outputs += 1;
            let mut no = no;
            if no >= Self::RECENT {
                self.recent.remove(0);
                no -= 1;
            }
            self.insert(no, output);
            // At most RECENT.
            self.outputs = (no + 1) as u32;
        }
        let no = self.outputs();
        let action = low32(v.action_key);
        let known = self.recent[no..].contains(&action);
        if v.failure.is_none() && !v.class.is_repeatable() && !known {
            self.novel_actions += 1;
        }
        if !known {
            if self.recent.len() - no >= Self::RECENT {
                self.recent.remove(no);
            }
            let end = self.recent.len();
            self.insert(end, action);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of version 3 and before hold whole keys in the recent sets: they restore as
    /// the low halves a live run keeps, and are written back as those.
    #[test]
    fn progress_records_with_whole_keys_read_as_low_halves() {
        let (out, act) = (0x1234_5678_9abc_def0_u64, 0xfedc_ba98_7654_3210_u64);
        let json = format!(
            r#"{{"seq":3,"novel_outputs":1,"novel_actions":1,"recent_outputs":[{out}],"recent_actions":[{act}]}}"#
        );
        let p: Progress = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (p.recent.as_slice(), p.outputs()),
            (&[0x9abc_def0, 0x7654_3210][..], 1)
        );
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["recent_outputs"], serde_json::json!([0x9abc_def0_u32]));
        assert_eq!(back["recent_actions"], serde_json::json!([0x7654_3210_u32]));
    }
}
