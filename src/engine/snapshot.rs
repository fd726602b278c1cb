//! The engine's side of the changelog: the runs changed since the last flush, listed once each
//! in a deterministic order, and the rebuild of a partition from a restored snapshot. Apart
//! from the event path, which only marks runs changed.
use super::run_table::{hash_key, PackedKey, Slot};
use super::{Change, PartitionEngine, PartitionMeta, RunState};
use crate::contract::RunKey;

impl PartitionEngine {
    /// Changes since the last call, for the changelog: at most one per run per flush, however
    /// many events it saw, in a deterministic order.
    pub fn take_changes(&mut self) -> Vec<Change<'_>> {
        let mut keys: Vec<RunKey> = self.dirty.drain(..).map(|k| k.to_key()).collect();
        keys.sort();
        keys.dedup();
        for k in &keys {
            if let Some(s) = self.runs.find(hash_key(k), |s| s.key.is(k)) {
                s.key.set_listed(false);
            }
        }
        let (runs, ended) = (&self.runs, &self.ended_set);
        let mut out: Vec<Change<'_>> = keys
            .into_iter()
            .filter_map(|k| {
                let hash = hash_key(&k);
                match runs.find(hash, |s| s.key.is(&k)) {
                    Some(s) => Some(Change::Upsert(k, &s.state)),
                    // Ended, unless it has since been forgotten (then `forgotten` says so).
                    None if ended.find(hash, |e| *e == k).is_some() => Some(Change::Ended(k)),
                    None => None,
                }
            })
            .collect();
        out.extend(self.forgotten.drain(..).map(Change::Forget));
        out
    }

    /// The partition's meta (watermark and friends) as the changelog stores it.
    pub fn meta(&self) -> &PartitionMeta {
        &self.meta
    }

    /// Rebuild from a snapshot (changelog restore). `ended` is oldest first.
    pub fn restore(
        &mut self,
        meta: PartitionMeta,
        runs: impl IntoIterator<Item = (RunKey, RunState)>,
        ended: impl IntoIterator<Item = RunKey>,
    ) {
        self.runs.clear();
        self.idle.clear();
        self.lru.clear();
        self.dirty.clear();
        self.forgotten.clear();
        self.meta = meta;
        self.meta.ended = ended.into_iter().collect();
        self.ended_set.clear();
        for k in &self.meta.ended {
            let hash = hash_key(k);
            if self.ended_set.find(hash, |e| e == k).is_none() {
                self.ended_set.insert_unique(hash, k.clone(), hash_key);
            }
        }
        for (k, mut s) in runs {
            s.share_agent_name(&mut self.names);
            let hash = hash_key(&k);
            if self.ended_set.find(hash, |e| *e == k).is_some() {
                continue;
            }
            // A key listed twice: the later state wins, as an insert into a map would.
            if let Ok(e) = self.runs.find_entry(hash, |x| x.key.is(&k)) {
                let old = e.remove().0;
                drop(old);
            }
            let k = PackedKey::new(&k);
            self.runs.insert_unique(
                hash,
                Slot {
                    key: k,
                    state: Box::new(s),
                },
                |x| x.key.hash(),
            );
        }
        self.compact_lru();
        self.compact_idle();
    }
}
