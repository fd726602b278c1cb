//! The `fleet_alert` event and its deterministic id.
use crate::contract::output::event_id;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The window being judged: `[start, start + window_seconds)` in event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: u32,
    pub seconds: u32,
}

impl Window {
    pub fn end(self) -> u32 {
        self.start.saturating_add(self.seconds)
    }
    /// Where the rows `evaluate` needs begin: the first baseline window.
    pub fn baseline_start(self, baseline_windows: u32) -> u32 {
        self.start
            .saturating_sub(self.seconds.saturating_mul(baseline_windows))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Runs that ended in the window with a loop caught, over runs that ended in it.
    LoopRate,
    /// USD spent after runs' loops were caught, over runs active in the window.
    LoopCostPerRun,
}

impl Metric {
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::LoopRate => "loop_rate",
            Metric::LoopCostPerRun => "loop_cost_per_run",
        }
    }
}

/// A metric's value and the runs it is over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub value: f64,
    pub runs: u64,
}

/// One series' regression in one window. Published on `fleet.alert_topic`, key = agent name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "fleet_alert")]
pub struct FleetAlert {
    pub event_id: String,
    pub project_id: String,
    /// The agent, without its version.
    pub agent_name: String,
    /// Set when the alert is about one version of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    pub metric: Metric,
    /// The window judged, `[window_start, window_end)`, event time, RFC 3339 UTC.
    pub window_start: String,
    pub window_end: String,
    /// Where the baseline windows begin (they end at `window_start`).
    pub baseline_start: String,
    /// The agent's value over the baseline windows (all its versions).
    pub baseline: Stat,
    /// The series' value in the window.
    pub current: Stat,
    /// Runs of the series in the window that looped, costliest loop first.
    pub example_run_ids: Vec<String>,
}

pub fn rfc3339(secs: u32) -> String {
    OffsetDateTime::from_unix_timestamp(i64::from(secs))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

impl FleetAlert {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        project: &str,
        agent: &str,
        version: Option<&str>,
        metric: Metric,
        window: Window,
        baseline_windows: u32,
        baseline: Stat,
        current: Stat,
        example_run_ids: Vec<String>,
    ) -> Self {
        let (start, end) = (rfc3339(window.start), rfc3339(window.end()));
        Self {
            event_id: alert_id(project, agent, version.unwrap_or(""), metric, &start, &end),
            project_id: project.into(),
            agent_name: agent.into(),
            agent_version: version.map(str::to_owned),
            metric,
            window_start: start,
            window_end: end,
            baseline_start: rfc3339(window.baseline_start(baseline_windows)),
            baseline,
            current,
            example_run_ids,
        }
    }

    /// The Kafka key: the agent, so one agent's alerts stay in order on one partition.
    pub fn key(&self) -> &str {
        &self.agent_name
    }
}

/// `sha256("eddy.v1", project, "fleet_alert", agent, version, metric, window_start,
/// window_end)`, each part length-prefixed (docs/fingerprints.md): the same regression of the
/// same window always has the same id, whoever evaluates it and however often.
pub fn alert_id(
    project: &str,
    agent: &str,
    version: &str,
    metric: Metric,
    window_start: &str,
    window_end: &str,
) -> String {
    event_id(&[
        project,
        "fleet_alert",
        agent,
        version,
        metric.as_str(),
        window_start,
        window_end,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event carries exactly what schemas/v1/output-event.schema.json's `fleet_alert`
    /// branch declares, and every field it requires.
    #[test]
    fn the_event_matches_its_schema_branch() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/v1/output-event.schema.json"))
                .unwrap();
        let branch = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["kind"]["const"] == "fleet_alert")
            .expect("a fleet_alert branch");
        let stat = Stat {
            value: 0.5,
            runs: 30,
        };
        let w = Window {
            start: 1_767_247_200,
            seconds: 3600,
        };
        let a = FleetAlert::new(
            "p",
            "coder",
            Some("2"),
            Metric::LoopRate,
            w,
            6,
            stat,
            stat,
            vec!["r".into()],
        );
        let v = serde_json::to_value(&a).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj["kind"], "fleet_alert");
        let mut declared: Vec<&str> = branch["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        declared.extend(["event_id", "project_id"]); // declared at the root
        for k in obj.keys() {
            assert!(declared.contains(&k.as_str()), "{k} is not in the schema");
        }
        for r in branch["required"]
            .as_array()
            .unwrap()
            .iter()
            .chain(schema["required"].as_array().unwrap())
        {
            assert!(obj.contains_key(r.as_str().unwrap()), "{r} is missing");
        }
        assert!(!obj.contains_key("run_id"));
        // Round trip: what consumers decode is what was sent.
        assert_eq!(serde_json::from_value::<FleetAlert>(v).unwrap(), a);
    }
}
