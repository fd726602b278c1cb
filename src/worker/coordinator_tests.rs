//! The coordinator on fakes: a group consumer that records what it is asked, flushes that end
//! when the test says so, and real partition tasks (restored as of the fake group's commits,
//! sending to a `FakeSink`). Each test drives the coordinator as the worker loop does
//! (`Harness::round`) and checks what its barriers, drains and rewinds hand on. Time is
//! paused: a deadline passes when the test moves the clock.
use super::{lock, Coordinator};
use crate::config::{KafkaConfig, WorkerConfig};
use crate::emit::EmitError;
use crate::source::{self, restore::Restored};
use crate::worker::fakes::{raw, row_offsets, shared, FakeSink};
use crate::worker::partition::{self, Epoch, Shared};
use crate::worker::seams::{Background, Flushed, GroupConsumer};
use crate::worker::{DeferRevokes, WorkerError};
use futures::future::BoxFuture;
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What the fakes were asked, in order: the order of flushes, hand-backs and seeks is read
/// off it.
type Log = Arc<Mutex<Vec<String>>>;

/// One seek: partitions and their offsets (`None`: the beginning).
type Seek = Vec<(i32, Option<i64>)>;

fn note(log: &Log, what: impl Into<String>) {
    log.lock().unwrap().push(what.into());
}

fn partitions(tpl: &TopicPartitionList) -> Vec<i32> {
    let mut v: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
    v.sort_unstable();
    v
}

/// librdkafka's side of the group: its own view of the assignment, the group's committed
/// offsets, and what it was asked.
struct FakeConsumer {
    topic: String,
    log: Log,
    assigned: Mutex<BTreeSet<i32>>,
    paused: Mutex<BTreeSet<i32>>,
    committed: Mutex<BTreeMap<i32, i64>>,
    /// The partitions of each committed-offsets request.
    asked: Mutex<Vec<Vec<i32>>>,
    sought: Mutex<Vec<Seek>>,
    unassigned: Mutex<Vec<Vec<i32>>>,
}

impl FakeConsumer {
    fn tpl(&self, parts: impl IntoIterator<Item = i32>) -> TopicPartitionList {
        let mut t = TopicPartitionList::new();
        for p in parts {
            t.add_partition(&self.topic, p);
        }
        t
    }

    fn committed(&self) -> BTreeMap<i32, i64> {
        self.committed.lock().unwrap().clone()
    }

    fn asked(&self) -> Vec<Vec<i32>> {
        self.asked.lock().unwrap().clone()
    }

    fn sought(&self) -> Vec<Seek> {
        self.sought.lock().unwrap().clone()
    }

    fn unassigned(&self) -> Vec<Vec<i32>> {
        self.unassigned.lock().unwrap().clone()
    }

    fn is_paused(&self, p: i32) -> bool {
        self.paused.lock().unwrap().contains(&p)
    }
}

impl GroupConsumer for FakeConsumer {
    fn assignment(&self) -> KafkaResult<TopicPartitionList> {
        Ok(self.tpl(self.assigned.lock().unwrap().iter().copied()))
    }

    fn pause(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        self.paused.lock().unwrap().extend(partitions(tpl));
        Ok(())
    }

    fn resume(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        let mut paused = self.paused.lock().unwrap();
        for p in partitions(tpl) {
            paused.remove(&p);
        }
        Ok(())
    }

    fn incremental_unassign(&self, tpl: &TopicPartitionList) -> KafkaResult<()> {
        let parts = partitions(tpl);
        note(&self.log, format!("unassign {parts:?}"));
        let mut assigned = self.assigned.lock().unwrap();
        for p in &parts {
            assigned.remove(p);
        }
        self.unassigned.lock().unwrap().push(parts);
        Ok(())
    }

    fn committed_offsets(
        &self,
        tpl: TopicPartitionList,
        _timeout: Duration,
    ) -> KafkaResult<TopicPartitionList> {
        let parts = partitions(&tpl);
        self.asked.lock().unwrap().push(parts.clone());
        let committed = self.committed();
        let mut out = TopicPartitionList::new();
        for p in parts {
            // librdkafka's answer for a partition never committed.
            let o = committed
                .get(&p)
                .map_or(Offset::Invalid, |o| Offset::Offset(*o));
            out.add_partition_offset(&self.topic, p, o)?;
        }
        Ok(out)
    }

