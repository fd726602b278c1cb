//! `[fleet.notify]`: where `eddy fleet-watch` sends its alerts besides the alert topic, by
//! name (`[fleet.notify.destinations.oncall]`), and how hard it tries (docs/fleet-alerts.md).
//!
//! Each destination's secret (a webhook's signing secret, a Slack webhook URL, a PagerDuty
//! routing key, an Alertmanager bearer token) comes best from the environment:
//! `EDDY_FLEET__NOTIFY__DESTINATIONS__ONCALL__ROUTING_KEY`, read verbatim (see
//! [`text_fields`]). `eddy config check` masks them.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct NotifyConfig {
    /// Alerts a destination could not take (it kept failing, or refused them) land here, with
    /// the destination and the reason.
    pub(crate) dlq_topic: String,
    /// Tries per alert and destination before it is dead-lettered.
    pub(crate) max_attempts: u32,
    /// The first retry's delay; each next one doubles, up to `backoff_max_ms`.
    pub(crate) backoff_ms: u64,
    pub(crate) backoff_max_ms: u64,
    /// One request's deadline.
    pub(crate) timeout_ms: u64,
    pub(crate) destinations: BTreeMap<String, Destination>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            dlq_topic: "agent.fleet_alerts.dlq".into(),
            max_attempts: 8,
            backoff_ms: 1000,
            backoff_max_ms: 60_000,
            timeout_ms: 10_000,
            destinations: BTreeMap::new(),
        }
    }
}

/// One destination, by `kind`. No `Debug`: it holds secrets.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Destination {
    /// A JSON POST of the event itself, signed with HMAC-SHA256 (`X-Eddy-Signature`).
    Webhook { url: String, secret: String },
    /// A Slack incoming webhook; the URL is the secret.
    Slack { url: String },
    /// PagerDuty Events API v2: trigger, and resolve with the same dedup key.
    Pagerduty {
        routing_key: String,
        #[serde(default = "pagerduty_url")]
        url: String,
        /// critical, error, warning or info.
        #[serde(default = "pagerduty_severity")]
        severity: String,
    },
    /// Prometheus Alertmanager's API (`POST <url>/api/v2/alerts`).
    Alertmanager {
        /// The base URL, e.g. `http://alertmanager:9093`.
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_token: Option<String>,
        /// A firing alert ends this long after it was sent unless resolved before.
        #[serde(default = "alertmanager_hold")]
        hold_seconds: u64,
        /// Extra labels on every alert (e.g. `team = "agents"`), for routing.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        labels: BTreeMap<String, String>,
    },
}

/// Debug output ends up in logs: the redacted form only.
impl std::fmt::Debug for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.redacted())
    }
}

fn pagerduty_url() -> String {
    "https://events.pagerduty.com/v2/enqueue".into()
}
fn pagerduty_severity() -> String {
    "error".into()
}
fn alertmanager_hold() -> u64 {
    86_400
}

/// The shortest webhook signing secret accepted (e.g. `openssl rand -hex 32` gives 64).
pub(crate) const MIN_WEBHOOK_SECRET_CHARS: usize = 16;

impl Destination {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Destination::Webhook { .. } => "webhook",
            Destination::Slack { .. } => "slack",
            Destination::Pagerduty { .. } => "pagerduty",
            Destination::Alertmanager { .. } => "alertmanager",
        }
    }

    fn problem(&self) -> Option<String> {
        let http = |u: &str| u.starts_with("http://") || u.starts_with("https://");
        match self {
            Destination::Webhook { url, secret } => {
                if !http(url) {
                    return Some("url must be an http(s) URL".into());
                }
                if secret.chars().count() < MIN_WEBHOOK_SECRET_CHARS {
                    return Some(format!(
                        "secret must be at least {MIN_WEBHOOK_SECRET_CHARS} characters"
                    ));
                }
            }
            Destination::Slack { url } if !http(url) => {
                return Some("url must be the incoming webhook's http(s) URL".into())
            }
            Destination::Pagerduty {
                routing_key,
                url,
                severity,
            } => {
                if routing_key.trim().is_empty() {
                    return Some("routing_key is empty".into());
                }
                if !http(url) {
                    return Some("url must be an http(s) URL".into());
                }
                if !["critical", "error", "warning", "info"].contains(&severity.as_str()) {
                    return Some(format!(
                        "severity `{severity}` is not critical, error, warning or info"
                    ));
                }
            }
            Destination::Alertmanager {
                url,
                hold_seconds,
                labels,
                ..
            } => {
                if !http(url) {
                    return Some("url must be Alertmanager's http(s) base URL".into());
                }
                if *hold_seconds == 0 {
                    return Some("hold_seconds must be positive".into());
                }
                if let Some(l) = labels.keys().find(|l| !is_label_name(l)) {
                    return Some(format!("label `{l}` is not a Prometheus label name"));
                }
            }
            Destination::Slack { .. } => {}
        }
        None
    }

    /// The settings as `eddy config check` shows them: secrets masked, and of a URL only
    /// where it points (its path and query may be the secret, as Slack's are).
    pub(crate) fn redacted(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            for (k, val) in m.iter_mut() {
                match (k.as_str(), val.as_str()) {
                    ("secret" | "routing_key" | "bearer_token", Some(_)) => {
                        *val = "***".into();
                    }
                    ("url", Some(u)) => *val = url_origin(u).into(),
                    _ => {}
                }
            }
        }
        v
    }
}

