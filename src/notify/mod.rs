//! Alerts to people: one notification delivered to one named destination (a signed webhook,
//! Slack, PagerDuty Events API v2, Alertmanager's API), with retries and capped backoff.
//!
//! Knows nothing of where notifications come from: `fleet/notify.rs` reads `eddy fleet-watch`'s
//! alert topic, turns events into [`Notification`]s, and keeps each destination's progress.
//! Every request carries the alert's deterministic id, so a destination that sees one twice
//! (after a crash between its answer and the recorded progress) can tell: PagerDuty's dedup key,
//! Alertmanager's labels, the webhook's `X-Eddy-Event-Id`.
mod request;
mod send;

pub(crate) use crate::config::notify::{Destination, NotifyConfig};
pub(crate) use request::Request;
pub(crate) use send::{Outcome, Sender};
use std::collections::BTreeMap;

/// Firing (an alert) or resolved (its resolution).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Firing,
    Resolved,
}

/// What a destination is told, whatever its format.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notification {
    /// The alert's event id: PagerDuty's dedup key and Alertmanager's `event_id` label, for
    /// the alert and for its resolution alike.
    pub(crate) alert_id: String,
    /// This event's own id (the resolution's, for a resolution): `X-Eddy-Event-Id`.
    pub(crate) event_id: String,
    /// The event's `kind` (`fleet_alert`, `fleet_alert_resolved`): `X-Eddy-Event-Kind`.
    pub(crate) kind: String,
    pub(crate) status: Status,
    /// One line, for a phone's lock screen.
    pub(crate) summary: String,
    /// Name → value, in the order shown (Slack, PagerDuty's custom details, Alertmanager's
    /// annotations).
    pub(crate) details: Vec<(String, String)>,
    /// What identifies the alert's series (project, agent, version, metric), as
    /// Alertmanager labels and PagerDuty's component/group/class.
    pub(crate) labels: BTreeMap<String, String>,
    /// When the alert began (RFC 3339): the end of the window that raised it.
    pub(crate) starts_at: String,
    /// The event exactly as published on the topic: the webhook's body.
    pub(crate) event: Vec<u8>,
}

/// Why a delivery failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotifyError {
    #[error("HTTP {status}: {body}")]
    Status {
        status: u16,
        body: String,
        /// `Retry-After`, in seconds, when the answer said.
        retry_after: Option<u64>,
    },
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("cannot build the request: {0}")]
    Build(String),
}

impl NotifyError {
    /// Worth trying again: no answer, a timeout, 408, 429 or a server error. Any other 4xx
    /// says this request will never be taken (a bad routing key, a revoked Slack hook).
    pub(crate) fn retryable(&self) -> bool {
        match self {
            NotifyError::Status { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            NotifyError::Http(_) => true,
            NotifyError::Build(_) => false,
        }
    }
}
