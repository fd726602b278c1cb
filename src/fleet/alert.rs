//! The `fleet_alert` event and its deterministic id.
use crate::contract::output::event_id;
use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// The window being judged: `[start, start + window_seconds)` in event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start: u32,
    pub(crate) seconds: u32,
}

impl Window {
    pub(crate) fn end(self) -> u32 {
        self.start.saturating_add(self.seconds)
    }
    /// Where the rows `evaluate` needs begin: the first baseline window.
    pub(crate) fn baseline_start(self, baseline_windows: u32) -> u32 {
        self.start
            .saturating_sub(self.seconds.saturating_mul(baseline_windows))
    }
}

/// What fleet-watch tracks per agent and window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Runs that ended in the window with a loop caught, over runs that ended in it.
    LoopRate,
    /// USD spent after runs' loops were caught, over runs active in the window.
    LoopCostPerRun,
}

impl Metric {
    pub(crate) fn as_str(self) -> &'static str {
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
    /// Deterministic id, so a re-run pass does not alert twice.
    pub event_id: String,
    /// The project the agent runs in.
    pub project_id: String,
    /// The agent, without its version.
    pub agent_name: String,
    /// Set when the alert is about one version of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The metric that regressed.
    pub metric: Metric,
    /// The window judged, `[window_start, window_end)`, event time, RFC 3339 UTC.
    pub window_start: String,
    /// End of the window judged (exclusive).
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

/// An alert still open after its window: what names its series, so the next window can tell
/// whether the series raised it again. Kept in the progress record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OpenAlert {
    pub(crate) event_id: String,
    pub(crate) agent_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_version: Option<String>,
    pub(crate) metric: Metric,
}

impl OpenAlert {
    fn of(a: &FleetAlert) -> Self {
        Self {
            event_id: a.event_id.clone(),
            agent_name: a.agent_name.clone(),
            agent_version: a.agent_version.clone(),
            metric: a.metric,
        }
    }
    fn same_series(&self, a: &FleetAlert) -> bool {
        (&self.agent_name, &self.agent_version, self.metric)
            == (&a.agent_name, &a.agent_version, a.metric)
    }
}

/// Why an alert was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Resolution {
    /// The next window did not raise it again (recovered, or too few runs to tell).
    Recovered,
    /// The next window raised it again: that window's alert (`superseded_by`) takes over.
    Superseded,
}

/// The end of one alert, published in the transaction of the window judged after the
/// alert's. Key = agent name, like the alert, so it follows it on the same partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename = "fleet_alert_resolved")]
pub(crate) struct FleetAlertResolved {
    /// `sha256("eddy.v1", project, "fleet_alert_resolved", resolves)`.
    pub(crate) event_id: String,
    pub(crate) project_id: String,
    /// The `event_id` of the alert this ends.
    pub(crate) resolves: String,
    pub(crate) agent_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_version: Option<String>,
    pub(crate) metric: Metric,
    pub(crate) reason: Resolution,
    /// The window judged after the alert's, `[window_start, window_end)`.
    pub(crate) window_start: String,
    pub(crate) window_end: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) superseded_by: Option<String>,
}

impl FleetAlertResolved {
    pub(crate) fn key(&self) -> &str {
        &self.agent_name
    }
}

/// The resolutions of `window` (the one judged after the alerts in `open`) given its
/// `alerts`, and what is open after it: exactly its alerts. Every alert is resolved by the
/// next window of its project, so a page never stays open on its own.
pub(crate) fn resolve(
    project: &str,
    window: Window,
    open: &[OpenAlert],
    alerts: &[FleetAlert],
) -> (Vec<FleetAlertResolved>, Vec<OpenAlert>) {
    let (start, end) = (rfc3339(window.start), rfc3339(window.end()));
    let resolved = open
        .iter()
        .map(|o| {
            let next = alerts.iter().find(|a| o.same_series(a));
            FleetAlertResolved {
                event_id: event_id(&[project, "fleet_alert_resolved", &o.event_id]),
                project_id: project.into(),
                resolves: o.event_id.clone(),
                agent_name: o.agent_name.clone(),
                agent_version: o.agent_version.clone(),
                metric: o.metric,
                reason: if next.is_some() {
                    Resolution::Superseded
                } else {
                    Resolution::Recovered
                },
                window_start: start.clone(),
                window_end: end.clone(),
                superseded_by: next.map(|a| a.event_id.clone()),
            }
        })
        .collect();
    (resolved, alerts.iter().map(OpenAlert::of).collect())
}