/// `https://user:pw@hooks.slack.com/services/T/B/X?k=v` → `https://hooks.slack.com/***`.
fn url_origin(u: &str) -> String {
    let (scheme, rest) = u.split_once("://").unwrap_or(("", u));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let tail = if authority.len() < rest.len() || host.len() < authority.len() {
        "/***"
    } else {
        ""
    };
    format!("{scheme}://{host}{tail}")
}

fn is_label_name(l: &str) -> bool {
    let mut c = l.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// A destination name is what its environment variables are named after: lower case letters,
/// digits and `_`, starting with a letter.
fn is_destination_name(n: &str) -> bool {
    n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Destination fields that are text: from the environment they are taken verbatim (figment
/// would read a routing key `0123` as the number 123).
pub(crate) fn text_fields() -> &'static [&'static str] {
    &[
        "kind",
        "url",
        "secret",
        "routing_key",
        "severity",
        "bearer_token",
    ]
}

impl NotifyConfig {
    /// Why this cannot work, naming the setting.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.max_attempts == 0 {
            return Some("fleet.notify.max_attempts must be at least 1".into());
        }
        if self.backoff_ms == 0 || self.backoff_max_ms < self.backoff_ms {
            return Some(
                "fleet.notify.backoff_ms must be positive and at most backoff_max_ms".into(),
            );
        }
        if self.timeout_ms == 0 {
            return Some("fleet.notify.timeout_ms must be positive".into());
        }
        for (name, d) in &self.destinations {
            if !is_destination_name(name) {
                return Some(format!(
                    "fleet.notify.destinations.{name}: a name is lower case letters, digits and _, \
                     starting with a letter (it names EDDY_FLEET__NOTIFY__DESTINATIONS__<NAME>__*)"
                ));
            }
            if let Some(why) = d.problem() {
                return Some(format!(
                    "fleet.notify.destinations.{name} ({}): {why}",
                    d.kind()
                ));
            }
        }
        None
    }

    /// For `eddy config check`: every destination with its secrets masked.
    pub(crate) fn redacted(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["destinations"] = self
            .destinations
            .iter()
            .map(|(n, d)| (n.clone(), d.redacted()))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_show_only_where_they_point() {
        for (u, want) in [
            (
                "https://hooks.slack.com/services/T0/B0/XXXX",
                "https://hooks.slack.com/***",
            ),
            ("http://am:9093", "http://am:9093"),
            ("http://am:9093/", "http://am:9093/***"),
            ("https://u:pw@h.example/x?token=1", "https://h.example/***"),
            ("https://u:pw@h.example", "https://h.example/***"),
        ] {
            assert_eq!(url_origin(u), want, "{u}");
        }
    }

    #[test]
    fn names_and_fields_are_checked() {
        let with = |name: &str, d: Destination| NotifyConfig {
            destinations: [(name.to_string(), d)].into(),
            ..NotifyConfig::default()
        };
        let slack = || Destination::Slack {
            url: "https://hooks.slack.com/services/x".into(),
        };
        assert!(with("team_1", slack()).problem().is_none());
        for bad in ["Team", "team-a", "1team", ""] {
            let e = with(bad, slack()).problem().unwrap();
            assert!(e.contains("lower case"), "{bad}: {e}");
        }
        let e = with(
            "hook",
            Destination::Webhook {
                url: "https://x".into(),
                secret: "short".into(),
            },
        )
        .problem()
        .unwrap();
        assert!(
            e.contains("fleet.notify.destinations.hook (webhook): secret"),
            "{e}"
        );
        let e = with(
            "pd",
            Destination::Pagerduty {
                routing_key: "k".into(),
                url: pagerduty_url(),
                severity: "page".into(),
            },
        )
        .problem()
        .unwrap();
        assert!(e.contains("severity `page`"), "{e}");
        let e = with(
            "am",
            Destination::Alertmanager {
                url: "http://am:9093".into(),
                bearer_token: None,
                hold_seconds: 60,
                labels: [("team-x".to_string(), "a".to_string())].into(),
            },
        )
        .problem()
        .unwrap();
        assert!(e.contains("label `team-x`"), "{e}");
    }
}
