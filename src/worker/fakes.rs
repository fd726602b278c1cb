//! What the worker's unit tests run partition tasks with instead of Kafka: a sink that keeps
//! what a task sends, and input messages that are valid events.
use super::partition::TaskSink;
use super::partition::{Counters, Epoch, Raw, Shared};
use crate::config::{KafkaConfig, WorkerConfig};
use crate::contract::OutputEvent;
use crate::emit::{DeadLetter, EmitError, Outbox};
use std::sync::{Arc, Mutex};

/// Keeps what a partition task sent: outputs by run, dead letters by offset.
#[derive(Clone, Default)]
pub struct FakeSink {
    pub outputs: Arc<Mutex<Vec<String>>>,
    pub dead_letters: Arc<Mutex<Vec<i64>>>,
}

impl TaskSink for FakeSink {
    fn send_output(&mut self, _topic: &str, o: &OutputEvent) -> Result<(), EmitError> {
        self.outputs.lock().unwrap().push(o.run_id().to_string());
        Ok(())
    }

    fn send_dead_letter(&mut self, _topic: &str, d: &DeadLetter<'_>) -> Result<(), EmitError> {
        self.dead_letters.lock().unwrap().push(d.offset);
        Ok(())
    }

    fn take_outbox(&mut self) -> Outbox {
        Outbox::default()
    }
}

/// What partition tasks share, with every setting at its default.
pub fn shared(worker: &WorkerConfig) -> Arc<Shared> {
    Arc::new(Shared {
        kafka: Arc::new(KafkaConfig::default()),
        worker: Arc::new(worker.clone()),
        engine_cfg: Arc::default(),
        changelog_topic: "changelog".into(),
        counters: Arc::new(Counters::default()),
    })
}

/// The message at `offset` of partition `p`: a step of run `r<p>` whose index is its offset,
/// each calling a different tool (so no detector fires and every message becomes one row).
pub fn raw(p: i32, offset: i64) -> Raw {
    let event = format!(
        r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r{p}","ts":{ts},"step_index":{offset},"step_type":"tool_call","tool_name":"t{offset}","tool_input":{{"i":{offset}}}}}"#,
        ts = 1_700_000_000_000 + offset,
    );
    Raw {
        offset,
        key: Some(format!("r{p}").into_bytes()),
        payload: Some(event.into_bytes()),
    }
}

/// The input offsets whose step rows an epoch carries, in order.
pub fn row_offsets(e: &Epoch) -> Vec<i64> {
    e.batch.steps.iter().map(|r| r.src_offset).collect()
}