    fn seek_partitions(
        &self,
        tpl: TopicPartitionList,
        _timeout: Duration,
    ) -> KafkaResult<TopicPartitionList> {
        let seek: Seek = tpl
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => (e.partition(), Some(o)),
                Offset::Beginning => (e.partition(), None),
                other => panic!("seek to {other:?}"),
            })
            .collect();
        note(&self.log, format!("seek {seek:?}"));
        self.sought.lock().unwrap().push(seek);
        Ok(tpl)
    }

    async fn serve(&self) {
        // No messages, and nothing of the group's to answer.
        std::future::pending().await
    }
}

/// A flush the coordinator started, waiting for the test to end it.
struct FlushCall {
    epochs: Vec<Epoch>,
    reply: oneshot::Sender<Flushed>,
}

impl FlushCall {
    /// What each partition's epoch covers: its next offset and the input offsets of its rows.
    fn covers(&self) -> BTreeMap<i32, (Option<i64>, Vec<i64>)> {
        self.epochs
            .iter()
            .map(|e| (e.partition, (e.next_offset, row_offsets(e))))
            .collect()
    }

    /// The flush succeeds: its offsets are the group's commits.
    fn commit(self, consumer: &FakeConsumer) {
        let mut committed = consumer.committed.lock().unwrap();
        for e in &self.epochs {
            if let Some(n) = e.next_offset {
                committed.insert(e.partition, n);
            }
        }
        let _ = self.reply.send(Ok(Vec::new()));
    }

    /// The brokers did not acknowledge in time: a transient failure, redone from the commit.
    fn fail(self) {
        let e = EmitError::Timeout {
            pending: 1,
            waited_ms: 1,
        };
        let _ = self.reply.send(Err(WorkerError::Emit(e)));
    }
}

/// What the coordinator starts: real partition tasks, and flushes and aborts the test ends.
struct FakeBackground {
    shared: Arc<Shared>,
    consumer: Arc<FakeConsumer>,
    log: Log,
    flushes: mpsc::UnboundedSender<FlushCall>,
    started: Mutex<usize>,
    /// Aborts that wait until the test lets them end (the brokers away), next first.
    held_aborts: Mutex<VecDeque<oneshot::Receiver<()>>>,
    aborts: Mutex<usize>,
}

impl Background for FakeBackground {
    fn partition(&self, p: i32) -> Result<partition::Handle, WorkerError> {
        // The changelog's meta record says what the group's commit says.
        let applied = self.consumer.committed().get(&p).copied();
        Ok(partition::Handle::spawn(
            self.shared.clone(),
            p,
            FakeSink::default(),
            move || {
                Ok(Restored {
                    applied_offset: applied,
                    ..Restored::default()
                })
            },
        ))
    }

    fn flush(
        &self,
        epochs: Vec<Epoch>,
        _carry: Vec<(i32, i64)>,
        _shutdown: CancellationToken,
    ) -> BoxFuture<'static, Flushed> {
        let n = {
            let mut started = self.started.lock().unwrap();
            *started += 1;
            *started
        };
        note(&self.log, format!("flush {n} started"));
        let (reply, rx) = oneshot::channel();
        self.flushes
            .send(FlushCall { epochs, reply })
            .expect("the test holds the receiver");
        let log = self.log.clone();
        Box::pin(async move {
            match rx.await {
                Ok(r) => {
                    note(&log, format!("flush {n} ended"));
                    r
                }
                // Never answered: a flush stuck in a Kafka wait.
                Err(_) => std::future::pending().await,
            }
        })
    }

    fn abort(&self, _renew: bool) -> BoxFuture<'static, Result<(), WorkerError>> {
        *self.aborts.lock().unwrap() += 1;
        let held = self.held_aborts.lock().unwrap().pop_front();
        Box::pin(async move {
            if let Some(gate) = held {
                let _ = gate.await;
            }
            Ok(())
        })
    }
}

