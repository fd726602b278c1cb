//! The commit rule on fakes: every step of a flush is made to fail in turn, in both delivery
//! modes, and what reached the outside world (ClickHouse rows, records a `read_committed`
//! reader sees, committed offsets) is checked against what the rule promises.
use super::{flush, Committed, Io, Retry};
use crate::admin::Health;
use crate::emit::EmitError;
use crate::sink::SinkError;
use crate::sink::{Batch, StepRow};
use crate::worker::coordinator::needs_rewind;
use crate::worker::partition::Epoch;
use crate::worker::seams::{ChangelogSink, OffsetCommitter, OutputSink, RowSink};
use crate::worker::WorkerError;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const INPUT: &str = "input";

/// Every call any fake received, in order: the order of the commit rule is read off it.
type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: impl Into<String>) {
    log.lock().unwrap().push(what.into());
}

/// ClickHouse: keeps the source offsets of the step rows it acknowledged; fails the first
/// `failures` inserts, and never answers the first `hangs` after those (a hung server).
struct FakeClickHouse {
    log: Log,
    failures: AtomicUsize,
    hangs: AtomicUsize,
    rows: Mutex<Vec<(i32, i64)>>,
}

impl FakeClickHouse {
    fn new(log: &Log, failures: usize) -> Self {
        Self {
            log: log.clone(),
            failures: AtomicUsize::new(failures),
            hangs: AtomicUsize::new(0),
            rows: Mutex::new(Vec::new()),
        }
    }

    fn rows(&self) -> Vec<(i32, i64)> {
        self.rows.lock().unwrap().clone()
    }
}

impl RowSink for FakeClickHouse {
    fn insert_all(&self, batches: &[Batch]) -> impl Future<Output = Result<(), SinkError>> + Send {
        let take = |n: &AtomicUsize| {
            n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        };
        let failed = take(&self.failures);
        let hung = !failed && take(&self.hangs);
        if hung {
            note(&self.log, "insert hung");
        }
        let result = if failed {
            note(&self.log, "insert failed");
            Err(SinkError::NotMigrated {
                db: "fake".into(),
                pending: vec!["ClickHouse is down".into()],
            })
        } else {
            note(&self.log, "insert");
            self.rows.lock().unwrap().extend(
                batches
                    .iter()
                    .flat_map(|b| &b.steps)
                    .map(|r| (r.src_partition, r.src_offset)),
            );
            Ok(())
        };
        async move {
            if hung {
                std::future::pending::<()>().await;
            }
            result
        }
    }
}

/// Where a fake Kafka fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    Nothing,
    /// Sending a held-back output at the start of the flush (exactly_once).
    Absorb,
    /// An output or dead letter not acknowledged (librdkafka gave up on it).
    OutputAck,
    ChangelogSend,
    ChangelogAck,
    /// at_least_once: the group refuses the commit; exactly_once: the transaction's commit
    /// fails with an abortable error.
    Commit,
    /// The brokers never acknowledge the outputs (at_least_once) / the changelog.
    AckHangs,
    /// The group coordinator never answers the offset commit (at_least_once).
    CommitHangs,
    /// An output the broker refuses for what it is (too large): no retry can help.
    OutputRefused,
}

/// A record as a `read_committed` reader would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rec {
    Output(String),
    Changelog(i32, String),
}

/// What a partition task hands over: outputs already sent (at_least_once) or held back
/// (exactly_once).
#[derive(Default)]
struct FakeOutbox(Vec<String>);

/// The producer and the consumer group. In at_least_once a record is visible once sent (and
/// durable once acknowledged); in exactly_once only when its transaction commits.
struct FakeKafka {
    log: Log,
    transactional: bool,
    fail: Fail,
    /// Sent, not yet acknowledged (at_least_once) or in the open transaction (exactly_once).
    in_flight: Vec<Rec>,
    /// Acknowledged (at_least_once) or committed (exactly_once).
    durable: Vec<Rec>,
    offsets: BTreeMap<i32, i64>,
}

impl FakeKafka {
    fn new(log: &Log, transactional: bool, fail: Fail) -> Self {
        Self {
            log: log.clone(),
            transactional,
            fail,
            in_flight: Vec::new(),
            durable: Vec::new(),
            offsets: BTreeMap::new(),
        }
    }

