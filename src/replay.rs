//! Offline replay: the same engine as `eddy run`, over JSONL, with no servers.
//!
//! Runs are hashed to `partitions` engines exactly as the producer partitions them, so idle
//! timeouts (driven by per-partition watermarks) agree with a worker reading N partitions.
use crate::contract::{decode, OutputEvent};
use crate::engine::{partition_for, EngineConfig, PartitionEngine};
use std::io::{BufRead, Write};
use std::sync::Arc;

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The input could not be read.
    #[error("cannot read input: {0}")]
    Read(#[source] std::io::Error),
    /// The output could not be written.
    #[error("cannot write output: {0}")]
    Write(#[source] std::io::Error),
}

/// Counts of a replay.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReplayStats {
    /// Input lines read.
    pub lines: u64,
    /// Lines that decoded to events.
    pub events: u64,
    /// Lines that did not.
    pub malformed: u64,
    /// Output events produced.
    pub outputs: u64,
}

/// Replay `input` through `partitions` engines, calling `emit` for every output event in order.
///
/// Line `n` (1-based, as `on_malformed` reports it) is the `n`-th piece of input ended by `\n`
/// or by the end of input, exactly as successive `read_until(b'\n')` calls would return them.
pub fn replay<R: BufRead>(
    mut input: R,
    cfg: Arc<EngineConfig>,
    partitions: u32,
    mut emit: impl FnMut(&OutputEvent) -> Result<(), std::io::Error>,
    mut on_malformed: impl FnMut(u64, &str),
) -> Result<ReplayStats, ReplayError> {
    let partitions = partitions.max(1);
    let mut engines: Vec<PartitionEngine> = (0..partitions)
        .map(|_| PartitionEngine::new(cfg.clone()).without_changelog())
        .collect();
    let mut stats = ReplayStats::default();
    let mut out = Vec::new();
    let mut line = |buf: &[u8], stats: &mut ReplayStats| -> Result<(), ReplayError> {
        stats.lines += 1;
        let line = trim_ascii(buf);
        if line.is_empty() {
            return Ok(());
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
        Ok(())
    };
    // Lines wholly inside the reader's buffer are decoded where they lie; only a line cut by
    // the buffer's end is copied, into `carry`, until its rest arrives.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let avail = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReplayError::Read(e)),
        };
        if avail.is_empty() {
            if !carry.is_empty() {
                line(&carry, &mut stats)?;
            }
            break;
        }
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', avail) {
            if carry.is_empty() {
                line(&avail[from..nl], &mut stats)?;
            } else {
                carry.extend_from_slice(&avail[from..nl]);
                line(&carry, &mut stats)?;
                carry.clear();
            }
            from = nl + 1;
        }
        carry.extend_from_slice(&avail[from..]);
        let n = avail.len();
        input.consume(n);
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
    /// Counts one output event.
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

    /// Writes the summary as a table for humans.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Line numbers and stats as the `read_until` loop this replaces counted them.
    fn by_read_until(input: &[u8]) -> (Vec<u64>, u64) {
        let (mut bad, mut lines, mut r, mut buf) = (Vec::new(), 0, input, Vec::new());
        loop {
            buf.clear();
            if r.read_until(b'\n', &mut buf).unwrap_or(0) == 0 {
                break;
            }
            lines += 1;
            let l = trim_ascii(&buf);
            if !l.is_empty() && decode(l).is_err() {
                bad.push(lines);
            }
        }
        (bad, lines)
    }

    /// Lines cut anywhere by the reader's buffer, blank and whitespace-only lines, `\r\n`, a last
    /// line without `\n`: the same lines, line numbers and outputs whatever the buffer size.
    #[test]
    fn lines_are_split_as_read_until_splits_them() {
        let cfg = Arc::new(EngineConfig::default());
        let mut text = String::new();
        for i in 0..40u32 {
            text.push_str(&format!(
                "{{\"v\":1,\"kind\":\"step\",\"project_id\":\"p\",\"run_id\":\"r{}\",\"ts\":{},\"step_index\":{},\"step_type\":\"tool_call\",\"tool_name\":\"t\",\"tool_input\":{{\"q\":1}}}}",
                i % 3,
                1000 + i,
                i / 3
            ));
            text.push_str(match i % 7 {
                0 => "\r\n",
                1 => "\n\n",
                2 => "\n  \t\n",
                3 => "\nnot json\n",
                _ => "\n",
            });
        }
        for tail in ["", "{\"v\":1}", "   ", "\n"] {
            let input = format!("{text}{tail}").into_bytes();
            let (want_bad, want_lines) = by_read_until(&input);
            assert!(!want_bad.is_empty());
            let (want_out, want_stats) = replay_to_vec(&input, cfg.clone(), 2);
            assert_eq!(want_stats.lines, want_lines);
            assert!(want_stats.outputs > 0);
            for cap in [1, 2, 7, 64, 333, 1 << 16] {
                let mut bad = Vec::new();
                let mut outs = Vec::new();
                let stats = replay(
                    std::io::BufReader::with_capacity(cap, &input[..]),
                    cfg.clone(),
                    2,
                    |o| {
                        outs.push(o.clone());
                        Ok(())
                    },
                    |n, _| bad.push(n),
                )
                .expect("in-memory replay");
                assert_eq!(stats, want_stats, "capacity {cap}, tail {tail:?}");
                assert_eq!(bad, want_bad, "capacity {cap}, tail {tail:?}");
                assert_eq!(outs, want_out, "capacity {cap}, tail {tail:?}");
            }
        }
    }
}
