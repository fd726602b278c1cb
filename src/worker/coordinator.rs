//! The coordinator: the one place that polls the group consumer. It hands messages to the
//! partition tasks, cuts epochs with barriers, runs one flush at a time beside processing, and
//! answers rebalances. It never waits on a server inline: flushes and rewinds run as tasks
//! that it polls between messages, so librdkafka's rebalance callbacks, commit answers and
//! log lines are always served (a consumer left unpolled while a flush waited is how workers
//! used to fall out of their group after a broker restart and stay out).
//!
//! Back-pressure pauses the assigned partitions instead of not polling: a batch that fills
//! while the previous one is still being flushed, or a rewind in progress, holds the input
//! back at the broker (librdkafka then fetches from the position after the last message it
//! handed over, so nothing is lost).
//!
//! Everything it does outside itself goes through seams (`super::seams`): the group consumer
//! (`GroupConsumer`), and the partition tasks, flushes and transaction aborts it starts
//! (`Background`). Its unit tests (`coordinator_tests.rs`) drive it on fakes of both.
use super::partition::{self, Counters, Epoch, Raw};
use super::seams::{Background, Flushed, GroupConsumer};
use super::watchdog::{self, Observation, Verdict, Watchdog};
use super::WorkerError;
use crate::config::{KafkaConfig, WorkerConfig};
use crate::emit::blocking;
use crate::source::{self, Input};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

/// Most messages taken from librdkafka in one go before they are handed to the tasks.
pub(super) const STAGE_MAX: usize = 4096;

/// A flush; it ends with the offsets it could not commit (see `Coordinator::refused`).
type FlushTask = JoinHandle<Flushed>;
/// A rewind's slow half: the transaction aborted (or, the producer being unusable, a new one
/// made), then the committed offsets of the rewound partitions read back. Ends with them.
type RewindTask = JoinHandle<Result<TopicPartitionList, WorkerError>>;

#[derive(Default)]
pub(super) struct FlushCounters {
    pub(crate) flushes: u64,
    pub(crate) rewinds: u64,
}

pub(super) struct Coordinator<C = Input> {
    pub consumer: Arc<C>,
    /// Starts partition tasks, flushes and transaction aborts.
    pub background: Arc<dyn Background>,
    pub kafka: Arc<KafkaConfig>,
    pub worker: Arc<WorkerConfig>,
    pub assignment: Arc<Mutex<source::Assignment>>,
    pub tasks: HashMap<i32, partition::Handle>,
    pub inflight: Option<FlushTask>,
    /// A rewind under way, and the partitions it rewinds: their messages are dropped until it
    /// seeks them back to their commits.
    pub rewinding: Option<(RewindTask, BTreeSet<i32>)>,
    /// Barriers cut so far: one per flush started, and one per rewind (it cuts too, by throwing
    /// away everything forwarded before it). See `flush_through`.
    pub cuts: u64,
    /// Messages forwarded since the last barrier.
    pub(crate) batch_msgs: usize,
    /// Messages staged but not yet handed to their tasks.
    pub(crate) staged: usize,
    pub(crate) deadline: Option<tokio::time::Instant>,
    /// The assigned partitions are paused (see the module docs).
    pub(crate) paused: bool,
    pub(crate) counts: FlushCounters,
    pub(crate) watchdog: Watchdog,
    /// Messages received since the watchdog last looked.
    pub(crate) received: bool,
    /// A lag probe in flight for the watchdog, and when the last one started.
    pub(crate) probe: Option<JoinHandle<Option<watchdog::Offsets>>>,
    pub(crate) probed_at: Option<Instant>,
    /// The group membership as librdkafka last reported it.
    pub(crate) group: Arc<source::group::GroupView>,
    /// A cooperative revoke being drained.
    pub(crate) drain: Option<Drain>,
    /// Offsets made durable whose commit the group refused (during a rebalance), by partition:
    /// the next flush commits them too, and an idle worker starts a flush for them alone.
    pub(crate) refused: std::collections::BTreeMap<i32, i64>,
    /// When the last flush ended.
    pub(crate) flushed_at: Instant,
}

