//! The consumer group as librdkafka sees it, from its statistics (every
//! `statistics.interval.ms`): exported as metrics, and read by the worker's watchdog and log
//! lines so that an operator can tell "waiting for the coordinator" from "joined, nothing
//! assigned".
use super::Poisoned;
use std::sync::Mutex;

/// The last reported state of the group membership.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GroupState {
    /// librdkafka's group handler state: `up` once a coordinator is known and connected,
    /// `query-coord` / `wait-coord` while it looks for one.
    pub(crate) state: String,
    /// Where the member is in a rebalance: `steady` between rebalances, `wait-join`,
    /// `wait-sync`, `wait-assign-call`, ... during one.
    pub(crate) join_state: String,
    /// Partitions assigned to this member.
    pub(crate) assignment_size: i32,
    /// Milliseconds since the last assign or revoke.
    pub(crate) rebalance_age_ms: i64,
    pub(crate) rebalance_reason: String,
}

impl GroupState {}

#[derive(Default)]
pub(crate) struct GroupView {
    last: Mutex<Option<GroupState>>,
}

impl GroupView {
    pub(super) fn observe(&self, cg: &rdkafka::statistics::ConsumerGroup) {
        let now = GroupState {
            state: cg.state.clone(),
            join_state: cg.join_state.clone(),
            assignment_size: cg.assignment_size,
            rebalance_age_ms: cg.rebalance_age,
            rebalance_reason: cg.rebalance_reason.clone(),
        };
        // A statistics callback cannot fail: a poisoned view is left as it is, poisoned, and
        // its reader (`last`) fails instead.
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        // One series per (state, join state): 1 for the current one, 0 for the one it left.
        if let Some(prev) = last.as_ref() {
            if (&prev.state, &prev.join_state) != (&now.state, &now.join_state) {
                metrics::gauge!("eddy_consumer_group_state", "state" => prev.state.clone(), "join_state" => prev.join_state.clone()).set(0.0);
            }
        }
        metrics::gauge!("eddy_consumer_group_state", "state" => now.state.clone(), "join_state" => now.join_state.clone()).set(1.0);
        metrics::gauge!("eddy_consumer_group_assigned_partitions")
            .set(f64::from(now.assignment_size));
        *last = Some(now);
    }

    /// The last report, if librdkafka sent one yet.
    pub fn last(&self) -> Result<Option<GroupState>, Poisoned> {
        self.last
            .lock()
            .map(|l| l.clone())
            .map_err(|_| Poisoned("the consumer group view"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_view_is_an_error_not_an_empty_report() {
        let view = std::sync::Arc::new(GroupView::default());
        let v = view.clone();
        let panicked = std::thread::spawn(move || {
            let _held = v.last.lock().unwrap();
            panic!("poisoning the group view on purpose");
        })
        .join();
        assert!(panicked.is_err());
        let e = view
            .last()
            .expect_err("a poisoned view must not read as no report");
        assert!(e.to_string().contains("consumer group view"), "{e}");
    }
}