    /// What a `read_committed` reader of the output and changelog topics sees.
    fn visible(&self) -> Vec<Rec> {
        let mut v = self.durable.clone();
        if !self.transactional {
            v.extend(self.in_flight.iter().cloned());
        }
        v
    }

    fn changelog_visible(&self) -> usize {
        self.visible()
            .iter()
            .filter(|r| matches!(r, Rec::Changelog(..)))
            .count()
    }

    fn outputs_visible(&self) -> usize {
        self.visible()
            .iter()
            .filter(|r| matches!(r, Rec::Output(_)))
            .count()
    }

    /// The broker-side end of a failed transaction (or the next instance fencing this one).
    fn abort(&mut self) {
        note(&self.log, "abort");
        self.in_flight.clear();
    }

    fn failure(&self, at: Fail) -> bool {
        if self.fail == at {
            note(&self.log, format!("{at:?} failed"));
        }
        self.fail == at
    }

    fn ack_all(&mut self) {
        self.durable.append(&mut self.in_flight);
    }
}

fn delivery_error() -> EmitError {
    EmitError::Delivery {
        topic: "fake".into(),
        source: KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
    }
}

fn refused_error() -> EmitError {
    EmitError::Delivery {
        topic: "fake".into(),
        source: KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
    }
}

/// A wait that never ends, given up at the deadline the flush passed, as the real seam does.
async fn or_hang<T>(hang: bool, r: T, deadline: Duration) -> Result<T, EmitError> {
    if hang {
        let never = std::future::pending::<()>();
        let _ = tokio::time::timeout(deadline, never).await;
        return Err(EmitError::Timeout {
            pending: 1,
            waited_ms: deadline.as_millis() as u64,
        });
    }
    Ok(r)
}

impl OutputSink for FakeKafka {
    type Outbox = FakeOutbox;

    fn absorb(&mut self, outbox: FakeOutbox) -> Result<(), EmitError> {
        if self.transactional && !outbox.0.is_empty() && self.failure(Fail::Absorb) {
            return Err(delivery_error());
        }
        note(&self.log, "absorb");
        self.in_flight.extend(outbox.0.into_iter().map(Rec::Output));
        Ok(())
    }

    fn is_transactional(&self) -> bool {
        self.transactional
    }

    fn outputs_acknowledged(
        &mut self,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), EmitError>> + Send {
        let hang = self.failure(Fail::AckHangs);
        let r = if self.failure(Fail::OutputAck) {
            Err(delivery_error())
        } else if self.failure(Fail::OutputRefused) {
            Err(refused_error())
        } else if hang {
            Ok(())
        } else {
            note(&self.log, "outputs acknowledged");
            self.ack_all();
            Ok(())
        };
        async move { or_hang(hang, r, deadline).await? }
    }
}

impl ChangelogSink for FakeKafka {
    fn send_changelog(
        &mut self,
        partition: i32,
        key: &[u8],
        _value: Option<&[u8]>,
    ) -> Result<(), EmitError> {
        if self.failure(Fail::ChangelogSend) {
            return Err(delivery_error());
        }
        let key = String::from_utf8_lossy(key).into_owned();
        note(&self.log, format!("changelog {partition} {key}"));
        self.in_flight.push(Rec::Changelog(partition, key));
        Ok(())
    }

    fn changelog_acknowledged(
        &mut self,
        _deadline: Duration,
    ) -> impl Future<Output = Result<(), EmitError>> + Send {
        let r = if self.failure(Fail::ChangelogAck) {
            Err(delivery_error())
        } else {
            note(&self.log, "changelog acknowledged");
            self.ack_all();
            Ok(())
        };
        std::future::ready(r)
    }
}

