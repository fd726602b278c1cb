//! The agent's half that listens: eddy's verdicts for the runs this process watches.
use super::AgentError;
use crate::config::KafkaConfig;
use crate::contract::{RunKey, Severity, Signal};
use crate::verdict::consumer::{self, Subscription};
use crate::verdict::{VerdictConfig, VerdictTable, Verdicts};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// eddy's verdict that a run loops, at or above the guard's minimum severity.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "eddy stopped run {}: {} ({}) saw `{}` at steps {:?}",
    .signal.run_id, .signal.detector, .signal.severity.as_str(), .signal.pattern, .signal.step_indices
)]
pub struct LoopDetected {
    /// The run's strongest signal: detector, pattern, step indices, evidence.
    pub signal: Arc<Signal>,
}

/// One per process: a background consumer of the signals topic, started at its end, and the
/// verdicts of the watched runs. `check` reads memory only: it never blocks a step.
pub struct Guard {
    verdicts: Arc<Verdicts>,
    project_id: String,
    min_severity: Severity,
    stop: CancellationToken,
}

impl Guard {
    /// Start the consumer (inside a tokio runtime).
    pub fn start(
        brokers: &str,
        topic: &str,
        project_id: &str,
        min_severity: Severity,
    ) -> Result<Self, AgentError> {
        let cfg = KafkaConfig {
            brokers: brokers.to_string(),
            ..KafkaConfig::default()
        };
        Self::with_config(&cfg, topic, project_id, min_severity)
    }

    /// With eddy's Kafka connection and security settings from a loaded configuration.
    pub(crate) fn with_config(
        cfg: &KafkaConfig,
        topic: &str,
        project_id: &str,
        min_severity: Severity,
    ) -> Result<Self, AgentError> {
        // Runs a process watches are few; its table keeps nothing else.
        let verdicts = Verdicts::new(VerdictTable::watching_only(VerdictConfig::default()));
        let stop = CancellationToken::new();
        consumer::spawn(
            Subscription {
                props: cfg.client_props(),
                topic: topic.to_string(),
                lookback: Duration::ZERO,
            },
            verdicts.clone(),
            stop.clone(),
        )?;
        Ok(Self {
            verdicts,
            project_id: project_id.to_string(),
            min_severity,
            stop,
        })
    }

    fn key(&self, run_id: &str) -> RunKey {
        RunKey {
            project_id: self.project_id.clone(),
            run_id: run_id.to_string(),
        }
    }

    /// Keep this run's signals from now on (call it when the run starts).
    pub fn watch(&self, run_id: &str) {
        self.verdicts.table().watch(self.key(run_id));
    }

    /// Forget the run (when it is over).
    pub fn unwatch(&self, run_id: &str) {
        self.verdicts.table().unwatch(&self.key(run_id));
    }

    /// The run's strongest signal so far, whatever its severity. Asking watches the run (a
    /// forgotten `watch` then costs only the signals that came before the first question).
    pub(crate) fn verdict(&self, run_id: &str) -> Option<Arc<Signal>> {
        let key = self.key(run_id);
        let mut table = self.verdicts.table();
        let found = table.get(&key).map(|v| v.strongest.clone());
        if found.is_none() {
            table.watch(key);
        }
        found
    }

    /// `Err` once a signal at or above the minimum severity arrived for the run (and on every
    /// call after). Copies of one signal (same `event_id`) count once.
    pub fn check(&self, run_id: &str) -> Result<(), LoopDetected> {
        match self.verdict(run_id) {
            Some(signal) if signal.severity >= self.min_severity => Err(LoopDetected { signal }),
            _ => Ok(()),
        }
    }

    /// True once the consumer holds its partitions (signals published from then on are seen).
    pub(crate) fn is_ready(&self) -> bool {
        self.verdicts.is_caught_up()
    }

    /// Wait until `Guard::is_ready`, at most `timeout`; returns whether it is.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.is_ready() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::OutputEvent;

    fn signal(run: &str, id: &str, severity: Severity) -> OutputEvent {
        OutputEvent::signal(Signal {
            event_id: id.into(),
            project_id: "p".into(),
            run_id: run.into(),
            agent_name: None,
            step_index: 7,
            ts: "2026-01-01T00:00:00Z".into(),
            detector: "repeated_operation".into(),
            severity,
            pattern: "web_search(same call, same result) x7".into(),
            fingerprint: "f".into(),
            hits: 7,
            step_indices: (1..=7).collect(),
            first_step_index: 1,
            evidence: serde_json::Value::Null,
            advice: String::new(),
        })
    }

    /// The guard's decisions, fed by hand (its consumer points at no broker).
    #[tokio::test]
    async fn check_fails_from_the_minimum_severity_on() {
        let guard = Guard::start("127.0.0.1:9", "t.signals", "p", Severity::Alert).unwrap();
        let feed = |e: &OutputEvent| guard.verdicts.apply(e, 0);
        // Not watched yet: nothing is kept.
        feed(&signal("r", "x", Severity::Stop));
        assert!(guard.check("r").is_ok());
        // Asking watched it: what comes next counts.
        feed(&signal("r", "w", Severity::Warn));
        assert!(
            guard.check("r").is_ok(),
            "a warning is below the guard's minimum"
        );
        assert_eq!(guard.verdict("r").map(|s| s.severity), Some(Severity::Warn));
        feed(&signal("r", "a", Severity::Alert));
        let stop = guard.check("r").unwrap_err();
        assert_eq!(stop.signal.event_id, "a");
        assert!(stop.to_string().contains("repeated_operation"), "{stop}");
        // Another project's run of the same id is not this guard's.
        guard.watch("q");
        let mut other = signal("q", "o", Severity::Stop);
        if let OutputEvent::LoopDetected(s) = &mut other {
            s.project_id = "other".into();
        }
        feed(&other);
        assert!(guard.check("q").is_ok());
        guard.unwatch("r");
        assert!(guard.verdict("r").is_none());
    }
}