struct Harness {
    co: Coordinator<FakeConsumer>,
    consumer: Arc<FakeConsumer>,
    background: Arc<FakeBackground>,
    flushes: mpsc::UnboundedReceiver<FlushCall>,
    log: Log,
    shutdown: CancellationToken,
}

impl Harness {
    fn new() -> Self {
        let worker = WorkerConfig::default();
        let kafka = Arc::new(KafkaConfig::default());
        let log = Log::default();
        let consumer = Arc::new(FakeConsumer {
            topic: kafka.topics.input.clone(),
            log: log.clone(),
            assigned: Mutex::default(),
            paused: Mutex::default(),
            committed: Mutex::default(),
            asked: Mutex::default(),
            sought: Mutex::default(),
            unassigned: Mutex::default(),
        });
        let (tx, flushes) = mpsc::unbounded_channel();
        let background = Arc::new(FakeBackground {
            shared: shared(&worker),
            consumer: consumer.clone(),
            log: log.clone(),
            flushes: tx,
            started: Mutex::new(0),
            held_aborts: Mutex::default(),
            aborts: Mutex::new(0),
        });
        // While the loop runs, revokes wait for its drain (`DeferRevokes`).
        let assignment = Arc::new(Mutex::new(source::Assignment {
            defer_revokes: true,
            ..source::Assignment::default()
        }));
        let co = Coordinator::new(
            consumer.clone(),
            background.clone(),
            kafka,
            Arc::new(worker),
            assignment,
            Arc::default(),
        );
        Self {
            co,
            consumer,
            background,
            flushes,
            log,
            shutdown: CancellationToken::new(),
        }
    }

    /// The rebalance callback, assigning.
    fn assign(&self, parts: &[i32]) {
        lock(&self.co.assignment).unwrap().on_assign(parts);
        self.consumer.assigned.lock().unwrap().extend(parts);
    }

    /// The rebalance callback, revoking cooperatively: the partitions wait for the drain.
    fn revoke(&self, parts: &[i32]) {
        let tpl = self.consumer.tpl(parts.iter().copied());
        let deferred = lock(&self.co.assignment)
            .unwrap()
            .on_revoke(parts, &tpl, true);
        assert!(
            deferred,
            "a cooperative revoke waits for the running worker"
        );
    }

    /// The rebalance callback, the assignment lost: the partitions are gone at once.
    fn lose(&self, parts: &[i32]) {
        let tpl = self.consumer.tpl(parts.iter().copied());
        lock(&self.co.assignment)
            .unwrap()
            .on_revoke(parts, &tpl, false);
        let mut assigned = self.consumer.assigned.lock().unwrap();
        for p in parts {
            assigned.remove(p);
        }
    }

    /// One round of the worker loop (`super::super::run`) after a wake-up, in its order, with
    /// `msgs` (partition, offset) received.
    fn round(&mut self, msgs: &[(i32, i64)]) -> Result<(), WorkerError> {
        self.co.rebalanced()?;
        for &(p, o) in msgs {
            self.co.stage_with(p, || raw(p, o))?;
        }
        self.co.dispatch()?;
        self.co.spawn_assigned()?;
        self.co.tend(&self.shutdown)
    }

    /// The loop woken by the end of the flush in flight or of the rewind.
    async fn finished(&mut self) -> Result<(), WorkerError> {
        soon("the end of a flush or rewind", self.co.finished()).await?;
        self.round(&[])
    }

    /// A batch due: flush everything forwarded so far (once the flush in flight is done).
    fn flush_due(&mut self) -> Result<bool, WorkerError> {
        let goal = self.co.goal();
        self.co.flush_through(goal, &self.shutdown)
    }

    /// The flush started last, once its barriers were answered (the tasks run meanwhile).
    async fn next_flush(&mut self) -> FlushCall {
        soon("a flush", self.flushes.recv()).await.expect("a flush")
    }

