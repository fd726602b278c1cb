//! `eddy eval DIR`: precision / recall / F1 of the detectors on a labeled corpus.
//!
//! `DIR` holds v1 events as JSONL (`*.jsonl`, any number of files, runs interleaved) and
//! `labels.jsonl`, one object per run: `{"run_id", "looping", "kind", "loop_start",
//! "evident_at"}` where `kind` names the detector expected to catch it, `loop_start` is the
//! step_index where the repetition begins and `evident_at` the step at which a careful reviewer
//! would first call the run a loop. Each events file is replayed through the engine exactly as
//! `eddy replay` does (one partition). A run counts as *detected* when any `alert` or `stop`
//! fired for it (strict, the product's definition); the lenient line also counts `warn`. A
//! detection is *on time* when its first alert or stop falls from [`EARLY`] step before to
//! [`LATE`] steps after `evident_at`: an out-of-process guard that waits longer lets the agent
//! spend more calls than the in-process guards do.
use crate::contract::{OutputEvent, Severity};
use crate::engine::EngineConfig;
use crate::replay::replay_to_vec;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: bad label: {why}")]
    Label {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("{0} has no labels.jsonl")]
    NoLabels(PathBuf),
    #[error("{0} has no *.jsonl event files")]
    NoEvents(PathBuf),
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Label {
    pub run_id: String,
    pub looping: bool,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub loop_start: Option<u64>,
    #[serde(default)]
    pub evident_at: Option<u64>,
}

/// How many steps before `evident_at` a first verdict still counts as on time.
pub const EARLY: u64 = 1;
/// How many steps after `evident_at` a first verdict still counts as on time.
pub const LATE: u64 = 2;

/// Whether a first verdict at `caught` is on time for a loop evident at `evident`.
pub fn on_time(caught: u64, evident: u64) -> bool {
    caught + EARLY >= evident && caught <= evident + LATE
}

/// Per loop kind: looping runs, caught, caught on time, and runs whose label says when the
/// loop became evident (the denominator of the on-time rate).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KindRow {
    pub runs: usize,
    pub caught: usize,
    pub on_time: usize,
    pub timed: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Score {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub tn: usize,
}

impl Score {
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
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

#[derive(Debug, Clone, PartialEq)]
pub struct DetectorRow {
    pub detector: String,
    /// Runs where this detector alerted or stopped: looping / healthy.
    pub tp: usize,
    pub fp: usize,
    /// Looping runs labeled with this detector's kind, and how many of them it caught.
    pub own_kind: usize,
    pub own_caught: usize,
    pub mean_steps_to_detection: Option<f64>,
}

impl DetectorRow {
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }
    /// Recall on the runs of its own kind.
    pub fn recall(&self) -> f64 {
        ratio(self.own_caught, self.own_kind)
    }
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub run_id: String,
    pub looping: bool,
    pub kind: String,
    pub loop_start: Option<u64>,
    pub evident_at: Option<u64>,
    /// First step at which an alert or stop fired.
    pub caught_at: Option<u64>,
    pub warned: bool,
    pub detectors: BTreeSet<String>,
    pub reported_loop_step_index: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    pub runs: Vec<RunResult>,
    pub pooled: Score,
    pub lenient: Score,
    pub detectors: Vec<DetectorRow>,
    pub kinds: BTreeMap<String, KindRow>,
    /// Over caught looping runs: first alert step minus the labeled loop start (min 0).
    pub mean_steps_to_detection: Option<f64>,
    /// Over caught looping runs: |reported loop_step_index − labeled loop start|.
    pub mean_start_error: Option<f64>,
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
            if let Some(at) = l.evident_at {
                e.timed += 1;
                if caught_at.is_some_and(|c| on_time(c, at)) {
                    e.on_time += 1;
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
            "| loop kind | runs | caught | on time (-{EARLY}..+{LATE} steps of evident) |"
        )?;
        writeln!(w, "|---|---|---|---|")?;
        for (k, r) in &self.kinds {
            writeln!(
                w,
                "| {k} | {} | {} | {} |",
                r.runs,
                r.caught,
                on_time_cell(r.on_time, r.timed)
            )?;
        }
        let (on, timed) = self.on_time();
        writeln!(
            w,
            "| **all** | {} | {} | {} |",
            self.pooled.tp + self.pooled.fn_,
            self.pooled.tp,
            on_time_cell(on, timed)
        )?;
        writeln!(w)?;
        writeln!(
            w,
            "healthy runs with an alert or stop: {} of {}",
            self.pooled.fp,
            self.pooled.fp + self.pooled.tn
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
                "false positive: {} at step {} by {}",
                r.run_id,
                r.caught_at.unwrap_or(0),
                r.detectors.iter().cloned().collect::<Vec<_>>().join(",")
            )?;
        }
        Ok(())
    }
}
