//! `eddy eval DIR`: precision / recall / F1 of the detectors on a labeled corpus.
//!
//! `DIR` holds v1 events as JSONL (`*.jsonl`, any number of files, runs interleaved) and
//! `labels.jsonl`, one object per run: `{"run_id", "looping", "kind", "loop_start",
//! "evident_at"}` where `kind` names the detector expected to catch it, `loop_start` is the
//! step_index where the repetition begins and `evident_at` the step at which a careful reviewer
//! would first call the run a loop. Each events file is replayed through the engine exactly as
//! `eddy replay` does (one partition). A run counts as *detected* when any `alert` or `stop`
//! fired for it (strict, the product's definition); the lenient line also counts `warn`. A
//! detection is *on time* when its first alert or stop falls from `EARLY` step before to
//! `LATE` steps after `evident_at`: an out-of-process guard that waits longer lets the agent
//! spend more calls than the in-process guards do.
//!
//! Each loop kind is scored twice, side by side: at `alert` (the first alert or stop, the
//! product's "a loop was found") and at `stop` (the first stop, what halts an agent by default),
//! each with the loops caught, those on time, and the steps from the loop's onset (its
//! `evident_at`) to the verdict: median and 90th percentile, negative when early.
use crate::contract::{OutputEvent, Severity};
use crate::engine::EngineConfig;
use crate::replay::replay_to_vec;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a labelled corpus could not be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// A line of `labels.jsonl` is not a label.
    #[error("{path}:{line}: bad label: {why}")]
    Label {
        /// The labels file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// The corpus has no `labels.jsonl`.
    #[error("{0} has no labels.jsonl")]
    NoLabels(PathBuf),
    /// The corpus has no event files.
    #[error("{0} has no *.jsonl event files")]
    NoEvents(PathBuf),
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub(crate) struct Label {
    pub(crate) run_id: String,
    pub(crate) looping: bool,
    #[serde(default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) loop_start: Option<u64>,
    #[serde(default)]
    pub(crate) evident_at: Option<u64>,
}

/// How many steps before `evident_at` a first verdict still counts as on time.
pub(crate) const EARLY: u64 = 1;
/// How many steps after `evident_at` a first verdict still counts as on time.
pub(crate) const LATE: u64 = 2;

/// Whether a first verdict at `caught` is on time for a loop evident at `evident`.
pub(crate) fn on_time(caught: u64, evident: u64) -> bool {
    caught + EARLY >= evident && caught <= evident + LATE
}

/// Per loop kind: looping runs, caught (at alert), caught on time, and runs whose label says
/// when the loop became evident (the denominator of the on-time rate); then the same at `stop`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindRow {
    /// Looping runs of this kind.
    pub runs: usize,
    /// How many were caught.
    pub caught: usize,
    /// How many were caught by the step the loop was evident.
    pub on_time: usize,
    pub(crate) timed: usize,
    /// Steps from `evident_at` to the first alert or stop, per caught run with a label.
    pub(crate) alert_delays: Vec<i64>,
    pub(crate) stopped: usize,
    pub(crate) stop_on_time: usize,
    /// Steps from `evident_at` to the first stop.
    pub(crate) stop_delays: Vec<i64>,
}

impl KindRow {
    /// Median and 90th percentile (nearest rank) of the steps from onset to the first alert.
    pub(crate) fn alert_steps(&self) -> Option<(i64, i64)> {
        median_p90(&self.alert_delays)
    }

    /// Median and 90th percentile (nearest rank) of the steps from onset to the first stop.
    pub fn stop_steps(&self) -> Option<(i64, i64)> {
        median_p90(&self.stop_delays)
    }
}

/// Nearest-rank percentile `q` (0..=100) of `xs`; the median is the lower middle.
pub(crate) fn percentile(xs: &[i64], q: usize) -> Option<i64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_unstable();
    let rank = (q * v.len()).div_ceil(100).max(1);
    Some(v[rank.min(v.len()) - 1])
}

