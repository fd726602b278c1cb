//! The `eddy-agent` Node package's addon: eddy's engine in the agent's process (see
//! `eddy::local`).
//!
//! Events cross as JSON text, outputs come back as JSON text: the bytes the fleet's workers
//! decode and the lines `eddy replay` prints, so nothing between the two can differ.
#![deny(clippy::all)]

use eddy::local::{engine_config, engine_config_from_toml, Local};
use napi::{Error, Result};
use napi_derive::napi;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;

fn config_of(config: Option<&str>, toml: Option<&str>) -> Result<eddy::engine::EngineConfig> {
    let cfg = match (config, toml) {
        (Some(_), Some(_)) => {
            return Err(Error::from_reason("give either a config file or TOML text"))
        }
        (None, Some(t)) => engine_config_from_toml(t),
        (path, None) => engine_config(path.map(Path::new)),
    };
    cfg.map_err(|e| Error::from_reason(e.to_string()))
}

/// The engine: `observe(eventJson)` applies one v1 event and returns the output events it
/// caused, as JSON text, in order.
#[napi]
pub struct Engine {
    local: Local,
}

#[napi]
impl Engine {
    /// `config`: an eddy TOML file; `toml`: the same as text; `partitions`: hash runs to this
    /// many engines, as a fleet reading that many input partitions.
    #[napi(constructor)]
    pub fn new(
        config: Option<String>,
        toml: Option<String>,
        partitions: Option<u32>,
    ) -> Result<Self> {
        let cfg = config_of(config.as_deref(), toml.as_deref())?;
        Ok(Self {
            local: Local::new(Arc::new(cfg), partitions.unwrap_or(1)),
        })
    }

    /// Apply one event (JSON text); throws if it is not a valid v1 event.
    #[napi]
    pub fn observe(&mut self, event: String) -> Result<Vec<String>> {
        let out = self
            .local
            .observe(event.as_bytes())
            .map_err(|e| Error::from_reason(e.to_string()))?;
        out.iter()
            .map(|o| serde_json::to_string(o).map_err(|e| Error::from_reason(e.to_string())))
            .collect()
    }

    #[napi(getter)]
    pub fn partitions(&self) -> u32 {
        self.local.partitions()
    }

    #[napi(getter)]
    pub fn open_runs(&self) -> u32 {
        self.local.open_runs() as u32
    }

    #[napi(getter)]
    pub fn ended_runs(&self) -> u32 {
        self.local.ended_runs() as u32
    }
}

#[napi(object)]
pub struct ReplayStats {
    pub lines: f64,
    pub events: f64,
    pub malformed: f64,
    pub outputs: f64,
}

fn open(file: &str) -> Result<Box<dyn BufRead>> {
    Ok(if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| Error::from_reason(format!("cannot open {file}: {e}")))?;
        Box::new(std::io::BufReader::with_capacity(1 << 20, f))
    })
}

/// `eddy replay FILE` as the command does it: output events on stdout, skipped lines, the
/// summary table (when asked) and the closing count on stderr.
#[napi]
pub fn replay_to_stdout(
    file: String,
    config: Option<String>,
    partitions: Option<u32>,
    summary: Option<bool>,
) -> Result<ReplayStats> {
    let cfg = config_of(config.as_deref(), None)?;
    let summary = summary.unwrap_or(false);
    let input = open(&file)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut table = eddy::replay::SummaryTable::default();
    let stats = eddy::replay::replay(
        input,
        Arc::new(cfg),
        partitions.unwrap_or(1),
        |o| {
            if summary {
                table.add(o);
            }
            eddy::replay::write_jsonl(&mut out, o)
        },
        |line, why| eprintln!("line {line}: skipped: {why}"),
    );
    out.flush().map_err(|e| Error::from_reason(e.to_string()))?;
    drop(out);
    let stats = stats.map_err(|e| Error::from_reason(e.to_string()))?;
    if summary {
        table
            .print(&mut std::io::stderr())
            .map_err(|e| Error::from_reason(e.to_string()))?;
    }
    eprintln!(
        "replayed {} events ({} malformed lines skipped), {} output events",
        stats.events, stats.malformed, stats.outputs
    );
    Ok(ReplayStats {
        lines: stats.lines as f64,
        events: stats.events as f64,
        malformed: stats.malformed as f64,
        outputs: stats.outputs as f64,
    })
}

/// The output events of a JSONL trace, as JSON text (skipped lines are not reported).
#[napi]
pub fn replay(
    file: String,
    config: Option<String>,
    partitions: Option<u32>,
) -> Result<Vec<String>> {
    let cfg = config_of(config.as_deref(), None)?;
    let mut lines = Vec::new();
    eddy::replay::replay(
        open(&file)?,
        Arc::new(cfg),
        partitions.unwrap_or(1),
        |o| {
            lines.push(serde_json::to_string(o)?);
            Ok(())
        },
        |_, _| {},
    )
    .map_err(|e| Error::from_reason(e.to_string()))?;
    Ok(lines)
}
