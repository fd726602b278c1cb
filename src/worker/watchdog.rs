//! The watchdog: a worker that holds no partition, or holds partitions but receives nothing,
//! while its input has lag that nobody works off, is not doing its job, however healthy the
//! process looks. Past `watchdog_timeout_ms` of that, the worker says so on `/livez` and exits
//! non-zero: a restart rejoins the group from scratch, and the rebalance it causes also moves
//! partitions away from a member that stopped answering.
//!
//! The decision is a pure function of what the worker observes (`Observation`), so it is
//! tested without a broker; the lag comes from a probe of the group's committed offsets and
//! the partitions' high watermarks (`probe`), taken only while the worker looks idle.
use crate::config::KafkaConfig;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Per input partition: the group's committed offset (None if none yet) and the high watermark.
pub(crate) type Offsets = BTreeMap<i32, (Option<i64>, i64)>;

/// What the worker saw since the last tick.
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    pub(crate) now: Instant,
    /// Input partitions assigned to this worker.
    pub(crate) assigned: Vec<i32>,
    /// Input messages received since the previous observation.
    pub(crate) received: bool,
    /// Input is held back on purpose (a full batch waits for its flush, a rewind, or
    /// ClickHouse not answering): waiting is what it should do, and the flush's own deadlines
    /// bound every wait except a ClickHouse outage's, which must grow lag, not restart workers.
    pub(crate) holding: bool,
    /// The latest lag probe, if one answered since the previous observation.
    pub(crate) probe: Option<Offsets>,
}

/// What the watchdog wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Working, or waiting for a good reason.
    Fine,
    /// Looks idle: take a lag probe (the caller rate-limits it).
    Probe,
    /// Stuck for the whole timeout: give up, saying why.
    Stuck(String),
}

pub(crate) struct Watchdog {
    timeout: Duration,
    /// Since when the worker has looked stuck (confirmed by a probe).
    stuck_since: Option<Instant>,
    /// The previous probe's committed offsets, to tell whether anybody made progress.
    last_committed: Option<BTreeMap<i32, Option<i64>>>,
    /// Since when nothing was received (or nothing assigned).
    idle_since: Option<Instant>,
}

/// How long the worker must look idle before a probe is worth it.
pub(crate) const IDLE_BEFORE_PROBE: Duration = Duration::from_secs(10);

impl Watchdog {
    /// `timeout` zero turns the watchdog off.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            stuck_since: None,
            last_committed: None,
            idle_since: None,
        }
    }

    fn clear(&mut self) {
        self.stuck_since = None;
        self.idle_since = None;
    }

    /// Since when the worker has looked stuck, if it does.
    pub(crate) fn stuck_since(&self) -> Option<Instant> {
        self.stuck_since
    }

    pub(crate) fn observe(&mut self, o: &Observation) -> Verdict {
        if self.timeout.is_zero() {
            return Verdict::Fine;
        }
        if o.holding || (o.received && !o.assigned.is_empty()) {
            self.clear();
            self.last_committed = None;
            return Verdict::Fine;
        }
        let idle_since = *self.idle_since.get_or_insert(o.now);
        let Some(offsets) = &o.probe else {
            return if o.now.duration_since(idle_since) >= IDLE_BEFORE_PROBE {
                Verdict::Probe
            } else {
                Verdict::Fine
            };
        };
        // Whose lag counts: this worker's partitions, or, holding none, the whole topic's.
        let mine = |p: &i32| o.assigned.is_empty() || o.assigned.contains(p);
        let lag: i64 = offsets
            .iter()
            .filter(|(p, _)| mine(p))
            .map(|(_, (committed, high))| (high - committed.unwrap_or(0)).max(0))
            .sum();
        let committed: BTreeMap<i32, Option<i64>> =
            offsets.iter().map(|(p, (c, _))| (*p, *c)).collect();
        // Somebody else works the lag off: a member with nothing assigned is only spare. With
        // nothing to compare with yet, it may be.
        let others_progress = o.assigned.is_empty()
            && self
                .last_committed
                .as_ref()
                .is_none_or(|before| before != &committed);
        self.last_committed = Some(committed);
        if lag == 0 || others_progress {
            self.stuck_since = None;
            return Verdict::Fine;
        }
        let since = *self.stuck_since.get_or_insert(idle_since);
        let stuck_for = o.now.duration_since(since);
        if stuck_for < self.timeout {
            return Verdict::Fine;
        }
        let why = if o.assigned.is_empty() {
            format!(
                "no partition assigned for {} s while the input topic has {lag} messages of lag \
                 that no member of the group works off",
                stuck_for.as_secs()
            )
        } else {
            format!(
                "partitions {:?} assigned but no message received for {} s while they have {lag} \
                 messages of lag",
                o.assigned,
                stuck_for.as_secs()
            )
        };
        Verdict::Stuck(why)
    }
}

/// The group's committed offsets and the high watermarks of every partition of the input
/// topic, asked by a client of its own: the worker's consumer may be the one that lost its way
/// (librdkafka can forget the only broker it knew and not look again for minutes), and a fresh
/// client bootstraps anew. Blocking, each call bounded by `timeout`. None when the brokers do
/// not answer it either (then nobody can be blamed for not consuming).
pub(crate) fn probe(kafka: &KafkaConfig, timeout: Duration) -> Option<Offsets> {
    let mut cc = ClientConfig::new();
    for (k, v) in kafka.client_props() {
        cc.set(k, v);
    }
    // Reads the group's commits; never subscribes, so it never joins the group.
    cc.set("group.id", &kafka.group_id)
        .set("enable.auto.commit", "false");
    let c: BaseConsumer = cc.create().ok()?;
    offsets(&c, &kafka.topics.input, timeout)
}