    /// The next abort waits until the returned sender is used or dropped.
    fn hold_next_abort(&self) -> oneshot::Sender<()> {
        let (tx, rx) = oneshot::channel();
        self.background.held_aborts.lock().unwrap().push_back(rx);
        tx
    }

    fn position(&self, what: &str) -> usize {
        let log = self.log.lock().unwrap();
        log.iter()
            .position(|l| l == what)
            .unwrap_or_else(|| panic!("no {what:?} in {log:?}"))
    }

    fn revoke_drain(&self) -> Duration {
        Duration::from_millis(self.co.worker.revoke_drain_ms)
    }
}

/// `fut`, or a failure saying what never happened: with time paused, the clock jumps to the
/// limit as soon as nothing else can run.
async fn soon<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(3600), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} never happened"))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn covers(entries: &[(i32, i64, &[i64])]) -> BTreeMap<i32, (Option<i64>, Vec<i64>)> {
    entries
        .iter()
        .map(|(p, next, rows)| (*p, (Some(*next), rows.to_vec())))
        .collect()
}

#[test]
fn a_flush_takes_every_dirty_partitions_epoch_with_everything_forwarded_before_it_and_nothing_after(
) {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0, 1, 2]);
        h.round(&[(0, 0), (0, 1), (0, 2), (1, 10), (1, 11)])
            .unwrap();
        // The tasks have not run yet: the barriers queue behind the messages handed over.
        assert!(!h.flush_due().unwrap());
        // Handed over after the barriers: the next flush's.
        h.round(&[(0, 3), (1, 12)]).unwrap();
        let first = h.next_flush().await;
        // Partition 2 received nothing: no barrier, no epoch.
        assert_eq!(
            first.covers(),
            covers(&[(0, 3, &[0, 1, 2]), (1, 12, &[10, 11])])
        );
        // One flush at a time: the next batch waits for this one.
        assert!(!h.flush_due().unwrap());
        first.commit(&h.consumer);
        h.finished().await.unwrap();
        assert!(!h.flush_due().unwrap());
        let second = h.next_flush().await;
        assert_eq!(second.covers(), covers(&[(0, 4, &[3]), (1, 13, &[12])]));
        assert!(h.position("flush 1 ended") < h.position("flush 2 started"));
    });
}

#[test]
fn a_cooperative_revoke_waits_for_the_flush_in_flight_then_one_more_flush_then_hands_back() {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0, 1]);
        h.round(&[(0, 0), (0, 1), (1, 0), (1, 1)]).unwrap();
        h.flush_due().unwrap();
        let in_flight = h.next_flush().await;
        // Read while that flush runs, before the revoke.
        h.round(&[(0, 2), (1, 2), (1, 3)]).unwrap();
        h.revoke(&[1]);
        // Fetched after the revoke: partition 1 is no longer ours.
        h.round(&[(0, 3), (1, 4)]).unwrap();
        assert!(h.consumer.unassigned().is_empty());
        in_flight.commit(&h.consumer);
        h.finished().await.unwrap();
        // The drain's own flush: everything read for partition 1 before the revoke.
        let drain = h.next_flush().await;
        assert_eq!(drain.covers(), covers(&[(0, 4, &[2, 3]), (1, 4, &[2, 3])]));
        assert!(h.consumer.unassigned().is_empty());
        // The partition kept goes on receiving; the drain does not wait for that.
        h.round(&[(0, 4)]).unwrap();
        drain.commit(&h.consumer);
        h.finished().await.unwrap();
        assert_eq!(h.consumer.unassigned(), vec![vec![1]]);
        assert!(h.position("flush 2 ended") < h.position("unassign [1]"));
        // Its next owner starts right after the last message read here.
        assert_eq!(h.consumer.committed().get(&1), Some(&4));
        assert!(!h.co.tasks.contains_key(&1));
        assert!(h.co.tasks.contains_key(&0));
        assert!(h.co.drain.is_none());
        assert_eq!(h.co.counts.rewinds, 0);
    });
}