fn offsets_of(tpl: &TopicPartitionList) -> Vec<(i32, i64)> {
    tpl.elements_for_topic(INPUT)
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

impl OffsetCommitter for FakeKafka {
    fn commit_offsets(
        &mut self,
        tpl: &TopicPartitionList,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), KafkaError>> + Send {
        assert!(
            !self.transactional,
            "exactly_once commits in its transaction"
        );
        let hang = self.failure(Fail::CommitHangs);
        let r = if self.failure(Fail::Commit) {
            Err(KafkaError::ConsumerCommit(
                RDKafkaErrorCode::IllegalGeneration,
            ))
        } else if hang {
            Ok(())
        } else {
            note(&self.log, "commit offsets");
            self.offsets.extend(offsets_of(tpl));
            Ok(())
        };
        async move {
            if hang {
                // As the real seam does: no answer within the deadline is a timed-out commit.
                let never = std::future::pending::<()>();
                return match tokio::time::timeout(deadline, never).await {
                    Ok(()) => unreachable!(),
                    Err(_) => Err(crate::worker::seams::commit_timed_out()),
                };
            }
            r
        }
    }

    fn commit_transaction(
        &mut self,
        tpl: &TopicPartitionList,
        _deadline: Duration,
    ) -> Result<(), EmitError> {
        assert!(self.transactional, "at_least_once has no transaction");
        if self.failure(Fail::Commit) {
            return Err(EmitError::Abortable(KafkaError::Global(
                RDKafkaErrorCode::InvalidTransactionalState,
            )));
        }
        note(&self.log, "commit transaction");
        self.ack_all();
        self.offsets.extend(offsets_of(tpl));
        Ok(())
    }
}

fn step_row(partition: i32, offset: i64) -> StepRow {
    StepRow {
        project_id: "p".into(),
        run_id: format!("run-{partition}"),
        step_index: offset as u64,
        ts: 0,
        ts_ms: 0,
        step_type: "tool_call".into(),
        agent: String::new(),
        caller: String::new(),
        tool_name: "search".into(),
        raw_fp: [0; 32],
        has_raw_fp: 0,
        canonical_input_fp: [0; 32],
        canonical_output_fp: [0; 32],
        tool_success: -1,
        tool_latency_ms: 0.0,
        tokens: 0,
        cost_usd: 0.0,
        tokens_in_context: 0,
        content_len: 0,
        src_partition: partition,
        src_offset: offset,
        signal_event_id: String::new(),
    }
}

/// What partition `p` did with offsets `from..to`: one step row and one output per message,
/// one changelog record for its run plus the meta record.
fn epoch(p: i32, from: i64, to: i64) -> Epoch<FakeOutbox> {
    Epoch {
        partition: p,
        next_offset: Some(to),
        batch: Batch {
            steps: (from..to).map(|o| step_row(p, o)).collect(),
            ..Batch::default()
        },
        changelog: vec![
            (
                format!("run-{p}@{to}").into_bytes(),
                Some(b"state".to_vec()),
            ),
            (b"meta".to_vec(), Some(to.to_string().into_bytes())),
        ],
        outbox: FakeOutbox((from..to).map(|o| format!("signal {p}/{o}")).collect()),
    }
}

/// Two partitions, three messages each.
fn epochs() -> Vec<Epoch<FakeOutbox>> {
    vec![epoch(0, 0, 3), epoch(1, 10, 13)]
}

/// The flush's deadline in these tests (time is paused: it costs nothing).
const DEADLINE: Duration = Duration::from_secs(30);

const FAST: Retry = Retry {
    first: Duration::from_millis(1),
    cap: Duration::from_millis(2),
};

async fn run(
    ch: &FakeClickHouse,
    kafka: &mut FakeKafka,
    epochs: Vec<Epoch<FakeOutbox>>,
    shutdown: &CancellationToken,
) -> Result<Committed, WorkerError> {
    let health = Health::default();
    let io = Io {
        rows: ch,
        kafka,
        input_topic: INPUT,
        health: &health,
        retry: FAST,
        timeout: DEADLINE,
        carry: &[],
    };
    flush(io, epochs, shutdown).await
}

/// Time is paused: a deadline passes as soon as nothing else can happen.
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn index(log: &Log, what: &str) -> usize {
    let log = log.lock().unwrap();
    log.iter()
        .position(|l| l.starts_with(what))
        .unwrap_or_else(|| panic!("no {what:?} in {log:?}"))
}

fn logged(log: &Log, what: &str) -> bool {
    log.lock().unwrap().iter().any(|l| l.starts_with(what))
}

/// A flush that fails stops the worker (or, when shutting down, ends it); what it leaves is
/// what the next owner finds. This checks the at_least_once promise for that state: nothing
/// committed, no changelog record visible (a restore would otherwise skip events whose rows or
/// outputs are not durable), and a redo of the same messages makes everything durable and
/// commits.
fn assert_redone_after_failure(fail: Fail, ch_failures: usize, cancelled: bool) {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, ch_failures);
    let mut kafka = FakeKafka::new(&log, false, fail);
    let shutdown = CancellationToken::new();
    if cancelled {
        shutdown.cancel();
    }
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &shutdown));
    assert!(r.is_err(), "{fail:?}: {r:?}");
    // A Kafka side that was slow or away is redone at once from the last commit (a rewind); a
    // ClickHouse failure only ends a flush when the worker is stopping.
    assert_eq!(
        needs_rewind(&r.unwrap_err()),
        ch_failures == 0,
        "{fail:?}: rewind or not"
    );
    assert!(
        kafka.offsets.is_empty(),
        "{fail:?}: committed {:?}",
        kafka.offsets
    );
    assert!(!logged(&log, "commit"), "{fail:?}");
    // The meta record is sent last, so no partition's state can claim offsets that are not
    // durable; with the failure at the changelog's own acknowledgement, records may be out but
    // the offsets are not committed, so the redo repeats them with the same content.
    if matches!(fail, Fail::OutputAck | Fail::ChangelogSend) || ch_failures > 0 {
        assert_eq!(kafka.changelog_visible(), 0, "{fail:?}");
    }

    // The restart: a fresh producer and the same messages read again from the commit point.
    let mut again = FakeKafka::new(&log, false, Fail::Nothing);
    let r = rt().block_on(run(&ch, &mut again, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Offsets, "{fail:?}");
    assert_eq!(again.offsets, BTreeMap::from([(0, 3), (1, 13)]), "{fail:?}");
    assert_eq!(again.outputs_visible(), 6, "{fail:?}");
    assert_eq!(again.changelog_visible(), 4, "{fail:?}");
    let mut rows = ch.rows();
    rows.sort_unstable();
    rows.dedup();
    assert_eq!(
        rows.len(),
        6,
        "{fail:?}: every message's row, at least once"
    );
}

