//! Each destination's request for a notification: URL, headers and body, built without I/O
//! so the formats are tested as data.
use super::{Destination, Notification, NotifyError, Status};
use hmac::{Hmac, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

pub(crate) const TIMESTAMP_HEADER: &str = "X-Eddy-Timestamp";
pub(crate) const SIGNATURE_HEADER: &str = "X-Eddy-Signature";

/// An HTTP POST, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// `v1=` and the hex HMAC-SHA256, keyed with `secret`, of `<timestamp>.<body>`. The timestamp
/// is signed with the body so that a captured request cannot be replayed later under a fresh
/// timestamp (receivers reject old ones; docs/fleet-alerts.md shows how to verify).
pub(crate) fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

fn json_body(v: &Value) -> Result<Vec<u8>, NotifyError> {
    serde_json::to_vec(v).map_err(|e| NotifyError::Build(e.to_string()))
}

impl Request {
    /// The request telling `dest` about `n`, sent at `now`.
    pub(crate) fn build(
        dest: &Destination,
        n: &Notification,
        now: OffsetDateTime,
    ) -> Result<Self, NotifyError> {
        let json_ct = ("Content-Type".to_string(), "application/json".to_string());
        match dest {
            Destination::Webhook { url, secret } => {
                let ts = now.unix_timestamp();
                Ok(Request {
                    url: url.clone(),
                    headers: vec![
                        json_ct,
                        ("X-Eddy-Event-Id".into(), n.event_id.clone()),
                        ("X-Eddy-Event-Kind".into(), n.kind.clone()),
                        (TIMESTAMP_HEADER.into(), ts.to_string()),
                        (SIGNATURE_HEADER.into(), sign(secret, ts, &n.event)),
                    ],
                    body: n.event.clone(),
                })
            }
            Destination::Slack { url } => Ok(Request {
                url: url.clone(),
                headers: vec![json_ct],
                body: json_body(&slack(n))?,
            }),
            Destination::Pagerduty {
                routing_key,
                url,
                severity,
            } => Ok(Request {
                url: url.clone(),
                headers: vec![json_ct],
                body: json_body(&pagerduty(n, routing_key, severity))?,
            }),
            Destination::Alertmanager {
                url,
                bearer_token,
                hold_seconds,
                labels,
            } => {
                let mut headers = vec![json_ct];
                if let Some(t) = bearer_token {
                    headers.push(("Authorization".into(), format!("Bearer {t}")));
                }
                let hold =
                    time::Duration::seconds(i64::try_from(*hold_seconds).unwrap_or(i64::MAX / 2));
                Ok(Request {
                    url: format!("{}/api/v2/alerts", url.trim_end_matches('/')),
                    headers,
                    body: json_body(&alertmanager(n, labels, now, hold))?,
                })
            }
        }
    }
}

/// Slack's mrkdwn needs `&`, `<` and `>` escaped; nothing else is special in a text object.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An incoming webhook message: `text` is the notification's fallback (and what mobile
/// notifications show), the blocks carry the details.
fn slack(n: &Notification) -> Value {
    let icon = match n.status {
        Status::Firing => ":rotating_light:",
        Status::Resolved => ":white_check_mark:",
    };
    let fields: Vec<Value> = n
        .details
        .iter()
        .map(|(k, v)| {
            json!({"type": "mrkdwn", "text": format!("*{}*\n{}", slack_escape(k), slack_escape(v))})
        })
        // A section holds at most 10 fields.
        .take(10)
        .collect();
    let mut blocks = vec![json!({
        "type": "section",
        "text": {"type": "mrkdwn", "text": format!("{icon} {}", slack_escape(&n.summary))}
    })];
    if !fields.is_empty() {
        blocks.push(json!({"type": "section", "fields": fields}));
    }
    blocks.push(json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": format!("eddy {} `{}`", n.kind, n.alert_id)}]
    }));
    json!({"text": format!("{icon} {}", n.summary), "blocks": blocks})
}

/// PagerDuty Events API v2: a trigger, or a resolve of the same dedup key.
fn pagerduty(n: &Notification, routing_key: &str, severity: &str) -> Value {
    let dedup = n.alert_id.as_str();
    match n.status {
        Status::Resolved => json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": dedup,
        }),
        Status::Firing => {
            let details: Map<String, Value> = n
                .details
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            let label = |k: &str| n.labels.get(k).cloned().unwrap_or_default();
            // The summary is at most 1024 characters.
            let summary: String = n.summary.chars().take(1024).collect();
            json!({
                "routing_key": routing_key,
                "event_action": "trigger",
                "dedup_key": dedup,
                "client": "eddy",
                "payload": {
                    "summary": summary,
                    "source": format!("eddy fleet-watch ({})", label("project")),
                    "severity": severity,
                    "timestamp": n.starts_at,
                    "component": label("agent"),
                    "group": label("project"),
                    "class": label("metric"),
                    "custom_details": details,
                },
            })
        }
    }
}