fn median_p90(xs: &[i64]) -> Option<(i64, i64)> {
    Some((percentile(xs, 50)?, percentile(xs, 90)?))
}

/// A confusion matrix over runs: looping or healthy, caught or not.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Score {
    /// Looping runs caught.
    pub tp: usize,
    /// Healthy runs caught.
    pub fp: usize,
    pub(crate) fn_: usize,
    /// Healthy runs left alone.
    pub tn: usize,
}

impl Score {
    /// Of the runs caught, the share that loop (0 when none were caught).
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    /// Of the looping runs, the share caught (0 when none loop).
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
    /// Harmonic mean of precision and recall.
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// One detector's results.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectorRow {
    /// The detector.
    pub detector: String,
    /// Runs where this detector alerted or stopped: looping / healthy.
    pub(crate) tp: usize,
    pub(crate) fp: usize,
    /// Looping runs labeled with this detector's kind, and how many of them it caught.
    pub own_kind: usize,
    /// How many of those it caught.
    pub own_caught: usize,
    pub(crate) mean_steps_to_detection: Option<f64>,
}

impl DetectorRow {
    pub(crate) fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    /// Recall on the runs of its own kind.
    pub(crate) fn recall(&self) -> f64 {
        ratio(self.own_caught, self.own_kind)
    }
    pub(crate) fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

/// What happened to one labelled run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub(crate) run_id: String,
    pub(crate) looping: bool,
    pub(crate) kind: String,
    pub(crate) loop_start: Option<u64>,
    pub(crate) evident_at: Option<u64>,
    /// First step at which an alert or stop fired.
    pub(crate) caught_at: Option<u64>,
    /// First step at which a stop fired.
    pub(crate) stopped_at: Option<u64>,
    pub(crate) warned: bool,
    pub(crate) detectors: BTreeSet<String>,
    pub(crate) reported_loop_step_index: Option<u64>,
}

/// The result of evaluating the engine against a labelled corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    /// Every run's outcome.
    pub runs: Vec<RunResult>,
    /// Looping / healthy runs with an alert or stop.
    pub pooled: Score,
    /// Looping / healthy runs with a `stop` verdict (what halts an agent by default).
    pub stopped: Score,
    /// As `pooled`, with warnings counted as catches.
    pub lenient: Score,
    /// Per detector.
    pub detectors: Vec<DetectorRow>,
    /// Per scenario kind.
    pub kinds: BTreeMap<String, KindRow>,
    /// Over caught looping runs: first alert step minus the labeled loop start (min 0).
    pub mean_steps_to_detection: Option<f64>,
    /// Over caught looping runs: |reported loop_step_index − labeled loop start|.
    pub(crate) mean_start_error: Option<f64>,
    /// Runs with events but no label (left out of the scores).
    pub unlabeled_runs: usize,
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

fn read_labels(path: &Path) -> Result<BTreeMap<String, Label>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: Label = serde_json::from_str(line).map_err(|e| EvalError::Label {
            path: path.to_path_buf(),
            line: i + 1,
            why: e.to_string(),
        })?;
        out.insert(l.run_id.clone(), l);
    }
    Ok(out)
}