#[test]
fn at_least_once_commits_only_after_rows_outputs_and_changelog() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::Nothing);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Offsets);
    let insert = index(&log, "insert");
    let outputs = index(&log, "outputs acknowledged");
    let changelog = index(&log, "changelog ");
    let changelog_acked = index(&log, "changelog acknowledged");
    let commit = index(&log, "commit offsets");
    assert!(insert < outputs, "{log:?}");
    assert!(outputs < changelog, "{log:?}");
    assert!(changelog < changelog_acked, "{log:?}");
    assert!(changelog_acked < commit, "{log:?}");
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 3), (1, 13)]));
    assert_eq!(ch.rows().len(), 6);
    assert_eq!(kafka.durable.len(), 6 + 4);
    assert!(kafka.in_flight.is_empty());
}

#[test]
fn at_least_once_meta_record_follows_its_partitions_run_records() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::Nothing);
    rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()))
        .unwrap();
    let changelog: Vec<Rec> = kafka
        .durable
        .iter()
        .filter(|r| matches!(r, Rec::Changelog(..)))
        .cloned()
        .collect();
    assert_eq!(
        changelog,
        vec![
            Rec::Changelog(0, "run-0@3".into()),
            Rec::Changelog(0, "meta".into()),
            Rec::Changelog(1, "run-1@13".into()),
            Rec::Changelog(1, "meta".into()),
        ]
    );
}

#[test]
fn at_least_once_clickhouse_outage_is_retried_then_committed() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 3);
    let mut kafka = FakeKafka::new(&log, false, Fail::Nothing);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Offsets);
    let failures = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| *l == "insert failed")
        .count();
    assert_eq!(failures, 3);
    // Nothing downstream of ClickHouse moved while it was down.
    let first_ok = log
        .lock()
        .unwrap()
        .iter()
        .position(|l| l == "insert")
        .unwrap();
    assert!(first_ok < index(&log, "outputs acknowledged"));
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 3), (1, 13)]));
}