#[test]
fn a_drain_past_revoke_drain_ms_rewinds_and_hands_back_uncommitted() {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0, 1]);
        h.round(&[(0, 0), (1, 0)]).unwrap();
        h.flush_due().unwrap();
        // Never answered: stuck in a Kafka wait.
        let mut stuck = h.next_flush().await;
        h.revoke(&[1]);
        h.round(&[]).unwrap();
        tokio::time::advance(h.revoke_drain() - Duration::from_millis(1)).await;
        h.round(&[]).unwrap();
        assert!(h.consumer.unassigned().is_empty());
        assert_eq!(h.co.counts.rewinds, 0);
        tokio::time::advance(Duration::from_millis(1)).await;
        h.round(&[]).unwrap();
        assert_eq!(h.consumer.unassigned(), vec![vec![1]]);
        assert_eq!(h.co.counts.rewinds, 1);
        // The stuck flush is given up: it commits nothing, ever.
        soon("giving the stuck flush up", stuck.reply.closed()).await;
        assert!(h.co.inflight.is_none());
        assert!(
            h.consumer.is_paused(0),
            "input held back until the rewind is done"
        );
        h.finished().await.unwrap();
        assert!(h.consumer.committed().is_empty());
        assert_eq!(h.consumer.asked(), vec![vec![0, 1]]);
        // Never committed: partition 0 is read again from its beginning; 1 is not ours.
        assert_eq!(h.consumer.sought(), vec![vec![(0, None)]]);
        assert!(!h.consumer.is_paused(0));
    });
}

#[test]
fn a_failed_flush_throws_the_batch_away_and_restarts_from_the_commits_of_partitions_still_assigned()
{
    rt().block_on(async {
        let mut h = Harness::new();
        h.consumer
            .committed
            .lock()
            .unwrap()
            .extend([(0, 100), (1, 200)]);
        h.assign(&[0, 1, 2]);
        h.round(&[(0, 100), (0, 101), (1, 200), (2, 0)]).unwrap();
        h.flush_due().unwrap();
        let failing = h.next_flush().await;
        // The next batch, read while the flush runs.
        h.round(&[(0, 102)]).unwrap();
        failing.fail();
        h.finished().await.unwrap();
        assert_eq!(h.co.counts.rewinds, 1);
        assert!(h.co.tasks.is_empty(), "state since the commit goes too");
        assert_eq!(h.co.batch_msgs, 0);
        assert!((0..3).all(|p| h.consumer.is_paused(p)));
        // Fetched before the seek: dropped, read again after it.
        h.round(&[(0, 103), (2, 1)]).unwrap();
        assert!(h.co.tasks.is_empty());
        assert_eq!(h.co.batch_msgs, 0);
        h.lose(&[1]);
        h.finished().await.unwrap();
        assert_eq!(h.consumer.asked(), vec![vec![0, 1, 2]]);
        // Partition 1 left meanwhile: its position is not ours to move.
        assert_eq!(h.consumer.sought(), vec![vec![(0, Some(100)), (2, None)]]);
        assert!(!h.consumer.is_paused(0) && !h.consumer.is_paused(2));
        // Read again from the commits, on state restored as of them.
        h.round(&[(0, 100), (0, 101), (0, 102), (0, 103), (2, 0), (2, 1)])
            .unwrap();
        h.flush_due().unwrap();
        let redo = h.next_flush().await;
        assert_eq!(
            redo.covers(),
            covers(&[(0, 104, &[100, 101, 102, 103]), (2, 2, &[0, 1])])
        );
    });
}

