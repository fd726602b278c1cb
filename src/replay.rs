//! Offline replay: the same engine as `eddy run`, over JSONL, with no servers.
//!
//! Runs are hashed to `partitions` engines exactly as the producer partitions them, so idle
//! timeouts (driven by per-partition watermarks) agree with a worker reading N partitions.
use crate::contract::{decode, OutputEvent};
use crate::engine::{partition_for, EngineConfig, PartitionEngine};
use std::io::{BufRead, Write};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read input: {0}")]
    Read(#[source] std::io::Error),
    #[error("cannot write output: {0}")]
    Write(#[source] std::io::Error),
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReplayStats {
    pub lines: u64,
    pub events: u64,
    pub malformed: u64,
    pub outputs: u64,
}

/// Replay `input` through `partitions` engines, calling `emit` for every output event in order.
pub fn replay<R: BufRead>(
    input: R,
    cfg: Arc<EngineConfig>,
    partitions: u32,
    mut emit: impl FnMut(&OutputEvent) -> Result<(), std::io::Error>,
    mut on_malformed: impl FnMut(u64, &str),
) -> Result<ReplayStats, ReplayError> {
    let partitions = partitions.max(1);
    let mut engines: Vec<PartitionEngine> = (0..partitions)
        .map(|_| PartitionEngine::new(cfg.clone()))
        .collect();
    let mut stats = ReplayStats::default();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut input = input;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(ReplayError::Read)?;
        if n == 0 {
            break;
        }
        stats.lines += 1;
        let line = trim_ascii(&buf);
        if line.is_empty() {
            continue;
        }
        match decode(line) {
            Ok(ev) => {
                stats.events += 1;
                let p = partition_for(&ev.key().run_id, partitions) as usize;
                engines[p].apply(&ev, &mut out);
                for o in out.drain(..) {
                    stats.outputs += 1;
                    emit(&o).map_err(ReplayError::Write)?;
                }
            }
            Err(e) => {
                stats.malformed += 1;
                on_malformed(stats.lines, &format!("{} ({})", e, e.reason()));
            }
        }
    }
    Ok(stats)
}

/// Replay into a vector (tests, eval).
pub fn replay_to_vec(
    input: &[u8],
    cfg: Arc<EngineConfig>,
    partitions: u32,
) -> (Vec<OutputEvent>, ReplayStats) {
    let mut v = Vec::new();
    let stats = replay(
        input,
        cfg,
        partitions,
        |o| {
            v.push(o.clone());
            Ok(())
        },
        |_, _| {},
    )
    .unwrap_or_default();
    (v, stats)
}

/// Write one output event as a JSON line.
pub fn write_jsonl<W: Write>(w: &mut W, o: &OutputEvent) -> std::io::Result<()> {
    serde_json::to_writer(&mut *w, o)?;
    w.write_all(b"\n")
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &b[start..end.max(start)]
}

/// Per-run summary for `eddy replay --summary`.
#[derive(Default)]
pub struct SummaryTable {
    rows: std::collections::BTreeMap<(String, String), SummaryRow>,
}

#[derive(Default)]
struct SummaryRow {
    warnings: u32,
    detections: u32,
    first_caught: Option<u64>,
    detectors: std::collections::BTreeSet<String>,
    ended: Option<String>,
}

impl SummaryTable {
    pub fn add(&mut self, o: &OutputEvent) {
        let (p, r) = match o {
            OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => {
                (&s.project_id, &s.run_id)
            }
            OutputEvent::RunTerminated(t) => (&t.project_id, &t.run_id),
        };
        let row = self.rows.entry((p.clone(), r.clone())).or_default();
        match o {
            OutputEvent::LoopWarning(s) => {
                row.warnings += 1;
                row.detectors.insert(s.detector.clone());
            }
            OutputEvent::LoopDetected(s) => {
                row.detections += 1;
                row.first_caught.get_or_insert(s.step_index);
                row.detectors.insert(s.detector.clone());
            }
            OutputEvent::RunTerminated(t) => {
                row.ended = Some(format!("{}/{}", t.status, t.termination_reason));
            }
        }
    }

    pub fn print<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        writeln!(
            w,
            "{:<16} {:<28} {:>5} {:>5} {:>7}  {:<24} detectors",
            "project", "run", "warn", "loop", "caught@", "ended"
        )?;
        for ((p, r), row) in &self.rows {
            writeln!(
                w,
                "{:<16} {:<28} {:>5} {:>5} {:>7}  {:<24} {}",
                p,
                r,
                row.warnings,
                row.detections,
                row.first_caught.map_or("-".to_string(), |s| s.to_string()),
                row.ended.as_deref().unwrap_or("open"),
                row.detectors.iter().cloned().collect::<Vec<_>>().join(",")
            )?;
        }
        Ok(())
    }
}