#[test]
fn at_least_once_clickhouse_failure_during_shutdown_commits_nothing() {
    assert_redone_after_failure(Fail::Nothing, 1, true);
}

#[test]
fn at_least_once_unacknowledged_output_commits_nothing() {
    assert_redone_after_failure(Fail::OutputAck, 0, false);
}

#[test]
fn at_least_once_changelog_send_failure_commits_nothing() {
    assert_redone_after_failure(Fail::ChangelogSend, 0, false);
}

#[test]
fn at_least_once_unacknowledged_changelog_commits_nothing() {
    assert_redone_after_failure(Fail::ChangelogAck, 0, false);
}

#[test]
fn at_least_once_refused_commit_is_survived_and_covered_by_the_next() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::Commit);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Refused);
    assert!(kafka.offsets.is_empty());
    // Everything below the refused offsets is durable: a redo from the old commit point only
    // repeats it.
    assert_eq!(ch.rows().len(), 6);
    assert_eq!(kafka.durable.len(), 6 + 4);
    kafka.fail = Fail::Nothing;
    let r = rt().block_on(run(
        &ch,
        &mut kafka,
        vec![epoch(0, 3, 5)],
        &CancellationToken::new(),
    ));
    assert_eq!(r.unwrap(), Committed::Offsets);
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 5)]));
}

#[test]
fn a_partition_that_applied_nothing_writes_no_changelog_and_commits_no_offset() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    for transactional in [false, true] {
        let mut kafka = FakeKafka::new(&log, transactional, Fail::Nothing);
        let mut idle = epoch(2, 0, 0);
        idle.next_offset = None;
        rt().block_on(run(
            &ch,
            &mut kafka,
            vec![epoch(0, 0, 3), idle],
            &CancellationToken::new(),
        ))
        .unwrap();
        assert_eq!(kafka.offsets, BTreeMap::from([(0, 3)]));
        assert!(kafka
            .visible()
            .iter()
            .all(|r| !matches!(r, Rec::Changelog(2, _))));
    }
}

/// exactly_once: outputs, changelog and offsets are one transaction; a failure at any step
/// leaves a `read_committed` reader nothing of the flush and commits no offset.
fn assert_nothing_committed(fail: Fail, ch_failures: usize, cancelled: bool) -> WorkerError {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, ch_failures);
    let mut kafka = FakeKafka::new(&log, true, fail);
    let shutdown = CancellationToken::new();
    if cancelled {
        shutdown.cancel();
    }
    let err = rt()
        .block_on(run(&ch, &mut kafka, epochs(), &shutdown))
        .expect_err("the flush must fail");
    assert!(kafka.offsets.is_empty(), "{fail:?}: {:?}", kafka.offsets);
    assert!(kafka.durable.is_empty(), "{fail:?}: {:?}", kafka.durable);
    assert!(kafka.visible().is_empty(), "{fail:?}");
    assert!(!logged(&log, "commit transaction"), "{fail:?}");
    // Whatever the transaction held goes with it.
    kafka.abort();
    assert!(kafka.visible().is_empty());
    err
}

#[test]
fn exactly_once_commits_everything_in_one_transaction() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, true, Fail::Nothing);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Transaction);
    assert!(index(&log, "insert") < index(&log, "changelog "));
    assert!(index(&log, "changelog ") < index(&log, "commit transaction"));
    // The transaction's commit is the acknowledgement; nothing awaits them separately.
    assert!(!logged(&log, "outputs acknowledged"));
    assert!(!logged(&log, "commit offsets"));
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 3), (1, 13)]));
    assert_eq!(kafka.outputs_visible(), 6);
    assert_eq!(kafka.changelog_visible(), 4);
}

#[test]
fn exactly_once_nothing_is_visible_before_the_commit() {
    // Until the transaction commits, even a successful flush's records are invisible: stop at
    // the commit and look.
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, true, Fail::Commit);
    let _ = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(
        kafka.in_flight.len(),
        6 + 4,
        "all sent inside the transaction"
    );
    assert!(kafka.visible().is_empty());
}

#[test]
fn exactly_once_failed_send_of_held_outputs_commits_nothing() {
    let e = assert_nothing_committed(Fail::Absorb, 0, false);
    assert!(needs_rewind(&e), "{e}");
}