#[test]
fn a_rewind_on_top_of_a_rewind_covers_both() {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0, 1]);
        h.round(&[(0, 0), (1, 0)]).unwrap();
        h.flush_due().unwrap();
        // The first rewind's abort waits: the brokers are away.
        let mut brokers_away = h.hold_next_abort();
        h.next_flush().await.fail();
        h.finished().await.unwrap();
        assert_eq!(h.co.counts.rewinds, 1);
        // Meanwhile partition 1 is lost, and partitions 2 and 3 arrive and are read (they are
        // not being rewound)...
        h.lose(&[1]);
        h.assign(&[2, 3]);
        h.round(&[(0, 1), (2, 0), (3, 0)]).unwrap();
        assert_eq!(
            h.co.tasks.keys().copied().collect::<BTreeSet<_>>(),
            [2, 3].into()
        );
        // ...and 3 is revoked: its drain cannot flush during the rewind, and times out.
        h.revoke(&[3]);
        h.round(&[]).unwrap();
        tokio::time::advance(h.revoke_drain()).await;
        h.round(&[]).unwrap();
        assert_eq!(h.co.counts.rewinds, 2);
        assert_eq!(h.consumer.unassigned(), vec![vec![3]]);
        soon("giving the first rewind up", brokers_away.closed()).await;
        // Partition 1 comes back before the second rewind is done: it was rewound by the first,
        // never sought back, so it waits for the second's seek too.
        h.assign(&[1]);
        h.round(&[(1, 0), (2, 1)]).unwrap();
        assert!(h.co.tasks.is_empty());
        h.finished().await.unwrap();
        assert_eq!(*h.background.aborts.lock().unwrap(), 2);
        // One rewind, covering the first's partitions and its own.
        assert_eq!(h.consumer.asked(), vec![vec![0, 1, 2, 3]]);
        assert_eq!(
            h.consumer.sought(),
            vec![vec![(0, None), (1, None), (2, None)]]
        );
        assert!(h.consumer.committed().is_empty());
        assert_eq!(
            h.co.tasks.keys().copied().collect::<BTreeSet<_>>(),
            [0, 1, 2].into()
        );
    });
}

#[test]
fn the_final_flush_waits_for_the_flush_in_flight_then_flushes_the_rest() {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0]);
        h.round(&[(0, 0), (0, 1)]).unwrap();
        h.flush_due().unwrap();
        let in_flight = h.next_flush().await;
        h.round(&[(0, 2)]).unwrap();
        let Harness {
            co,
            consumer,
            flushes,
            ..
        } = &mut h;
        let stop = CancellationToken::new();
        let answer = async {
            in_flight.commit(consumer);
            let last = flushes.recv().await.expect("a final flush");
            assert_eq!(last.covers(), covers(&[(0, 3, &[2])]));
            last.commit(consumer);
        };
        let (r, ()) = soon("the final flush", async {
            tokio::join!(co.flush_all(&stop), answer)
        })
        .await;
        r.unwrap();
        assert_eq!(h.consumer.committed(), BTreeMap::from([(0, 3)]));
        assert!(h.position("flush 1 ended") < h.position("flush 2 started"));
        assert!(h.co.inflight.is_none());
    });
}

/// A thread panics while holding `m`, as a panic anywhere under its lock would.
fn poison<T: Send + 'static>(m: &Arc<Mutex<T>>) {
    let m = m.clone();
    let panicked = std::thread::spawn(move || {
        let _held = m.lock().unwrap();
        panic!("poisoning the lock on purpose");
    })
    .join();
    assert!(panicked.is_err());
}

#[test]
fn a_poisoned_assignment_ends_the_worker_with_an_error_not_an_empty_assignment() {
    rt().block_on(async {
        let mut h = Harness::new();
        h.assign(&[0]);
        h.round(&[(0, 0)]).unwrap();
        poison(&h.co.assignment);
        let e = h.round(&[(0, 1)]).unwrap_err();
        assert!(matches!(e, WorkerError::Poisoned(_)), "{e}");
        let why = e.to_string();
        assert!(
            why.contains("partition assignment") && why.contains("poisoned"),
            "{why}"
        );
        // Wherever the loop looks, not "no partition" or "nothing revoked".
        assert!(matches!(h.co.member(), Err(WorkerError::Poisoned(_))));
        assert!(matches!(
            h.co.stage_with(0, || raw(0, 1)),
            Err(WorkerError::Poisoned(_))
        ));
        assert!(matches!(
            h.co.progress(&partition::Counters::default()),
            Err(WorkerError::Poisoned(_))
        ));
        assert!(matches!(
            DeferRevokes::on(&h.co.assignment),
            Err(WorkerError::Poisoned(_))
        ));
    });
}
