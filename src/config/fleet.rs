//! `[fleet]`: what `eddy fleet-watch` compares, how much it must see before it judges, and where
//! its alerts and its progress go.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// Topic of `fleet_alert` events (key = agent name). Kept apart from the signals topic so
    /// that readers of per-run verdicts never meet an event without a run.
    pub(crate) alert_topic: String,
    /// Compacted topic holding, per project, the end of the last window evaluated. Written in
    /// the same Kafka transaction as that window's alerts.
    pub(crate) state_topic: String,
    /// Transactional id of the publisher: stable across restarts, so a new instance fences an
    /// old one (and aborts its unfinished window). Default: `eddy-fleet-watch-<database>`.
    pub(crate) transactional_id: Option<String>,
    /// Window length in event time (a multiple of 60: rollups are per minute).
    pub(crate) window_seconds: u32,
    /// The baseline is the agent's preceding this many windows.
    pub(crate) baseline_windows: u32,
    /// A window is evaluated once the project's newest rollup minute is this far past its end,
    /// so rows of runs still open at its end (and late partitions) have arrived.
    pub(crate) settle_seconds: u32,
    /// Fewer runs than this in the current window, or in the baseline, and nothing is judged.
    pub(crate) min_runs: u64,
    /// Alert only when the current value is at least `ratio` × the baseline ...
    pub(crate) ratio: f64,
    /// ... and at least this much above it: loop rate (a fraction of runs ended) ...
    pub(crate) loop_rate_min_rise: f64,
    /// ... and loop cost per run (USD spent after a run's loop was caught, per active run).
    pub(crate) loop_cost_min_rise_usd: f64,
    /// ... and only when chance explains the window this poorly: the one-sided p-value of the
    /// window under the baseline (binomial for loop rate, Welch's for loop cost per run).
    /// With 40 runs a window, a steady 10 % loop rate sees 20 % about once in a hundred
    /// windows; the default asks for one in a thousand.
    pub(crate) max_p_value: f64,
    /// Runs named in an alert as examples.
    pub(crate) example_runs: usize,
    /// `coder@2.1` is agent `coder`, version `2.1` (split at the last separator); empty: agent
    /// names carry no version.
    pub(crate) version_separator: String,
    /// With no progress recorded yet, evaluate at most this many most recent closed windows.
    pub(crate) backfill_windows: u32,
    /// How often the daemon looks for newly closed windows.
    pub(crate) interval_ms: u64,
    /// Admin server (/metrics, /livez, /readyz) of `eddy fleet-watch`; unset, none is started.
    pub(crate) admin_addr: Option<String>,
    /// `[fleet.notify]`: destinations (webhook, Slack, PagerDuty, Alertmanager) and retries.
    pub(crate) notify: super::notify::NotifyConfig,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            alert_topic: "agent.fleet_alerts".into(),
            state_topic: "agent.fleet_alerts.state".into(),
            transactional_id: None,
            window_seconds: 3600,
            baseline_windows: 6,
            settle_seconds: 900,
            min_runs: 20,
            ratio: 2.0,
            loop_rate_min_rise: 0.10,
            loop_cost_min_rise_usd: 0.05,
            max_p_value: 0.001,
            example_runs: 5,
            version_separator: "@".into(),
            backfill_windows: 1,
            interval_ms: 60_000,
            admin_addr: None,
            notify: Default::default(),
        }
    }
}

impl FleetConfig {
    /// Why this configuration cannot work, naming the setting.
    pub(crate) fn problem(&self) -> Option<String> {
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if self.alert_topic.trim().is_empty() || self.state_topic.trim().is_empty() {
            return Some("fleet.alert_topic and fleet.state_topic must not be empty".into());
        }
        if self.alert_topic == self.state_topic {
            return Some("fleet.alert_topic and fleet.state_topic must differ".into());
        }
        if self.window_seconds == 0 || !self.window_seconds.is_multiple_of(60) {
            return Some(format!(
                "fleet.window_seconds = {} must be a positive multiple of 60 (rollups are per minute)",
                self.window_seconds
            ));
        }
        if self.baseline_windows == 0 {
            return Some("fleet.baseline_windows must be at least 1".into());
        }
        if self.min_runs == 0 {
            return Some("fleet.min_runs must be at least 1".into());
        }
        if !self.ratio.is_finite() || self.ratio < 1.0 {
            return Some(format!("fleet.ratio = {} must be at least 1", self.ratio));
        }
        if !finite(self.loop_rate_min_rise) || !finite(self.loop_cost_min_rise_usd) {
            return Some(
                "fleet.loop_rate_min_rise and fleet.loop_cost_min_rise_usd must be finite and >= 0"
                    .into(),
            );
        }
        if !(self.max_p_value > 0.0 && self.max_p_value <= 1.0) {
            return Some(format!(
                "fleet.max_p_value = {} must be in (0, 1]",
                self.max_p_value
            ));
        }
        if self.interval_ms == 0 {
            return Some("fleet.interval_ms must be positive".into());
        }
        self.notify.problem()
    }

    pub(crate) fn transactional_id(&self, database: &str) -> String {
        self.transactional_id
            .clone()
            .unwrap_or_else(|| format!("eddy-fleet-watch-{database}"))
    }

    /// The notifier's own producer: it commits each delivery's progress (and dead letter)
    /// apart from the evaluator's windows, and is fenced with it by a second instance.
    pub(crate) fn notify_transactional_id(&self, database: &str) -> String {
        format!("{}.notify", self.transactional_id(database))
    }
}
