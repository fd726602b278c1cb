//! The run-wide counters ([`Progress`]) as records hold them: the two recent sets as separate
//! sequences, where the state keeps them in one vector.
use crate::engine::detectors::Progress;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

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
        let mut recent: Vec<u32> = r.recent_outputs.into_iter().map(Progress::low32).collect();
        let outputs = u32::try_from(recent.len()).map_err(serde::de::Error::custom)?;
        recent.extend(r.recent_actions.into_iter().map(Progress::low32));
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
