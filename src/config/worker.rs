//! The worker section: batching, draining and the process around `eddy run`. `worker/` takes
//! this, with the Kafka, ClickHouse and engine sections it hands down.
use super::ConfigError;

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Admin HTTP server (/metrics, /livez, /readyz). Loopback by default; in a pod, 0.0.0.0.
    pub(crate) admin_addr: String,
    /// Apply pending ClickHouse migrations when `eddy run` starts. Turn it off when eddy's
    /// ClickHouse account may not run DDL: an administrator runs `eddy migrate` (or applies
    /// `eddy migrate --print`) instead, and the worker checks that the tables are there.
    pub(crate) migrate_on_start: bool,
    /// A flush (ClickHouse insert → output delivery → changelog → offset commit) happens when a
    /// batch holds this many input messages, or `flush_interval_ms` after its first message.
    /// One flush runs at a time beside processing; reading pauses while a full batch waits for
    /// it, so at most two batches are held in memory.
    pub batch_max_messages: usize,
    pub flush_interval_ms: u64,
    /// After SIGTERM/SIGINT the worker flushes, commits and exits; past this grace period it
    /// exits anyway (non-zero). A second signal exits at once. Keep it below the orchestrator's
    /// own grace period (Kubernetes: 30 s). The other daemons (`ingest-*`, `ui`, `fleet-watch`)
    /// stop within it too.
    pub shutdown_grace_ms: u64,
    /// When partitions are taken away in a rebalance, the worker first flushes and commits what
    /// it did for them (so the next owner starts exactly there), waiting at most this long; past
    /// it they are dropped uncommitted and the next owner redoes that batch. Keep it well below
    /// `max.poll.interval.ms` (librdkafka's rebalance timeout, 300 s by default).
    pub(crate) revoke_drain_ms: u64,
    /// The longest any single wait of a flush may take: a ClickHouse insert attempt (then it
    /// is tried again), the brokers' acknowledgement of outputs and changelog records, the
    /// offset commit's answer, each transaction call. A Kafka wait that misses it fails the
    /// flush, and the worker aborts the transaction (exactly_once) and redoes the batch from
    /// the last commit, consuming on meanwhile. Keep it below `transaction_timeout_ms`.
    pub(crate) flush_timeout_ms: u64,
    /// A worker that holds no partition, or holds partitions but receives nothing, while its
    /// input has lag that no member works off, exits non-zero after this long (and `/livez`
    /// says why), so that its restart rejoins the group. Waiting for a full batch's flush or
    /// for ClickHouse never counts. 0 turns the watchdog off.
    pub watchdog_timeout_ms: u64,
    /// Print a progress line every this many seconds (0 = never).
    pub progress_interval_s: u64,
    /// Input messages larger than this are dead-lettered (`too_large`) without being parsed.
    pub(crate) max_message_bytes: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            admin_addr: "127.0.0.1:9464".into(),
            migrate_on_start: true,
            batch_max_messages: 50_000,
            flush_interval_ms: 250,
            shutdown_grace_ms: 25_000,
            revoke_drain_ms: 15_000,
            flush_timeout_ms: 60_000,
            watchdog_timeout_ms: 120_000,
            progress_interval_s: 10,
            max_message_bytes: 1024 * 1024,
        }
    }
}

impl WorkerConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.batch_max_messages == 0 {
            return Err(ConfigError::Invalid(
                "batch_max_messages must be >= 1".into(),
            ));
        }
        if self.flush_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "flush_timeout_ms must be >= 1 (every wait of a flush needs a deadline)".into(),
            ));
        }
        Ok(())
    }
}