/// Replay every events file in `dir` and score the signals against `labels.jsonl`.
pub fn evaluate(dir: &Path, cfg: Arc<EngineConfig>) -> Result<EvalReport, EvalError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EvalError::Io { path, source }
    };
    let labels_path = dir.join("labels.jsonl");
    if !labels_path.exists() {
        return Err(EvalError::NoLabels(dir.to_path_buf()));
    }
    let labels = read_labels(&labels_path)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_name().is_some_and(|n| n != "labels.jsonl")
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(EvalError::NoEvents(dir.to_path_buf()));
    }
    // run → (signals as (detector, severity, step), reported loop_step_index)
    type Sig = (String, Severity, u64);
    let mut seen: BTreeMap<String, (Vec<Sig>, Option<u64>)> = BTreeMap::new();
    for f in &files {
        let bytes = std::fs::read(f).map_err(io(f))?;
        let (outs, _) = replay_to_vec(&bytes, cfg.clone(), 1);
        for o in outs {
            match o {
                OutputEvent::LoopWarning(s) | OutputEvent::LoopDetected(s) => {
                    seen.entry(s.run_id.clone()).or_default().0.push((
                        s.detector,
                        s.severity,
                        s.step_index,
                    ));
                }
                OutputEvent::RunTerminated(t) => {
                    seen.entry(t.run_id.clone()).or_default().1 = t.loop_step_index;
                }
            }
        }
    }
    let unlabeled_runs = seen.keys().filter(|r| !labels.contains_key(*r)).count();
    let mut runs = Vec::new();
    let mut pooled = Score::default();
    let mut stopped = Score::default();
    let mut lenient = Score::default();
    let mut kinds: BTreeMap<String, KindRow> = BTreeMap::new();
    let mut det: BTreeMap<String, (usize, usize, usize, Vec<f64>)> = BTreeMap::new();
    let mut own_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut delays = Vec::new();
    let mut start_err = Vec::new();
    for (run_id, l) in &labels {
        let (sigs, reported) = seen.get(run_id).cloned().unwrap_or_default();
        let caught: Vec<&Sig> = sigs.iter().filter(|s| s.1.is_caught()).collect();
        let caught_at = caught.iter().map(|s| s.2).min();
        let stopped_at = sigs
            .iter()
            .filter(|s| s.1 == Severity::Stop)
            .map(|s| s.2)
            .min();
        let warned = sigs.iter().any(|s| s.1 >= Severity::Warn);
        let kind = l.kind.clone().unwrap_or_else(|| {
            if l.looping {
                "loop".into()
            } else {
                "healthy".into()
            }
        });
        let detectors: BTreeSet<String> = caught.iter().map(|s| s.0.clone()).collect();
        match (l.looping, caught_at.is_some()) {
            (true, true) => pooled.tp += 1,
            (true, false) => pooled.fn_ += 1,
            (false, true) => pooled.fp += 1,
            (false, false) => pooled.tn += 1,
        }
        match (l.looping, stopped_at.is_some()) {
            (true, true) => stopped.tp += 1,
            (true, false) => stopped.fn_ += 1,
            (false, true) => stopped.fp += 1,
            (false, false) => stopped.tn += 1,
        }
        match (l.looping, warned) {
            (true, true) => lenient.tp += 1,
            (true, false) => lenient.fn_ += 1,
            (false, true) => lenient.fp += 1,
            (false, false) => lenient.tn += 1,
        }
        if l.looping {
            let e = kinds.entry(kind.clone()).or_default();
            e.runs += 1;
            *own_kind.entry(kind.clone()).or_default() += 1;
            if stopped_at.is_some() {
                e.stopped += 1;
            }
            if let Some(at) = l.evident_at {
                e.timed += 1;
                let from = |c: u64| c as i64 - at as i64;
                if let Some(c) = caught_at {
                    e.on_time += usize::from(on_time(c, at));
                    e.alert_delays.push(from(c));
                }
                if let Some(c) = stopped_at {
                    e.stop_on_time += usize::from(on_time(c, at));
                    e.stop_delays.push(from(c));
                }
            }
            if let (Some(c), Some(s)) = (caught_at, l.loop_start) {
                e.caught += 1;
                delays.push(c.saturating_sub(s) as f64);
                if let Some(r) = reported {
                    start_err.push((r as f64 - s as f64).abs());
                }
            } else if caught_at.is_some() {
                e.caught += 1;
            }
        }
        for d in &detectors {
            let e = det.entry(d.clone()).or_default();
            if l.looping {
                e.0 += 1;
                if *d == kind {
                    e.2 += 1;
                }
                let first = caught.iter().filter(|s| &s.0 == d).map(|s| s.2).min();
                if let (Some(c), Some(s)) = (first, l.loop_start) {
                    e.3.push(c.saturating_sub(s) as f64);
                }
            } else {
                e.1 += 1;
            }
        }
        runs.push(RunResult {
            run_id: run_id.clone(),
            looping: l.looping,
            kind,
            loop_start: l.loop_start,
            evident_at: l.evident_at,
            caught_at,
            stopped_at,
            warned,
            detectors,
            reported_loop_step_index: reported,
        });
    }
    for k in own_kind.keys() {
        det.entry(k.clone()).or_default();
    }
    let detectors = det
        .into_iter()
        .map(|(d, (tp, fp, own_caught, ds))| DetectorRow {
            own_kind: own_kind.get(&d).copied().unwrap_or(0),
            detector: d,
            tp,
            fp,
            own_caught,
            mean_steps_to_detection: mean(&ds),
        })
        .collect();
    Ok(EvalReport {
        runs,
        pooled,
        stopped,
        lenient,
        detectors,
        kinds,
        mean_steps_to_detection: mean(&delays),
        mean_start_error: mean(&start_err),
        unlabeled_runs,
    })
}