/// Revoked partitions on their way back to the group (see `Coordinator::begin_drain`).
pub(super) struct Drain {
    tpl: TopicPartitionList,
    /// On tokio's clock, which tests can move.
    deadline: tokio::time::Instant,
    /// The cut covering everything read for them before the revoke (see `flush_through`).
    goal: u64,
}

/// The flush in flight, if any; never resolves without one.
async fn wait_flush(inflight: &mut Option<FlushTask>) -> Result<Flushed, JoinError> {
    match inflight {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

/// The rewind under way, if any; never resolves without one.
async fn wait_rewind(
    rewinding: &mut Option<(RewindTask, BTreeSet<i32>)>,
) -> Result<Result<TopicPartitionList, WorkerError>, JoinError> {
    match rewinding {
        Some((h, _)) => h.await,
        None => std::future::pending().await,
    }
}

/// Capped doubling back-off for retries that wait on the brokers coming back.
pub(super) struct Backoff(Duration);

impl Backoff {
    pub fn new() -> Self {
        Self(Duration::from_millis(200))
    }

    /// Log the failed attempt; how long to wait before the next.
    pub fn next(&mut self, what: &str, e: &dyn std::fmt::Display) -> Duration {
        let d = self.0;
        tracing::warn!(error = %e, retry_in_ms = d.as_millis() as u64, "{what} failed; retrying");
        self.0 = (d * 2).min(Duration::from_secs(10));
        d
    }
}

/// The assignment bookkeeping; a poisoned one ends the worker.
pub(super) fn lock(
    assignment: &Mutex<source::Assignment>,
) -> Result<MutexGuard<'_, source::Assignment>, WorkerError> {
    Ok(source::lock_assignment(assignment)?)
}

impl<C: GroupConsumer> Coordinator<C> {
    pub fn new(
        consumer: Arc<C>,
        background: Arc<dyn Background>,
        kafka: Arc<KafkaConfig>,
        worker: Arc<WorkerConfig>,
        assignment: Arc<Mutex<source::Assignment>>,
        group: Arc<source::group::GroupView>,
    ) -> Self {
        Self {
            consumer,
            background,
            kafka,
            watchdog: Watchdog::new(Duration::from_millis(worker.watchdog_timeout_ms)),
            worker,
            assignment,
            tasks: HashMap::new(),
            inflight: None,
            rewinding: None,
            cuts: 0,
            batch_msgs: 0,
            staged: 0,
            deadline: None,
            paused: false,
            counts: FlushCounters::default(),
            received: false,
            probe: None,
            probed_at: None,
            group,
            drain: None,
            refused: Default::default(),
            flushed_at: Instant::now(),
        }
    }

    fn input_topic(&self) -> &str {
        &self.kafka.topics.input
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.worker.flush_timeout_ms)
    }

    /// Whether the group has taken this worker in (an assignment, even an empty one, arrived
    /// and was not lost since).
    pub fn member(&self) -> Result<bool, WorkerError> {
        Ok(lock(&self.assignment)?.member)
    }

    /// Partitions assigned now (as the rebalance callback recorded them).
    fn assigned(&self) -> Result<BTreeSet<i32>, WorkerError> {
        Ok(lock(&self.assignment)?.assigned.iter().copied().collect())
    }

    /// What the rebalance callback recorded since the last look: partitions lost are dropped
    /// with their uncommitted work (the next owner restores from the changelog and resumes
    /// from the committed offset); a cooperative revoke starts its drain.
    pub fn rebalanced(&mut self) -> Result<(), WorkerError> {
        let (lost, draining) = {
            let mut a = lock(&self.assignment)?;
            (std::mem::take(&mut a.revoked), a.draining.take())
        };
        for p in lost {
            self.remove(p);
        }
        if let Some(tpl) = draining {
            self.begin_drain(tpl);
        }
        Ok(())
    }

    /// Copy a message into its partition's next chunk (if the partition is still ours and not
    /// being rewound).
    pub fn stage(&mut self, m: &BorrowedMessage<'_>) -> Result<(), WorkerError> {
        self.stage_with(m.partition(), || Raw {
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec),
        })
    }

    /// `stage`, with `raw` copying the message out of librdkafka's buffer only if it is kept.
    pub fn stage_with(&mut self, p: i32, raw: impl FnOnce() -> Raw) -> Result<(), WorkerError> {
        self.received = true;
        if self
            .rewinding
            .as_ref()
            .is_some_and(|(_, parts)| parts.contains(&p))
        {
            // Read again once the rewind has sought the partition back to its commit.
            return Ok(());
        }
        if !lock(&self.assignment)?.assigned.contains(&p) {
            return Ok(());
        }
        let task = self.task(p)?;
        task.staged.push(raw());
        self.staged += 1;
        self.batch_msgs += 1;
        if self.deadline.is_none() {
            self.deadline = Some(
                tokio::time::Instant::now() + Duration::from_millis(self.worker.flush_interval_ms),
            );
        }
        Ok(())
    }

    fn task(&mut self, p: i32) -> Result<&mut partition::Handle, WorkerError> {
        Ok(match self.tasks.entry(p) {
            std::collections::hash_map::Entry::Occupied(t) => t.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(self.background.partition(p)?),
        })
    }

    /// Start a task (and so its state's restore) for every assigned partition that has none:
    /// a partition is restored when it is assigned, not when its first message arrives, so
    /// `/readyz` can wait for it.
    pub(crate) fn spawn_assigned(&mut self) -> Result<(), WorkerError> {
        if self.rewinding.is_some() {
            return Ok(());
        }
        for p in self.assigned()? {
            self.task(p)?;
        }
        Ok(())
    }

    /// Assigned partitions still restoring; a failed restore ends the worker with its cause.
    pub(crate) async fn restoring(&mut self) -> Result<usize, WorkerError> {
        let failed: Vec<i32> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.failed())
            .map(|(p, _)| *p)
            .collect();
        for p in failed {
            // The task keeps its error for the next barrier: ask for it now.
            let (tx, rx) = tokio::sync::oneshot::channel();
            if let Some(t) = self.tasks.get(&p) {
                t.tx.send(partition::Cmd::Barrier(tx))
                    .map_err(|_| WorkerError::TaskGone(p))?;
            }
            rx.await.map_err(|_| WorkerError::TaskGone(p))??;
        }
        let assigned = self.assigned()?;
        Ok(assigned
            .iter()
            .filter(|p| !self.tasks.get(p).is_some_and(partition::Handle::restored))
            .count())
    }

    /// Hand every staged chunk to its task. Never waits: the tasks' queues are unbounded and
    /// the batch size bounds what is in them.
    pub(crate) fn dispatch(&mut self) -> Result<(), WorkerError> {
        for (p, task) in self.tasks.iter_mut() {
            if task.staged.is_empty() {
                continue;
            }
            let chunk = std::mem::take(&mut task.staged);
            task.dirty = true;
            task.tx
                .send(partition::Cmd::Msgs(chunk))
                .map_err(|_| WorkerError::TaskGone(*p))?;
        }
        self.staged = 0;
        Ok(())
    }

    /// After every wake-up of the loop, whatever woke it: a drain moves on, a batch due is
    /// flushed (once the flush in flight is done), and the input is held back or let go.
    pub fn tend(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        self.advance_drain(shutdown)?;
        if self.flush_due() {
            self.flush_through(self.goal(), shutdown)?;
        }
        self.apply_hold()
    }

    /// Whether a flush is wanted now: a batch that is due or full, or, with nothing read,
    /// offsets whose commit was refused a while ago.
    fn flush_due(&self) -> bool {
        let due = self
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d);
        (self.batch_msgs > 0 && (due || self.full()))
            || (!self.refused.is_empty() && self.flushed_at.elapsed() >= Duration::from_secs(1))
    }

    /// A full batch: flush it as soon as the flush in flight is done.
    pub fn full(&self) -> bool {
        self.batch_msgs >= self.worker.batch_max_messages
    }

    /// Whether input must be held back now: during a rewind, or when a second batch filled
    /// while the first is still being flushed (a slow ClickHouse turns into lag, not memory: at
    /// most three batches are ever held). Under a steady load the flush ends before that, and
    /// the input is never paused.
    pub(crate) fn must_hold(&self) -> bool {
        self.rewinding.is_some()
            || self.batch_msgs >= self.worker.batch_max_messages.saturating_mul(2)
    }

    /// Pause or resume every assigned partition so that they match `must_hold`.
    fn apply_hold(&mut self) -> Result<(), WorkerError> {
        let hold = self.must_hold();
        if hold == self.paused {
            return Ok(());
        }
        let mut a = lock(&self.assignment)?;
        let tpl = self.consumer.assignment().map_err(WorkerError::Commit)?;
        let r = if hold {
            self.consumer.pause(&tpl)
        } else {
            self.consumer.resume(&tpl)
        };
        if let Err(e) = r {
            // A partition revoked between the two calls: the next loop tries again.
            tracing::debug!(error = %e, hold, "pausing or resuming the input failed");
            return Ok(());
        }
        a.paused = hold;
        self.paused = hold;
        metrics::gauge!("eddy_input_paused").set(if hold { 1.0 } else { 0.0 });
        Ok(())
    }

    /// The cut that covers every message forwarded so far: the next one if anything was
    /// forwarded (or refused a commit) since the last, else the last (perhaps still in flight).
    pub fn goal(&self) -> u64 {
        if self.batch_msgs > 0 || !self.refused.is_empty() {
            self.cuts + 1
        } else {
            self.cuts
        }
    }

    /// The one way a flush starts, and how every "wait for the flush in flight, then flush"
    /// is written (a batch due, a drain, the final flush): true once cut `goal` (see `goal`)
    /// is covered, everything forwarded before it durable and committed (unless the group
    /// refused the commit), or thrown away by a rewind (then read again from the commit).
    /// Otherwise false, with a flush started if
    /// none was in flight (one at a time) and no rewind under way; the caller calls again once
    /// the flush in flight or the rewind ended (`finished`). Never waits itself.
    pub fn flush_through(
        &mut self,
        goal: u64,
        shutdown: &CancellationToken,
    ) -> Result<bool, WorkerError> {
        // Every cut but the flush in flight is behind us: settled, or thrown away by a rewind.
        let covered = self.cuts - u64::from(self.inflight.is_some());
        if covered >= goal {
            return Ok(true);
        }
        if self.inflight.is_some() || self.rewinding.is_some() {
            return Ok(false);
        }
        if self.batch_msgs == 0 && self.refused.is_empty() {
            // The flush that cleared the refused offsets left nothing to do.
            return Ok(true);
        }
        self.start_flush(shutdown)?;
        Ok(false)
    }

    /// Send every partition with new messages a barrier, then start the flush: it collects
    /// their epochs (all messages forwarded so far, and nothing after) and makes them durable.
    /// Nothing here waits.
    fn start_flush(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let mut waits = Vec::new();
        for (p, task) in self.tasks.iter_mut().filter(|(_, t)| t.dirty) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            task.tx
                .send(partition::Cmd::Barrier(tx))
                .map_err(|_| WorkerError::TaskGone(*p))?;
            task.dirty = false;
            waits.push(rx);
        }
        self.cuts += 1;
        self.batch_msgs = 0;
        self.deadline = None;
        let background = self.background.clone();
        let shutdown = shutdown.clone();
        let carry: Vec<(i32, i64)> = self.refused.iter().map(|(p, o)| (*p, *o)).collect();
        self.inflight = Some(tokio::spawn(async move {
            let mut epochs: Vec<Epoch> = Vec::with_capacity(waits.len());
            for rx in waits {
                // A reply that never comes is a partition revoked meanwhile: its uncommitted
                // work belongs to its next owner.
                if let Ok(epoch) = rx.await {
                    epochs.push(epoch?);
                }
            }
            background.flush(epochs, carry, shutdown).await
        }));
        Ok(())
    }

    /// Wait until the flush in flight or the rewind under way ends, and take its end in (a
    /// failed flush may start a rewind). Never resolves with neither; cancel-safe, so the loop
    /// selects on it beside the consumer.
    pub async fn finished(&mut self) -> Result<(), WorkerError> {
        tokio::select! {
            r = wait_flush(&mut self.inflight) => {
                self.inflight = None;
                self.settle(r)
            }
            r = wait_rewind(&mut self.rewinding) => self.finish_rewind(r),
        }
    }

    /// A finished flush: a transient failure rewinds, anything else fatal ends the worker.
    fn settle(&mut self, r: Result<Flushed, JoinError>) -> Result<(), WorkerError> {
        self.flushed_at = Instant::now();
        match r {
            Ok(Ok(refused)) => {
                self.counts.flushes += 1;
                let assigned = self.assigned()?;
                // Only partitions held since: one that left and came back may have been
                // committed further by its owner in between.
                self.refused = refused
                    .into_iter()
                    .filter(|(p, _)| assigned.contains(p))
                    .collect();
                Ok(())
            }
            Ok(Err(e)) if needs_rewind(&e) => {
                tracing::warn!(error = %e, "flush failed; redoing the batch from the last commit");
                let renew = matches!(&e, WorkerError::Emit(e) if e.needs_new_producer());
                self.start_rewind(renew)
            }
            Ok(Err(e)) => Err(e),
            Err(e) => Err(WorkerError::Join(e)),
        }
    }

    /// `finished`, serving the consumer meanwhile (its commit answers and rebalances), with
    /// the input paused and whatever still arrives dropped: only for the way out, when nothing
    /// read from now on will be processed or committed.
    async fn finished_serving(&mut self) -> Result<(), WorkerError> {
        let consumer = self.consumer.clone();
        if let Ok(tpl) = consumer.assignment() {
            let _ = consumer.pause(&tpl);
        }
        loop {
            tokio::select! {
                r = self.finished() => return r,
                () = consumer.serve() => {}
            }
        }
    }

    /// Flush and commit everything so far before stopping (waiting for the flush in flight
    /// first), the consumer served meanwhile.
    pub async fn flush_all(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let goal = self.goal();
        while !self.flush_through(goal, shutdown)? {
            self.finished_serving().await?;
        }
        Ok(())
    }

    /// A cooperative revoke: what was done for those partitions is flushed and committed (so
    /// their next owner starts exactly there), then they are handed back. The revoked
    /// partitions' later messages are no longer staged (they left `assigned`), so the drain
    /// ends once the flush covering what was forwarded until now is done; `advance_drain`
    /// moves it on from the loop, which keeps polling meanwhile.
    pub fn begin_drain(&mut self, tpl: TopicPartitionList) {
        let goal = self.goal();
        match &mut self.drain {
            Some(d) => {
                for e in tpl.elements() {
                    d.tpl.add_partition(e.topic(), e.partition());
                }
                d.goal = goal;
            }
            None => {
                let deadline = tokio::time::Instant::now()
                    + Duration::from_millis(self.worker.revoke_drain_ms);
                self.drain = Some(Drain {
                    tpl,
                    deadline,
                    goal,
                });
            }
        }
    }

    /// Move a drain on: hand the partitions back once everything read for them is durable and
    /// committed (or a rewind dropped it), or once time ran out.
    fn advance_drain(&mut self, shutdown: &CancellationToken) -> Result<(), WorkerError> {
        let Some(d) = &self.drain else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= d.deadline {
            // A half-done flush leaves deliveries untracked: start over from the last commit
            // rather than commit past anything unacknowledged.
            tracing::warn!(
                revoke_drain_ms = self.worker.revoke_drain_ms,
                "revoked partitions not drained in time; their next owner redoes the \
                 uncommitted batch"
            );
            self.start_rewind(false)?;
            return self.hand_back();
        }
        if self.flush_through(d.goal, shutdown)? {
            self.hand_back()?;
        }
        Ok(())
    }

    fn hand_back(&mut self) -> Result<(), WorkerError> {
        let Some(d) = self.drain.take() else {
            return Ok(());
        };
        let input = self.input_topic().to_string();
        for e in d.tpl.elements_for_topic(&input) {
            self.remove(e.partition());
        }
        if let Err(e) = self.consumer.incremental_unassign(&d.tpl) {
            tracing::warn!(error = %e, "handing back revoked partitions failed");
        }
        Ok(())
    }

    /// Stopping with a drain pending: everything is committed now, hand the partitions back.
    pub(crate) fn hand_back_on_exit(&mut self) -> Result<(), WorkerError> {
        self.hand_back()
    }

    pub(crate) fn remove(&mut self, p: i32) {
        self.refused.remove(&p);
        if self.tasks.remove(&p).is_some() {
            metrics::counter!("eddy_partitions_revoked_total").increment(1);
        }
    }

    /// Throw away everything since the last commit and read it again; state comes back from
    /// the changelog (read_committed, so it matches the committed offsets exactly). Only the
    /// bookkeeping happens here; the slow half (aborting the transaction, reading the commits
    /// back) runs as a task while the coordinator keeps polling with the input paused.
    fn start_rewind(&mut self, renew: bool) -> Result<(), WorkerError> {
        if let Some(h) = self.inflight.take() {
            // Its current librdkafka call is bounded; it lets go of the emitter after it.
            h.abort();
        }
        let mut parts: BTreeSet<i32> = self.tasks.keys().copied().collect();
        parts.extend(self.assigned()?);
        if let Some((h, earlier)) = self.rewinding.take() {
            // A rewind on top of one under way: one rewind covering both.
            h.abort();
            parts.extend(earlier);
        }
        self.tasks.clear();
        self.refused.clear();
        self.cuts += 1;
        self.batch_msgs = 0;
        self.staged = 0;
        self.deadline = None;
        self.counts.rewinds += 1;
        metrics::counter!("eddy_rewinds_total").increment(1);
        let background = self.background.clone();
        let consumer = self.consumer.clone();
        let topic = self.input_topic().to_string();
        let timeout = self.timeout();
        let list = parts.clone();
        let task = tokio::spawn(async move {
            background.abort(renew).await?;
            // Where the rewound partitions start again, retried while the brokers are away.
            let mut tpl = TopicPartitionList::new();
            for p in &list {
                tpl.add_partition(&topic, *p);
            }
            let mut backoff = Backoff::new();
            loop {
                let (c, t) = (consumer.clone(), tpl.clone());
                let committed =
                    tokio::task::spawn_blocking(move || c.committed_offsets(t, timeout))
                        .await
                        .map_err(WorkerError::Join)?;
                match committed {
                    Ok(c) => return Ok(c),
                    Err(e) => {
                        tokio::time::sleep(backoff.next("reading the committed offsets", &e)).await
                    }
                }
            }
        });
        self.rewinding = Some((task, parts));
        Ok(())
    }

    /// The rewind's slow half is done: seek the partitions still ours back to their commits.
    /// Messages fetched before the seek are dropped by librdkafka; the next ones are read
    /// again from the commit.
    fn finish_rewind(
        &mut self,
        r: Result<Result<TopicPartitionList, WorkerError>, JoinError>,
    ) -> Result<(), WorkerError> {
        let committed = r.map_err(WorkerError::Join)??;
        self.rewinding = None;
        let assigned = self.assigned()?;
        let topic = self.input_topic().to_string();
        let mut seek = TopicPartitionList::new();
        for e in committed.elements_for_topic(&topic) {
            if !assigned.contains(&e.partition()) {
                continue;
            }
            let off = match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            seek.add_partition_offset(&topic, e.partition(), off)
                .map_err(WorkerError::Commit)?;
        }
        let sought_count = seek.count();
        if sought_count > 0 {
            let consumer = self.consumer.clone();
            let timeout = self.timeout();
            let sought = blocking(|| consumer.seek_partitions(seek, timeout))
                .map_err(WorkerError::Commit)?;
            for e in sought.elements() {
                if let Err(err) = e.error() {
                    // Revoked since: its next owner starts from the commit anyway.
                    tracing::warn!(partition = e.partition(), error = %err, "seeking back to the commit failed");
                }
            }
        }
        tracing::info!(
            partitions = sought_count,
            "rewound to the last commit; reading on"
        );
        Ok(())
    }

    /// One look of the watchdog; `holding` is true while waiting on purpose.
    pub(crate) fn watch(&mut self, holding: bool) -> Result<Option<String>, WorkerError> {
        let done = self.probe.as_ref().is_some_and(JoinHandle::is_finished);
        let probe = if done {
            self.probe
                .take()
                .and_then(futures::FutureExt::now_or_never)
                .and_then(Result::ok)
                .flatten()
        } else {
            None
        };
        let o = Observation {
            now: Instant::now(),
            assigned: self.assigned()?.into_iter().collect(),
            received: std::mem::take(&mut self.received),
            holding,
            probe,
        };
        match self.watchdog.observe(&o) {
            Verdict::Fine => {}
            Verdict::Probe => {
                let due = self
                    .probed_at
                    .is_none_or(|t| t.elapsed() >= watchdog::IDLE_BEFORE_PROBE);
                if self.probe.is_none() && due {
                    self.probed_at = Some(Instant::now());
                    let kafka = self.kafka.clone();
                    self.probe = Some(tokio::task::spawn_blocking(move || {
                        watchdog::probe(&kafka, Duration::from_secs(5))
                    }));
                }
            }
            Verdict::Stuck(why) => return Ok(Some(why)),
        }
        metrics::gauge!("eddy_watchdog_stuck_seconds").set(
            self.watchdog
                .stuck_since()
                .map_or(0.0, |t| t.elapsed().as_secs_f64()),
        );
        Ok(None)
    }

    /// The progress line's numbers.
    pub fn progress(&self, counters: &Counters) -> Result<(), WorkerError> {
        let open: usize = self.tasks.values().map(partition::Handle::open_runs).sum();
        metrics::gauge!("eddy_open_runs").set(open as f64);
        let group = self.group.last()?.unwrap_or_default();
        let assigned = self.assigned()?.len();
        tracing::info!(
            events = Counters::get(&counters.events),
            outputs = Counters::get(&counters.outputs),
            dead_letters = Counters::get(&counters.dead_letters),
            flushes = self.counts.flushes,
            rewinds = self.counts.rewinds,
            partitions = assigned,
            group = %format_args!("{}/{}", group.state, group.join_state),
            paused = self.paused,
            open_runs = open,
            "progress"
        );
        Ok(())
    }
}

/// Whether a failed flush is survived by going back to the last commit: the brokers were slow
/// or away, or the transaction must be aborted. Anything else ends the worker (its restart
/// resumes from the last commit).
pub(super) fn needs_rewind(e: &WorkerError) -> bool {
    matches!(e, WorkerError::Emit(e) if e.is_transient() || e.needs_new_producer())
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
