//! The engine inside an agent's process: what the Python and Node bindings wrap.
//!
//! An agent hands each of its v1 events to [`Local::observe`] and gets back, at once, the output
//! events that event causes: the same engine, decoder and partitioning as `eddy replay` and the
//! fleet's workers, so the same verdicts byte for byte. Memory stays bounded in a long-lived
//! process by the engine's own rules: a run ends on `run_finished`, on its idle timeout against
//! event time (the workers' rule), or by eviction past `max_open_runs`; ended runs leave the
//! table, and only `ended_runs_remembered` of their keys are kept.
//!
//! [`engine_config`] reads the engine's configuration as every `eddy` command reads it: defaults,
//! then the `[engine]` table of the TOML file, then `EDDY_ENGINE__*` variables.
use crate::contract::{decode, DecodeError, Event, OutputEvent};
use crate::engine::{partition_for, EngineConfig, PartitionEngine};
use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use std::path::Path;
use std::sync::Arc;

/// Why the in-process engine could not be configured or fed.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// A value is out of range or settings contradict each other.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The file or the environment could not be read or parsed.
    #[error("cannot load configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    /// An event line is not a valid event.
    #[error("{0} ({reason})", reason = .0.reason())]
    Decode(#[from] DecodeError),
}

/// One process's engines: `partitions` of them, runs hashed to them as the producer hashes them
/// to the input topic's partitions, so idle timeouts agree with a worker (or `eddy replay
/// --partitions N`) reading that many partitions.
pub struct Local {
    engines: Vec<PartitionEngine>,
    out: Vec<OutputEvent>,
}

impl Local {
    /// An engine per partition, runs spread over them as the worker would.
    pub fn new(cfg: Arc<EngineConfig>, partitions: u32) -> Self {
        let engines = (0..partitions.max(1))
            .map(|_| PartitionEngine::new(cfg.clone()).without_changelog())
            .collect();
        Self {
            engines,
            out: Vec::new(),
        }
    }

    /// Decode one v1 event (JSON, surrounding whitespace allowed) and apply it.
    pub fn observe(&mut self, line: &[u8]) -> Result<&[OutputEvent], LocalError> {
        let ev = decode(line.trim_ascii())?;
        Ok(self.apply(&ev))
    }

    /// Apply one decoded event; the output events it caused, in the engine's order.
    pub(crate) fn apply(&mut self, ev: &Event) -> &[OutputEvent] {
        self.out.clear();
        let p = partition_for(&ev.key().run_id, self.engines.len() as u32) as usize;
        self.engines[p].apply(ev, &mut self.out);
        &self.out
    }

    /// How many partitions runs are spread over.
    pub fn partitions(&self) -> u32 {
        self.engines.len() as u32
    }

    /// Runs open now, over every partition.
    pub fn open_runs(&self) -> usize {
        self.engines.iter().map(PartitionEngine::open_runs).sum()
    }

    /// Keys of ended runs remembered (so that late events cannot reopen them).
    pub fn ended_runs(&self) -> usize {
        self.engines.iter().map(PartitionEngine::ended_runs).sum()
    }
}

/// The engine's configuration from `file` (none: the defaults) and the environment, as `eddy run`
/// and `eddy replay` read it; the rest of the file (Kafka, ClickHouse, ...) is not looked at.
pub fn engine_config(file: Option<&Path>) -> Result<EngineConfig, LocalError> {
    let mut fig = Figment::from(Serialized::defaults(EngineConfig::default()));
    if let Some(f) = file {
        if !f.exists() {
            return Err(LocalError::Config(format!(
                "config file {} does not exist",
                f.display()
            )));
        }
        fig = fig.merge(Figment::from(Toml::file(f)).focus("engine"));
    }
    finish(fig)
}

/// [`engine_config`] from TOML text (a whole eddy config file, of which `[engine]` is read).
pub fn engine_config_from_toml(text: &str) -> Result<EngineConfig, LocalError> {
    let fig = Figment::from(Serialized::defaults(EngineConfig::default()))
        .merge(Figment::from(Toml::string(text)).focus("engine"));
    finish(fig)
}

fn finish(fig: Figment) -> Result<EngineConfig, LocalError> {
    let cfg: EngineConfig = fig
        .merge(Env::prefixed("EDDY_ENGINE__").split("__"))
        .extract()
        .map_err(Box::new)?;
    cfg.detectors
        .validate()
        .map_err(|e| LocalError::Config(format!("engine.detectors: {e}")))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::replay_to_vec;

    /// Event by event, the outputs are those of replay over the same lines, for one partition
    /// and several (idle timeouts, which other runs' events trigger, included).
    #[test]
    fn observing_each_event_gives_what_replay_gives() {
        let cfg = Arc::new(EngineConfig {
            idle_timeout_ms: 50,
            ..EngineConfig::default()
        });
        let mut lines = Vec::new();
        for i in 0..60u64 {
            let r = i % 5;
            lines.push(format!(
                r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r{r}","ts":{},"step_index":{},"step_type":"tool_call","tool_name":"search","tool_input":{{"q":"same"}},"tool_output":"[]"}}"#,
                1_000 + i * if r == 4 { 30 } else { 3 },
                i / 5
            ));
        }
        lines.push("not json".into());
        let input = lines.join("\n");
        for partitions in [1, 3] {
            let (want, _) = replay_to_vec(input.as_bytes(), cfg.clone(), partitions);
            assert!(want
                .iter()
                .any(|o| matches!(o, OutputEvent::LoopDetected(_))));
            assert!(want
                .iter()
                .any(|o| matches!(o, OutputEvent::RunTerminated(_))));
            let mut local = Local::new(cfg.clone(), partitions);
            let mut got = Vec::new();
            let mut bad = 0;
            for l in &lines {
                match local.observe(l.as_bytes()) {
                    Ok(out) => got.extend_from_slice(out),
                    Err(_) => bad += 1,
                }
            }
            assert_eq!(bad, 1);
            assert_eq!(got, want, "{partitions} partitions");
        }
    }

    /// The engine section of a file, as `eddy` itself loads it (the whole config, of which the
    /// worker and replay take `engine`), for a file that sets engine and detector keys.
    #[cfg(feature = "server")]
    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's own error type
    fn the_engine_section_is_read_as_eddy_reads_it() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "eddy.toml",
                r#"
                kafka_brokers = "k:9092"
                [engine]
                idle_timeout_ms = 1234
                [engine.detectors.repeat]
                window = 12
                normal = { warn = 2, alert = 4, stop = 6 }
                "#,
            )?;
            let path = Path::new("eddy.toml");
            let want = crate::config::Config::load(Some(path), &[])
                .map_err(|e| e.to_string())?
                .engine;
            let got = engine_config(Some(path)).map_err(|e| e.to_string())?;
            assert_eq!(got, want);
            assert_eq!(got.idle_timeout_ms, 1234);
            assert_ne!(got, EngineConfig::default());
            let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
            assert_eq!(
                engine_config_from_toml(&text).map_err(|e| e.to_string())?,
                want
            );
            jail.set_env("EDDY_ENGINE__MAX_OPEN_RUNS", "77");
            let want = crate::config::Config::load(Some(path), &[])
                .map_err(|e| e.to_string())?
                .engine;
            assert_eq!(want.max_open_runs, 77);
            assert_eq!(engine_config(Some(path)).map_err(|e| e.to_string())?, want);
            assert!(engine_config(Some(Path::new("missing.toml"))).is_err());
            Ok(())
        });
    }
}
