//! The agent's half that reports: v1 events to the input topic.
use super::AgentError;
use crate::config::KafkaConfig;
use crate::contract::{encode, Event, JsonText, RunFinished, RunKey, RunStarted, RunStatus, Step};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// keelwave's SDK (and the Python package) number a run's steps from 1.
const FIRST_STEP_INDEX: u64 = 1;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes an agent's run events straight to the input topic (for agents that talk Kafka
/// rather than the ingest API).
pub struct Emitter {
    inner: crate::emit::Producer,
    topic: String,
    project_id: String,
    /// Next step index per open run; a run leaves it when it finishes.
    next_index: HashMap<String, u64>,
}

impl Emitter {
    /// A producer for `topic` on `brokers`, its events stamped with `project_id`.
    pub fn new(brokers: &str, topic: &str, project_id: &str) -> Result<Self, AgentError> {
        let cfg = KafkaConfig {
            brokers: brokers.to_string(),
            ..KafkaConfig::default()
        };
        Self::with_config(&cfg, topic, project_id)
    }

    /// With eddy's Kafka settings (security, `[kafka_producer]`) from a loaded configuration.
    pub(crate) fn with_config(
        cfg: &KafkaConfig,
        topic: &str,
        project_id: &str,
    ) -> Result<Self, AgentError> {
        Ok(Self {
            // Idempotent, acks=all, Kafka's murmur2 partitioner: what eddy's own producer uses.
            inner: crate::emit::Producer::plain(cfg)?,
            topic: topic.to_string(),
            project_id: project_id.to_string(),
            next_index: HashMap::new(),
        })
    }

    fn key(&self, run_id: &str) -> RunKey {
        RunKey {
            project_id: self.project_id.clone(),
            run_id: run_id.to_string(),
        }
    }

    /// Hand any event to the producer as it is (its own key, time and step index).
    pub(crate) fn send(&mut self, event: &Event) -> Result<(), AgentError> {
        let payload = encode(event)?;
        let key = event.key().run_id.as_bytes();
        self.inner.send_raw(&self.topic, key, &payload)?;
        Ok(())
    }

    /// Reports that the run began (`run_started`).
    pub fn run_started(&mut self, run_id: &str, agent_name: &str) -> Result<(), AgentError> {
        self.next_index.insert(run_id.to_string(), FIRST_STEP_INDEX);
        self.send(&Event::RunStarted(RunStarted {
            key: self.key(run_id),
            ts_ms: now_ms(),
            agent_name: agent_name.to_string(),
            input: None,
            metadata: None,
        }))
    }

    /// Send `step` as the run's next step (its key, index and, when zero, time are filled in);
    /// returns the step index used.
    pub fn step(&mut self, run_id: &str, step: Step) -> Result<u64, AgentError> {
        let index = self
            .next_index
            .get(run_id)
            .copied()
            .unwrap_or(FIRST_STEP_INDEX);
        self.step_at(run_id, index, step)
    }

    /// Send `step` with an index of the caller's; counting goes on after it.
    pub(crate) fn step_at(
        &mut self,
        run_id: &str,
        index: u64,
        mut step: Step,
    ) -> Result<u64, AgentError> {
        step.key = self.key(run_id);
        step.step_index = index;
        if step.ts_ms == 0 {
            step.ts_ms = now_ms();
        }
        self.send(&Event::Step(step))?;
        let next = self.next_index.entry(run_id.to_string()).or_insert(0);
        *next = (*next).max(index + 1);
        Ok(index)
    }

    /// A `tool_call` step whose input is `input`, serialised once (what eddy fingerprints).
    pub fn tool_call(
        &mut self,
        run_id: &str,
        tool: &str,
        input: &serde_json::Value,
    ) -> Result<u64, AgentError> {
        let text = serde_json::to_string(input)?;
        let step = Step {
            step_type: "tool_call".into(),
            tool_name: Some(tool.to_string()),
            tool_input: Some(JsonText::parse(&text)?),
            ..Step::default()
        };
        self.step(run_id, step)
    }

    /// Reports that the run ended with `status` (`run_finished`).
    pub fn run_finished(&mut self, run_id: &str, status: RunStatus) -> Result<(), AgentError> {
        self.next_index.remove(run_id);
        self.send(&Event::RunFinished(RunFinished {
            key: self.key(run_id),
            ts_ms: now_ms(),
            status,
            termination_reason: None,
            output: None,
            reported_loop_detected: None,
            reported_loop_step_index: None,
            reported_totals: None,
        }))
    }

    /// Wait until the broker acknowledged everything sent so far.
    pub async fn flush(&mut self) -> Result<usize, AgentError> {
        Ok(self.inner.flush().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbering is the emitter's own: no broker needs to answer (records wait in librdkafka's
    /// queue and are purged when the emitter is dropped).
    #[test]
    fn steps_are_counted_per_run_from_one() {
        let mut e = Emitter::new("127.0.0.1:9", "t.steps", "p").expect("producer");
        let think = || Step {
            step_type: "think".into(),
            ..Step::default()
        };
        e.run_started("a", "agent").unwrap();
        assert_eq!(e.step("a", think()).unwrap(), 1);
        assert_eq!(e.step("a", think()).unwrap(), 2);
        // Another run counts on its own, even without run_started.
        assert_eq!(e.step("b", think()).unwrap(), 1);
        // A given index is used, and counting goes on after it (never back).
        assert_eq!(e.step_at("a", 10, think()).unwrap(), 10);
        assert_eq!(
            e.tool_call("a", "t", &serde_json::json!({"q": 1})).unwrap(),
            11
        );
        assert_eq!(e.step_at("a", 4, think()).unwrap(), 4);
        assert_eq!(e.step("a", think()).unwrap(), 12);
        e.run_finished("a", RunStatus::Completed).unwrap();
        e.run_started("a", "agent").unwrap();
        assert_eq!(
            e.step("a", think()).unwrap(),
            1,
            "a run id started again counts anew"
        );
    }
}
