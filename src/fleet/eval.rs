//! The decision, pure: rollup minutes of the baseline and current windows in, alerts out. No
//! I/O and no clock, so one window's rows always give the same alerts, byte for byte.
use super::alert::{FleetAlert, Metric, Stat, Window};
use crate::config::FleetConfig;
use std::collections::BTreeMap;

/// One run's contribution to one minute, as `rollup_minute FINAL` holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MinuteRow {
    /// Epoch seconds of the minute.
    pub(crate) bucket: u32,
    pub(crate) agent_name: String,
    pub(crate) run_id: String,
    pub(crate) runs_ended: u8,
    pub(crate) loop_runs: u8,
    pub(crate) loop_cost_usd: f64,
}

/// A run inside one window.
#[derive(Debug, Default, Clone)]
struct RunInWindow {
    ended: bool,
    looped: bool,
    loop_cost: f64,
}

/// Runs of one series (an agent, or one version of it) over some windows.
#[derive(Debug, Default)]
struct Series<'a> {
    /// (window start, run id) → the run there: a run active in two windows counts in each.
    runs: BTreeMap<(u32, &'a str), RunInWindow>,
}

impl<'a> Series<'a> {
    fn add(&mut self, window: u32, r: &'a MinuteRow) {
        let e = self.runs.entry((window, r.run_id.as_str())).or_default();
        e.ended |= r.runs_ended > 0;
        e.looped |= r.loop_runs > 0;
        e.loop_cost += r.loop_cost_usd;
    }

    /// (value, runs it is over) of a metric.
    fn stat(&self, m: Metric) -> (f64, u64) {
        match m {
            Metric::LoopRate => {
                let ended = self.runs.values().filter(|r| r.ended).count() as u64;
                let looped = self.runs.values().filter(|r| r.ended && r.looped).count() as u64;
                (ratio(looped as f64, ended), ended)
            }
            Metric::LoopCostPerRun => {
                // Summed in key order: the same rows always give the same bits.
                let cost: f64 = self.runs.values().map(|r| r.loop_cost).sum();
                let n = self.runs.len() as u64;
                (ratio(cost, n), n)
            }
        }
    }

    /// Runs that looped or spent inside a loop: costliest first, then by id.
    fn examples(&self, n: usize) -> Vec<String> {
        let mut v: Vec<(&str, f64)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.looped || r.loop_cost > 0.0)
            .map(|((_, id), r)| (*id, r.loop_cost))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let mut out: Vec<String> = Vec::new();
        for (id, _) in v {
            if !out.iter().any(|o| o == id) {
                out.push(id.to_string());
            }
            if out.len() == n {
                break;
            }
        }
        out
    }
}

impl Series<'_> {
    /// How unlikely the current window is if the baseline still held (one-sided p-value).
    ///
    /// Loop rate: the binomial tail, P(at least this many looping runs of those that ended)
    /// at the baseline's rate. Loop cost per run: Welch's statistic on per-run loop cost,
    /// read on the normal tail (the run counts `min_runs` asks for keep it close enough).
    fn p_value(&self, base: &Series, m: Metric) -> f64 {
        match m {
            Metric::LoopRate => {
                let (p0, _) = base.stat(m);
                let ended = self.runs.values().filter(|r| r.ended);
                let (n, k) = ended.fold((0u64, 0u64), |(n, k), r| (n + 1, k + u64::from(r.looped)));
                binomial_tail(n, k, p0)
            }
            Metric::LoopCostPerRun => {
                let (mc, vc, nc) = self.cost_moments();
                let (mb, vb, nb) = base.cost_moments();
                let se = (vc / nc + vb / nb).sqrt();
                if nc < 2.0 || nb < 2.0 || se == 0.0 {
                    // No spread to judge by: the ratio and rise decide alone.
                    return if mc > mb { 0.0 } else { 1.0 };
                }
                normal_tail((mc - mb) / se)
            }
        }
    }

    /// Mean, sample variance and count of per-run loop cost.
    fn cost_moments(&self) -> (f64, f64, f64) {
        let n = self.runs.len() as f64;
        if n == 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let mean = self.runs.values().map(|r| r.loop_cost).sum::<f64>() / n;
        let ss: f64 = self
            .runs
            .values()
            .map(|r| (r.loop_cost - mean).powi(2))
            .sum();
        (mean, if n > 1.0 { ss / (n - 1.0) } else { 0.0 }, n)
    }
}

/// P(X >= k) for X ~ Binomial(n, p), summed in log space (no underflow at large n).
pub(crate) fn binomial_tail(n: u64, k: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // log C(n, k) p^k q^(n-k), then each next term by the ratio of consecutive terms.
    let mut log_t = (1..=k)
        .map(|i| ((n - k + i) as f64).ln() - (i as f64).ln())
        .sum::<f64>()
        + k as f64 * lp
        + (n - k) as f64 * lq;
    let first = log_t;
    let mut sum = 1.0; // terms relative to the first
    for i in k..n {
        log_t += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + lp - lq;
        sum += (log_t - first).exp();
    }
    (first + sum.ln()).exp().min(1.0)
}