pub(crate) fn rfc3339(secs: u32) -> String {
    OffsetDateTime::from_unix_timestamp(i64::from(secs))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

impl FleetAlert {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
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
    pub(crate) fn key(&self) -> &str {
        &self.agent_name
    }
}

/// `sha256("eddy.v1", project, "fleet_alert", agent, version, metric, window_start,
/// window_end)`, each part length-prefixed (docs/fingerprints.md): the same regression of the
/// same window always has the same id, whoever evaluates it and however often.
pub(crate) fn alert_id(
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
    use std::collections::BTreeMap;

    fn alert(agent: &str, version: Option<&str>, metric: Metric, start: u32) -> FleetAlert {
        let stat = Stat {
            value: 0.5,
            runs: 30,
        };
        let w = Window {
            start,
            seconds: 3600,
        };
        FleetAlert::new("p", agent, version, metric, w, 6, stat, stat, vec![])
    }

    #[test]
    fn the_next_window_resolves_every_open_alert_once() {
        const H6: u32 = 1_767_225_600 + 6 * 3600;
        let w6 = [
            alert("coder", Some("2"), Metric::LoopRate, H6),
            alert("coder", Some("2"), Metric::LoopCostPerRun, H6),
            alert("reviewer", None, Metric::LoopRate, H6),
        ];
        let w7 = Window {
            start: H6 + 3600,
            seconds: 3600,
        };
        // Window 6 opens its three alerts and resolves nothing.
        let (r, open) = resolve(
            "p",
            Window {
                start: H6,
                seconds: 3600,
            },
            &[],
            &w6,
        );
        assert!(r.is_empty());
        assert_eq!(open.len(), 3);
        // Window 7 raises coder v2's loop rate again, and coder's (whole agent) loop cost: not
        // the same series as coder v2's.
        let again = [
            alert("coder", Some("2"), Metric::LoopRate, H6 + 3600),
            alert("coder", None, Metric::LoopCostPerRun, H6 + 3600),
        ];
        let (r, open7) = resolve("p", w7, &open, &again);
        let by: BTreeMap<&str, &FleetAlertResolved> =
            r.iter().map(|x| (x.resolves.as_str(), x)).collect();
        assert_eq!(by.len(), 3);
        let lr = by[w6[0].event_id.as_str()];
        assert_eq!(lr.reason, Resolution::Superseded);
        assert_eq!(
            lr.superseded_by.as_deref(),
            Some(again[0].event_id.as_str())
        );
        for a in &w6[1..] {
            let x = by[a.event_id.as_str()];
            assert_eq!(
                (x.reason, x.superseded_by.as_deref()),
                (Resolution::Recovered, None)
            );
            assert_eq!(
                (x.agent_name.as_str(), x.metric),
                (a.agent_name.as_str(), a.metric)
            );
        }
        assert_eq!(lr.window_start, "2026-01-01T07:00:00Z");
        assert_eq!(lr.window_end, "2026-01-01T08:00:00Z");
        // What stays open is window 7's alerts; ids are the alert's own, per resolved alert.
        let ids: Vec<&str> = open7.iter().map(|o| o.event_id.as_str()).collect();
        assert_eq!(
            ids,
            [again[0].event_id.as_str(), again[1].event_id.as_str()]
        );
        assert_eq!(
            lr.event_id,
            event_id(&["p", "fleet_alert_resolved", &w6[0].event_id])
        );
        let mut all: Vec<&str> = r.iter().map(|x| x.event_id.as_str()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 3);
    }

    /// A resolution carries what its schema branch declares and requires.
    #[test]
    fn the_resolution_matches_its_schema_branch() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/v1/output-event.schema.json"))
                .unwrap();
        let branch = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["kind"]["const"] == "fleet_alert_resolved")
            .expect("a fleet_alert_resolved branch");
        let a = alert("coder", Some("2"), Metric::LoopRate, 1_767_225_600);
        let b = alert("coder", Some("2"), Metric::LoopRate, 1_767_229_200);
        let w = Window {
            start: 1_767_229_200,
            seconds: 3600,
        };
        let (r, _) = resolve("p", w, &[OpenAlert::of(&a)], std::slice::from_ref(&b));
        let v = serde_json::to_value(&r[0]).unwrap();
        let obj = v.as_object().unwrap();
        let mut declared: Vec<&str> = branch["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        declared.extend(["event_id", "project_id"]);
        for k in obj.keys() {
            assert!(declared.contains(&k.as_str()), "{k} is not in the schema");
        }
        for req in branch["required"]
            .as_array()
            .unwrap()
            .iter()
            .chain(schema["required"].as_array().unwrap())
        {
            assert!(obj.contains_key(req.as_str().unwrap()), "{req} is missing");
        }
        assert_eq!(obj["kind"], "fleet_alert_resolved");
        assert_eq!(
            serde_json::from_value::<FleetAlertResolved>(v).unwrap(),
            r[0]
        );
    }

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