fn on_time_cell(on: usize, timed: usize) -> String {
    if timed == 0 {
        "-".to_string()
    } else {
        format!("{on}/{timed} ({:.2})", ratio(on, timed))
    }
}

fn level_cells(caught: usize, on: usize, timed: usize, steps: Option<(i64, i64)>) -> String {
    let steps = steps.map_or("-".to_string(), |(m, p)| format!("{m} ({p})"));
    format!("{caught} | {} | {steps}", on_time_cell(on, timed))
}

fn write_kind<W: Write>(w: &mut W, kind: &str, r: &KindRow) -> std::io::Result<()> {
    writeln!(
        w,
        "| {kind} | {} | {} | {} |",
        r.runs,
        level_cells(r.caught, r.on_time, r.timed, r.alert_steps()),
        level_cells(r.stopped, r.stop_on_time, r.timed, r.stop_steps())
    )
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.1}"))
}

impl EvalReport {
    /// Over looping runs whose label says when the loop became evident: (on time, such runs).
    pub fn on_time(&self) -> (usize, usize) {
        self.kinds
            .values()
            .fold((0, 0), |(o, t), r| (o + r.on_time, t + r.timed))
    }

    /// The same at `stop`: (stopped on time, runs with an `evident_at`).
    pub fn stop_on_time(&self) -> (usize, usize) {
        self.kinds
            .values()
            .fold((0, 0), |(o, t), r| (o + r.stop_on_time, t + r.timed))
    }

