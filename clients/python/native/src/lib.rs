//! `eddy_agent._engine`: eddy's engine in the agent's process (see `eddy::local`).
//!
//! Events cross as JSON text, outputs come back as JSON text: the bytes the fleet's workers
//! decode and the lines `eddy replay` prints, so nothing between the two can differ.
#![forbid(unsafe_code)]

use eddy::local::{engine_config, engine_config_from_toml, Local};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::cell::RefCell;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

fn config_of(config: Option<&str>, toml: Option<&str>) -> PyResult<eddy::engine::EngineConfig> {
    let cfg = match (config, toml) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "give either a config file or TOML text",
            ))
        }
        (None, Some(t)) => engine_config_from_toml(t),
        (path, None) => engine_config(path.map(Path::new)),
    };
    cfg.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The engine: `observe(event_json)` applies one v1 event and returns the output events it
/// caused, as JSON text, in order.
#[pyclass(module = "eddy_agent._engine")]
struct Engine {
    local: Local,
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (config=None, *, toml=None, partitions=1))]
    fn new(config: Option<&str>, toml: Option<&str>, partitions: u32) -> PyResult<Self> {
        let cfg = config_of(config, toml)?;
        Ok(Self {
            local: Local::new(Arc::new(cfg), partitions),
        })
    }

    /// Apply one event (str or bytes of JSON); ValueError if it is not a valid v1 event.
    fn observe<'py>(&mut self, event: &Bound<'py, PyAny>) -> PyResult<Vec<String>> {
        let out = if let Ok(b) = event.cast::<PyBytes>() {
            self.local.observe(b.as_bytes())
        } else if let Ok(s) = event.cast::<PyString>() {
            self.local.observe(s.to_cow()?.as_bytes())
        } else {
            return Err(PyValueError::new_err(
                "an event is JSON text (str or bytes)",
            ));
        };
        let out = out.map_err(|e| PyValueError::new_err(e.to_string()))?;
        out.iter()
            .map(|o| serde_json::to_string(o).map_err(|e| PyValueError::new_err(e.to_string())))
            .collect()
    }

    #[getter]
    fn partitions(&self) -> u32 {
        self.local.partitions()
    }

    #[getter]
    fn open_runs(&self) -> usize {
        self.local.open_runs()
    }

    #[getter]
    fn ended_runs(&self) -> usize {
        self.local.ended_runs()
    }
}

/// `eddy replay FILE`: every output line to `on_output`, every skipped line to `on_malformed`
/// (its number and why), the per-run summary table as text when asked; returns
/// (lines, events, malformed, outputs, summary).
#[pyfunction]
#[pyo3(signature = (file, on_output, on_malformed, *, config=None, partitions=1, summary=false))]
fn replay(
    file: &str,
    on_output: &Bound<'_, PyAny>,
    on_malformed: &Bound<'_, PyAny>,
    config: Option<&str>,
    partitions: u32,
    summary: bool,
) -> PyResult<(u64, u64, u64, u64, Option<String>)> {
    let cfg = config_of(config, None)?;
    let input: Box<dyn BufRead> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| PyOSError::new_err(format!("cannot open {file}: {e}")))?;
        Box::new(std::io::BufReader::with_capacity(1 << 20, f))
    };
    let mut table = eddy::replay::SummaryTable::default();
    let mut line = Vec::with_capacity(512);
    // A Python exception in a callback stops the replay; it is raised once replay returns.
    let failed: RefCell<Option<PyErr>> = RefCell::new(None);
    let stats = eddy::replay::replay(
        input,
        Arc::new(cfg),
        partitions,
        |o| {
            if summary {
                table.add(o);
            }
            line.clear();
            eddy::replay::write_jsonl(&mut line, o)?;
            let text = std::str::from_utf8(&line[..line.len() - 1]).unwrap_or_default();
            on_output.call1((text,)).map(drop).map_err(|e| {
                *failed.borrow_mut() = Some(e);
                std::io::Error::other("the output callback failed")
            })
        },
        |n, why| {
            let mut failed = failed.borrow_mut();
            if failed.is_none() {
                if let Err(e) = on_malformed.call1((n, why)) {
                    *failed = Some(e);
                }
            }
        },
    );
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    let stats = stats.map_err(|e| PyOSError::new_err(e.to_string()))?;
    let text = if summary {
        let mut buf = Vec::new();
        table
            .print(&mut buf)
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    } else {
        None
    };
    Ok((
        stats.lines,
        stats.events,
        stats.malformed,
        stats.outputs,
        text,
    ))
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    Ok(())
}