#[test]
fn exactly_once_clickhouse_failure_during_shutdown_commits_nothing() {
    let e = assert_nothing_committed(Fail::Nothing, 1, true);
    assert!(matches!(e, WorkerError::Sink(_)), "{e}");
}

#[test]
fn exactly_once_changelog_failure_commits_nothing() {
    let e = assert_nothing_committed(Fail::ChangelogSend, 0, false);
    assert!(needs_rewind(&e), "{e}");
}

#[test]
fn exactly_once_abortable_commit_failure_rewinds_and_commits_nothing() {
    let e = assert_nothing_committed(Fail::Commit, 0, false);
    assert!(needs_rewind(&e), "{e}");
}

#[test]
fn exactly_once_clickhouse_outage_is_retried_inside_the_transaction() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 2);
    let mut kafka = FakeKafka::new(&log, true, Fail::Nothing);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Transaction);
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 3), (1, 13)]));
    assert_eq!(ch.rows().len(), 6);
}

#[test]
fn at_least_once_acknowledgements_that_never_come_fail_the_flush_at_its_deadline() {
    assert_redone_after_failure(Fail::AckHangs, 0, false);
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::AckHangs);
    let started = tokio::time::Instant::now();
    let rt = rt();
    let (r, waited) = rt.block_on(async {
        let r = run(&ch, &mut kafka, epochs(), &CancellationToken::new()).await;
        (r, started.elapsed())
    });
    let e = r.unwrap_err();
    assert!(
        matches!(e, WorkerError::Emit(EmitError::Timeout { .. })),
        "{e}"
    );
    assert!(needs_rewind(&e), "{e}");
    assert!(
        waited >= DEADLINE && waited < DEADLINE * 2,
        "gave up after {waited:?}"
    );
}

#[test]
fn at_least_once_an_unanswered_commit_is_survived_at_its_deadline() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::CommitHangs);
    let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
    // Everything below the offsets is durable: the next commit covers them.
    assert_eq!(r.unwrap(), Committed::Refused);
    assert_eq!(ch.rows().len(), 6);
    assert_eq!(kafka.durable.len(), 6 + 4);
}

#[test]
fn a_hung_clickhouse_insert_is_abandoned_at_the_deadline_and_tried_again() {
    for transactional in [false, true] {
        let log = Log::default();
        let ch = FakeClickHouse::new(&log, 0);
        ch.hangs.store(2, Ordering::SeqCst);
        let mut kafka = FakeKafka::new(&log, transactional, Fail::Nothing);
        let r = rt().block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()));
        assert!(r.is_ok(), "{r:?}");
        let hung = log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| *l == "insert hung")
            .count();
        assert_eq!(hung, 2);
        // Nothing reached Kafka before ClickHouse had the rows.
        assert!(index(&log, "insert") < index(&log, "absorb"), "{log:?}");
        assert_eq!(kafka.offsets, BTreeMap::from([(0, 3), (1, 13)]));
    }
}

#[test]
fn an_output_the_broker_refuses_for_what_it_is_ends_the_worker() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::OutputRefused);
    let e = rt()
        .block_on(run(&ch, &mut kafka, epochs(), &CancellationToken::new()))
        .unwrap_err();
    assert!(!needs_rewind(&e), "redoing it would fail the same way: {e}");
    assert!(kafka.offsets.is_empty());
}

#[test]
fn at_least_once_refused_offsets_carried_into_a_flush_with_nothing_new_are_committed() {
    let log = Log::default();
    let ch = FakeClickHouse::new(&log, 0);
    let mut kafka = FakeKafka::new(&log, false, Fail::Nothing);
    let health = Health::default();
    let io = Io {
        rows: &ch,
        kafka: &mut kafka,
        input_topic: INPUT,
        health: &health,
        retry: FAST,
        timeout: DEADLINE,
        // Partition 0 has news in this flush (its own offset wins); partition 1 has none.
        carry: &[(0, 1), (1, 13)],
    };
    let r = rt().block_on(flush(io, vec![epoch(0, 3, 5)], &CancellationToken::new()));
    assert_eq!(r.unwrap(), Committed::Offsets);
    assert_eq!(kafka.offsets, BTreeMap::from([(0, 5), (1, 13)]));
}