    /// Writes the report as a table for humans.
    pub fn print<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        let looping = self.runs.iter().filter(|r| r.looping).count();
        writeln!(
            w,
            "{} labeled runs ({} looping, {} healthy){}",
            self.runs.len(),
            looping,
            self.runs.len() - looping,
            if self.unlabeled_runs > 0 {
                format!(", {} unlabeled runs ignored", self.unlabeled_runs)
            } else {
                String::new()
            }
        )?;
        writeln!(w)?;
        writeln!(w, "| detector | caught looping | fired on healthy | precision | recall (own kind) | F1 | mean steps to detection |")?;
        writeln!(w, "|---|---|---|---|---|---|---|")?;
        for d in &self.detectors {
            writeln!(
                w,
                "| {} | {} | {} | {:.2} | {:.2} ({}/{}) | {:.2} | {} |",
                d.detector,
                d.tp,
                d.fp,
                d.precision(),
                d.recall(),
                d.own_caught,
                d.own_kind,
                d.f1(),
                opt(d.mean_steps_to_detection)
            )?;
        }
        let p = &self.pooled;
        writeln!(
            w,
            "| **pooled (alert/stop)** | {} | {} | {:.2} | {:.2} ({}/{}) | {:.2} | {} |",
            p.tp,
            p.fp,
            p.precision(),
            p.recall(),
            p.tp,
            p.tp + p.fn_,
            p.f1(),
            opt(self.mean_steps_to_detection)
        )?;
        let p = &self.stopped;
        writeln!(
            w,
            "| pooled, stop only | {} | {} | {:.2} | {:.2} ({}/{}) | {:.2} | - |",
            p.tp,
            p.fp,
            p.precision(),
            p.recall(),
            p.tp,
            p.tp + p.fn_,
            p.f1()
        )?;
        let l = &self.lenient;
        writeln!(
            w,
            "| pooled, lenient (warn+) | {} | {} | {:.2} | {:.2} ({}/{}) | {:.2} | - |",
            l.tp,
            l.fp,
            l.precision(),
            l.recall(),
            l.tp,
            l.tp + l.fn_,
            l.f1()
        )?;
        writeln!(w)?;
        writeln!(
            w,
            "| loop kind | runs | alert: caught | on time | steps from onset, median (p90) | stop: caught | on time | steps from onset, median (p90) |"
        )?;
        writeln!(w, "|---|---|---|---|---|---|---|---|")?;
        let mut all = KindRow::default();
        for (k, r) in &self.kinds {
            write_kind(w, k, r)?;
            all.runs += r.runs;
            all.caught += r.caught;
            all.on_time += r.on_time;
            all.timed += r.timed;
            all.alert_delays.extend(&r.alert_delays);
            all.stopped += r.stopped;
            all.stop_on_time += r.stop_on_time;
            all.stop_delays.extend(&r.stop_delays);
        }
        write_kind(w, "**all**", &all)?;
        writeln!(w)?;
        writeln!(
            w,
            "on time: from {EARLY} step before to {LATE} after the labeled onset (`evident_at`)"
        )?;
        writeln!(
            w,
            "healthy runs with an alert or stop: {} of {}; with a stop: {} of {}",
            self.pooled.fp,
            self.pooled.fp + self.pooled.tn,
            self.stopped.fp,
            self.stopped.fp + self.stopped.tn
        )?;
        writeln!(
            w,
            "mean |loop_step_index - labeled start| on caught runs: {}",
            opt(self.mean_start_error)
        )?;
        let misses: Vec<&RunResult> = self
            .runs
            .iter()
            .filter(|r| r.looping && r.caught_at.is_none())
            .collect();
        let fps: Vec<&RunResult> = self
            .runs
            .iter()
            .filter(|r| !r.looping && r.caught_at.is_some())
            .collect();
        let late: Vec<&RunResult> = self
            .runs
            .iter()
            .filter(|r| match (r.caught_at, r.evident_at) {
                (Some(c), Some(e)) => r.looping && !on_time(c, e),
                _ => false,
            })
            .collect();
        for r in late {
            writeln!(
                w,
                "not on time: {} ({}) caught at {}, evident at {}",
                r.run_id,
                r.kind,
                r.caught_at.unwrap_or(0),
                r.evident_at.unwrap_or(0)
            )?;
        }
        for r in misses {
            writeln!(
                w,
                "missed: {} ({}){}",
                r.run_id,
                r.kind,
                if r.warned { " [warned]" } else { "" }
            )?;
        }
        for r in fps {
            writeln!(
                w,
                "false positive: {} at step {} by {}{}",
                r.run_id,
                r.caught_at.unwrap_or(0),
                r.detectors.iter().cloned().collect::<Vec<_>>().join(","),
                r.stopped_at
                    .map_or(String::new(), |s| format!(", stopped at {s}"))
            )?;
        }
        for r in self.runs.iter().filter(|r| r.looping) {
            match (r.caught_at, r.stopped_at, r.evident_at) {
                (Some(_), None, _) => writeln!(w, "alert, no stop: {} ({})", r.run_id, r.kind)?,
                (_, Some(s), Some(e)) if !on_time(s, e) => writeln!(
                    w,
                    "stop not on time: {} ({}) stopped at {s}, evident at {e}",
                    r.run_id, r.kind
                )?,
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 90), Some(7));
        // 1..=10: the 5th and the 9th value.
        let xs: Vec<i64> = (1..=10).rev().collect();
        assert_eq!(percentile(&xs, 50), Some(5));
        assert_eq!(percentile(&xs, 90), Some(9));
        assert_eq!(median_p90(&[-1, 0, 4]), Some((0, 4)));
    }
}