/// P(Z >= z) for a standard normal Z (Abramowitz and Stegun 7.1.26, error below 1.5e-7).
pub(crate) fn normal_tail(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erfc = poly * (-x * x).exp();
    if z >= 0.0 {
        erfc / 2.0
    } else {
        1.0 - erfc / 2.0
    }
}

fn ratio(num: f64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num / den as f64
    }
}

/// Values in alerts are rounded to a millionth: what a reader compares, not float noise.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// `coder@2.1` → (`coder`, `2.1`); no separator (or an empty one) → (`coder`, ``).
pub(crate) fn split_version<'a>(agent_name: &'a str, sep: &str) -> (&'a str, &'a str) {
    if sep.is_empty() {
        return (agent_name, "");
    }
    match agent_name.rsplit_once(sep) {
        Some((a, v)) if !a.is_empty() && !v.is_empty() => (a, v),
        _ => (agent_name, ""),
    }
}

/// The alerts of `window` in `project`, from the minutes of it and of its baseline windows
/// (rows outside both are ignored).
///
/// Series are each agent (all its runs) and each version of it seen in the window; the
/// baseline is always the agent's, all versions together, so a version new in this window is
/// judged against what its agent did before. A version's alert names the version; the agent's
/// own alert for the same metric is then left out (it would say the same thing, diluted).
pub(crate) fn evaluate(
    project: &str,
    window: Window,
    rows: &[MinuteRow],
    cfg: &FleetConfig,
) -> Vec<FleetAlert> {
    let from = window.baseline_start(cfg.baseline_windows);
    let mut baseline: BTreeMap<&str, Series> = BTreeMap::new();
    let mut current: BTreeMap<&str, Series> = BTreeMap::new();
    let mut versions: BTreeMap<(&str, &str), Series> = BTreeMap::new();
    // Summed in (minute, run) order whatever order the rows came in: same rows, same bits.
    let mut sorted: Vec<&MinuteRow> = rows
        .iter()
        .filter(|r| r.bucket >= from && r.bucket < window.end())
        .collect();
    sorted.sort_by(|a, b| (a.bucket, &a.run_id).cmp(&(b.bucket, &b.run_id)));
    for r in sorted {
        let w = r.bucket - (r.bucket - from) % window.seconds;
        let (agent, version) = split_version(&r.agent_name, &cfg.version_separator);
        if r.bucket < window.start {
            baseline.entry(agent).or_default().add(w, r);
        } else {
            current.entry(agent).or_default().add(w, r);
            if !version.is_empty() {
                versions.entry((agent, version)).or_default().add(w, r);
            }
        }
    }
    let mut out = Vec::new();
    for (agent, cur) in &current {
        let Some(base) = baseline.get(agent) else {
            continue;
        };
        for metric in [Metric::LoopRate, Metric::LoopCostPerRun] {
            let (b, b_runs) = base.stat(metric);
            let judge = |s: &Series, version: Option<&str>| -> Option<FleetAlert> {
                let (c, c_runs) = s.stat(metric);
                let min_rise = match metric {
                    Metric::LoopRate => cfg.loop_rate_min_rise,
                    Metric::LoopCostPerRun => cfg.loop_cost_min_rise_usd,
                };
                let fires = c_runs >= cfg.min_runs
                    && b_runs >= cfg.min_runs
                    && c >= b * cfg.ratio
                    && c - b >= min_rise
                    && s.p_value(base, metric) <= cfg.max_p_value;
                fires.then(|| {
                    FleetAlert::new(
                        project,
                        agent,
                        version,
                        metric,
                        window,
                        cfg.baseline_windows,
                        Stat {
                            value: round6(b),
                            runs: b_runs,
                        },
                        Stat {
                            value: round6(c),
                            runs: c_runs,
                        },
                        s.examples(cfg.example_runs),
                    )
                })
            };
            let by_version: Vec<FleetAlert> = versions
                .range((*agent, "")..)
                .take_while(|((a, _), _)| a == agent)
                .filter_map(|((_, v), s)| judge(s, Some(*v)))
                .collect();
            if by_version.is_empty() {
                out.extend(judge(cur, None));
            } else {
                out.extend(by_version);
            }
        }
    }
    out
}

/// Window starts to evaluate: after `done_until` (or, with no progress, the last
/// `backfill` closed ones), up to the last window that ends by `closed_until`.
pub(crate) fn due_windows(
    done_until: Option<u32>,
    closed_until: u32,
    seconds: u32,
    backfill: u32,
) -> Vec<u32> {
    let last_end = closed_until - closed_until % seconds;
    let first = match done_until {
        Some(d) => d.div_ceil(seconds).saturating_mul(seconds),
        None => last_end.saturating_sub(backfill.saturating_mul(seconds)),
    };
    let mut v = Vec::new();
    let mut s = first;
    while s.saturating_add(seconds) <= last_end && seconds > 0 {
        v.push(s);
        s += seconds;
    }
    v
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