/// One alert for Alertmanager's `POST /api/v2/alerts`. Alertmanager knows an alert by its
/// labels, so the alert and its resolution carry the same ones; a resolution is the alert with
/// `endsAt` now. A firing alert would end `resolve_timeout` after it was last sent unless it
/// carries its own `endsAt`: `hold` keeps it firing until eddy resolves it (or that long).
fn alertmanager(
    n: &Notification,
    extra: &std::collections::BTreeMap<String, String>,
    now: OffsetDateTime,
    hold: time::Duration,
) -> Value {
    let mut labels: Map<String, Value> = extra
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    labels.insert("alertname".into(), "EddyFleetRegression".into());
    for (k, v) in &n.labels {
        if !v.is_empty() {
            labels.insert(k.clone(), Value::String(v.clone()));
        }
    }
    labels.insert("event_id".into(), n.alert_id.clone().into());
    let mut annotations: Map<String, Value> = n
        .details
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    annotations.insert("summary".into(), n.summary.clone().into());
    let ends = match n.status {
        Status::Firing => now + hold,
        Status::Resolved => now,
    };
    json!([{
        "labels": labels,
        "annotations": annotations,
        "startsAt": n.starts_at,
        "endsAt": rfc3339(ends),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn note(status: Status) -> Notification {
        Notification {
            alert_id: "a1".into(),
            event_id: if status == Status::Firing { "a1" } else { "r1" }.into(),
            kind: if status == Status::Firing {
                "fleet_alert"
            } else {
                "fleet_alert_resolved"
            }
            .into(),
            status,
            summary: "coder v2: loop rate <85%> & rising".into(),
            details: vec![("baseline".into(), "8.8%".into())],
            labels: [
                ("project".to_string(), "p".to_string()),
                ("agent".to_string(), "coder".to_string()),
                ("version".to_string(), "".to_string()),
                ("metric".to_string(), "loop_rate".to_string()),
            ]
            .into(),
            starts_at: "2026-01-01T07:00:00Z".into(),
            event: br#"{"kind":"fleet_alert"}"#.to_vec(),
        }
    }

    #[test]
    fn the_webhook_sends_the_event_signed_with_its_timestamp() {
        let d = Destination::Webhook {
            url: "http://h/x".into(),
            secret: "s3cret-s3cret-s3cret".into(),
        };
        let now = datetime!(2026-01-01 08:00:00 UTC);
        let r = Request::build(&d, &note(Status::Firing), now).unwrap();
        assert_eq!(r.body, br#"{"kind":"fleet_alert"}"#);
        let h = |k: &str| r.headers.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(h(TIMESTAMP_HEADER), "1767254400");
        assert_eq!(h("X-Eddy-Event-Id"), "a1");
        // The signature covers timestamp and body: change either and it changes.
        let sig = h(SIGNATURE_HEADER);
        assert_eq!(sig, sign("s3cret-s3cret-s3cret", 1767254400, &r.body));
        assert_ne!(sig, sign("s3cret-s3cret-s3cret", 1767254401, &r.body));
        assert_ne!(sig, sign("s3cret-s3cret-s3crex", 1767254400, &r.body));
    }

    /// The value a receiver computes: Python's `hmac.new(b"Jefe", b"12.{}", "sha256")`.
    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        assert_eq!(
            sign("Jefe", 12, b"{}"),
            "v1=920d401f4879de198b71e775f802db6e3364de1e84bd18ca56903b6593a32642"
        );
    }

    #[test]
    fn pagerduty_triggers_and_resolves_the_same_dedup_key() {
        let d = Destination::Pagerduty {
            routing_key: "R0UTING".into(),
            url: "https://events.pagerduty.com/v2/enqueue".into(),
            severity: "error".into(),
        };
        let now = datetime!(2026-01-01 08:00:00 UTC);
        let t: Value =
            serde_json::from_slice(&Request::build(&d, &note(Status::Firing), now).unwrap().body)
                .unwrap();
        assert_eq!(t["event_action"], "trigger");
        assert_eq!(t["dedup_key"], "a1");
        assert_eq!(t["routing_key"], "R0UTING");
        assert_eq!(t["payload"]["severity"], "error");
        assert_eq!(t["payload"]["component"], "coder");
        assert_eq!(t["payload"]["custom_details"]["baseline"], "8.8%");
        let r: Value = serde_json::from_slice(
            &Request::build(&d, &note(Status::Resolved), now)
                .unwrap()
                .body,
        )
        .unwrap();
        assert_eq!(
            r,
            json!({"routing_key": "R0UTING", "event_action": "resolve", "dedup_key": "a1"})
        );
    }

    #[test]
    fn alertmanager_resolves_by_sending_the_same_labels_ended() {
        let d = Destination::Alertmanager {
            url: "http://am:9093/".into(),
            bearer_token: Some("tok".into()),
            hold_seconds: 3600,
            labels: [("team".to_string(), "agents".to_string())].into(),
        };
        let now = datetime!(2026-01-01 08:00:00 UTC);
        let f = Request::build(&d, &note(Status::Firing), now).unwrap();
        assert_eq!(f.url, "http://am:9093/api/v2/alerts");
        assert!(f
            .headers
            .contains(&("Authorization".into(), "Bearer tok".into())));
        let f: Value = serde_json::from_slice(&f.body).unwrap();
        let r: Value = serde_json::from_slice(
            &Request::build(&d, &note(Status::Resolved), now)
                .unwrap()
                .body,
        )
        .unwrap();
        assert_eq!(f[0]["labels"], r[0]["labels"]);
        assert_eq!(
            f[0]["labels"],
            json!({"alertname": "EddyFleetRegression", "team": "agents", "project": "p",
                   "agent": "coder", "metric": "loop_rate", "event_id": "a1"})
        );
        assert_eq!(f[0]["endsAt"], "2026-01-01T09:00:00Z");
        assert_eq!(r[0]["endsAt"], "2026-01-01T08:00:00Z");
        assert_eq!(f[0]["startsAt"], "2026-01-01T07:00:00Z");
    }

    #[test]
    fn slack_text_is_escaped() {
        let d = Destination::Slack {
            url: "https://hooks.slack.com/services/x".into(),
        };
        let now = datetime!(2026-01-01 08:00:00 UTC);
        let v: Value =
            serde_json::from_slice(&Request::build(&d, &note(Status::Firing), now).unwrap().body)
                .unwrap();
        let text = v["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(text.contains("&lt;85%&gt; &amp; rising"), "{text}");
        assert!(v["text"].as_str().unwrap().starts_with(":rotating_light:"));
    }
}