fn offsets<C, X>(consumer: &C, topic: &str, timeout: Duration) -> Option<Offsets>
where
    C: Consumer<X>,
    X: rdkafka::consumer::ConsumerContext,
{
    let md = consumer.fetch_metadata(Some(topic), timeout).ok()?;
    let parts: Vec<i32> = md
        .topics()
        .first()?
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    let mut tpl = TopicPartitionList::new();
    for p in &parts {
        tpl.add_partition(topic, *p);
    }
    let committed = consumer.committed_offsets(tpl, timeout).ok()?;
    let mut out = Offsets::new();
    for e in committed.elements_for_topic(topic) {
        let (_, high) = consumer
            .fetch_watermarks(topic, e.partition(), timeout)
            .ok()?;
        let c = match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        };
        out.insert(e.partition(), (c, high));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(60);

    fn obs(t0: Instant, secs: u64, assigned: &[i32], received: bool) -> Observation {
        Observation {
            now: t0 + Duration::from_secs(secs),
            assigned: assigned.to_vec(),
            received,
            holding: false,
            probe: None,
        }
    }

    fn offsets(v: &[(i32, Option<i64>, i64)]) -> Offsets {
        v.iter().map(|(p, c, h)| (*p, (*c, *h))).collect()
    }

    #[test]
    fn a_worker_receiving_messages_is_fine_without_probing() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        for s in 0..600 {
            assert_eq!(w.observe(&obs(t0, s, &[0, 1], true)), Verdict::Fine);
        }
    }

    #[test]
    fn idle_with_lag_and_no_progress_is_stuck_after_the_timeout() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        assert_eq!(w.observe(&obs(t0, 0, &[], false)), Verdict::Fine);
        assert_eq!(w.observe(&obs(t0, 10, &[], false)), Verdict::Probe);
        let lagging = offsets(&[(0, Some(5), 100), (1, None, 40)]);
        let mut seen_stuck = None;
        for s in (10..=90).step_by(10) {
            let mut o = obs(t0, s, &[], false);
            o.probe = Some(lagging.clone());
            if let Verdict::Stuck(why) = w.observe(&o) {
                seen_stuck = Some((s, why));
                break;
            }
        }
        let (at, why) = seen_stuck.expect("stuck within the run");
        assert_eq!(at, 60, "stuck counted from when it went idle: {why}");
        assert!(why.contains("135 messages of lag"), "{why}");
    }

    #[test]
    fn a_spare_member_is_fine_while_others_work_the_lag_off() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        for (i, s) in (0..600).step_by(10).enumerate() {
            let mut o = obs(t0, s, &[], false);
            let c = 100 + i as i64;
            o.probe = Some(offsets(&[(0, Some(c), c + 50)]));
            assert_eq!(w.observe(&o), Verdict::Fine, "at {s} s");
        }
    }

    #[test]
    fn one_probe_cannot_tell_a_spare_member_from_a_stuck_one() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(Duration::from_secs(5));
        let mut o = obs(t0, 30, &[], false);
        o.probe = Some(offsets(&[(0, Some(0), 1000)]));
        assert_eq!(
            w.observe(&o),
            Verdict::Fine,
            "no earlier probe to compare with"
        );
        let mut o = obs(t0, 40, &[], false);
        o.probe = Some(offsets(&[(0, Some(0), 1000)]));
        assert!(matches!(w.observe(&o), Verdict::Stuck(_)));
    }

    #[test]
    fn no_lag_is_fine_however_long_idle() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        for s in (0..600).step_by(10) {
            let mut o = obs(t0, s, &[3], false);
            o.probe = Some(offsets(&[(3, Some(7), 7), (4, Some(0), 90)]));
            assert_eq!(w.observe(&o), Verdict::Fine, "partition 4 is not ours");
        }
    }

    #[test]
    fn holding_back_input_on_purpose_is_never_stuck() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        for s in (0..600).step_by(10) {
            let mut o = obs(t0, s, &[0], false);
            o.holding = true;
            o.probe = Some(offsets(&[(0, Some(0), 1000)]));
            assert_eq!(w.observe(&o), Verdict::Fine);
        }
    }

    #[test]
    fn a_message_resets_the_clock() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(T);
        let lag = offsets(&[(0, Some(0), 10)]);
        let mut at = |s, received| {
            let mut o = obs(t0, s, &[0], received);
            o.probe = Some(lag.clone());
            w.observe(&o)
        };
        assert_eq!(at(0, false), Verdict::Fine);
        assert_eq!(at(50, false), Verdict::Fine);
        assert_eq!(at(55, true), Verdict::Fine);
        assert_eq!(at(56, false), Verdict::Fine);
        assert_eq!(at(115, false), Verdict::Fine, "59 s idle only");
        assert!(matches!(at(116, false), Verdict::Stuck(_)));
    }

    #[test]
    fn a_zero_timeout_turns_it_off() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(Duration::ZERO);
        let mut o = obs(t0, 1000, &[], false);
        o.probe = Some(offsets(&[(0, Some(0), 1000)]));
        assert_eq!(w.observe(&o), Verdict::Fine);
    }
}
