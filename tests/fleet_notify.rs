//! `eddy fleet-watch`'s alerts reach people: a fleet whose new version loops more goes through
//! `eddy run` into ClickHouse, and fleet-watch delivers its alerts to a real Alertmanager and to
//! a receiver served here that checks what a signed webhook, Slack and PagerDuty's Events API
//! would get, signatures included. A destination that keeps failing is dead-lettered; a second
//! pass and a restarted daemon send nothing twice; the next window resolves both alerts
//! (PagerDuty resolve with the same dedup key, Alertmanager alerts ended).
//!
//! Needs the Alertmanager that `scripts/bootstrap --dev` builds (or `EDDY_ALERTMANAGER=BIN`):
//! not in the everyday test command; CI runs it in its own stage (`cargo test --test
//! fleet_notify`), as for the cluster tests.
mod common;
use common::fleet::*;
use common::receiver::*;
use common::*;
use eddy::config::Config;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUTING_KEY: &str = "0123ROUTINGKEY";

/// The Alertmanager binary: `EDDY_ALERTMANAGER`, or the newest `scripts/bootstrap --dev` built.
fn alertmanager_bin() -> PathBuf {
    if let Ok(p) = std::env::var("EDDY_ALERTMANAGER") {
        return p.into();
    }
    let cache = std::env::var("EDDY_TOOLS_CACHE").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/eddy-tools"),
        PathBuf::from,
    );
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache.join("bin"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("alertmanager-v"))
        })
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "no Alertmanager in {}/bin: run scripts/bootstrap --dev (or set EDDY_ALERTMANAGER)",
            cache.display()
        )
    })
}

/// A real Alertmanager on loopback, routing every alert to the receiver's `/am` at once and
/// telling it of resolutions too.
struct Alertmanager {
    child: Worker,
    url: String,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    async fn start(webhook: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            format!(
                "route:\n  receiver: test\n  group_by: [event_id]\n  group_wait: 1s\n  \
                 group_interval: 1s\n  repeat_interval: 4h\nreceivers:\n  - name: test\n    \
                 webhook_configs:\n      - url: {webhook}\n        send_resolved: true\n"
            ),
        )
        .unwrap();
        let addr = free_addr();
        let child = Command::new(alertmanager_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            // A single instance: no gossip port.
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start alertmanager");
        let am = Self {
            child: Worker(child),
            url: format!("http://{addr}"),
            _dir: dir,
        };
        let start = Instant::now();
        while http_get(&addr, "/-/ready").map(|(st, _)| st) != Some(200) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "alertmanager never ready"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        am
    }

    /// Alertmanager's alerts (`GET /api/v2/alerts`), active ones or all.
    async fn alerts(&self, active: bool) -> Vec<Value> {
        let url = format!(
            "{}/api/v2/alerts?active={active}&silenced=false&inhibited=false&unprocessed=true",
            self.url
        );
        reqwest::get(&url)
            .await
            .expect("alertmanager answers")
            .json()
            .await
            .expect("JSON alerts")
    }
}

fn destinations_env(rx: &Receiver, am: &Alertmanager, dlq: &str) -> Vec<(String, String)> {
    let d = "EDDY_FLEET__NOTIFY__DESTINATIONS__";
    [
        ("HOOK__KIND", "webhook".to_string()),
        ("HOOK__URL", rx.url("hook")),
        ("HOOK__SECRET", SECRET.into()),
        ("TEAM__KIND", "slack".into()),
        ("TEAM__URL", rx.url("slack")),
        ("ONCALL__KIND", "pagerduty".into()),
        ("ONCALL__URL", rx.url("pagerduty")),
        ("ONCALL__ROUTING_KEY", ROUTING_KEY.into()),
        ("AM__KIND", "alertmanager".into()),
        ("AM__URL", am.url.clone()),
        ("AM__LABELS__TEAM", "agents".into()),
        ("BROKEN__KIND", "webhook".into()),
        ("BROKEN__URL", rx.url("broken")),
        ("BROKEN__SECRET", SECRET.into()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{d}{k}"), v))
    .chain([
        ("EDDY_FLEET__NOTIFY__DLQ_TOPIC".into(), dlq.to_string()),
        ("EDDY_FLEET__NOTIFY__MAX_ATTEMPTS".into(), "3".into()),
        ("EDDY_FLEET__NOTIFY__BACKOFF_MS".into(), "100".into()),
        ("EDDY_FLEET__NOTIFY__BACKOFF_MAX_MS".into(), "1500".into()),
    ])
    .collect()
}

fn by_kind(records: &[Vec<u8>], k: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|p| kind(p) == k)
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect()
}

fn ids(v: &[Value], field: &str) -> BTreeSet<String> {
    v.iter()
        .map(|x| x[field].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn alerts_reach_people_once_and_are_resolved() {
    let rx = Receiver::start().await;
    let am = Alertmanager::start(&rx.url("am")).await;
    let ep = endpoints().await;
    let cfg: Config = test_config(&ep, "fleet_notify");
    let dlq = format!("{}.notify-dlq", alert_topic(&cfg, ""));
    let env = destinations_env(&rx, &am, &dlq);
    let once_env = || once_with(&cfg, "", &env);
    run_fleet(&cfg, true).await;

    // One pass: hour 6 raises coder v2's two alerts, and `--once` delivers them before exit.
    assert_eq!(once_env(), "fleet-watch: 9 windows evaluated, 2 alerts");
    let published = alerts(&cfg, "");
    let fired = by_kind(&published, "fleet_alert");
    assert_eq!(fired.len(), 2, "{fired:#?}");
    let alert_ids = ids(&fired, "event_id");

    // The webhook: the event as published, signed.
    let hook = rx.got("hook");
    assert_eq!(hook.len(), 2);
    for g in &hook {
        verify(g);
        assert!(
            published.contains(&g.body),
            "the body is the published event"
        );
        assert!(alert_ids.contains(g.header("X-Eddy-Event-Id")));
        assert_eq!(g.header("X-Eddy-Event-Kind"), "fleet_alert");
        assert_eq!(g.header("Content-Type"), "application/json");
    }
    // Slack: the first message needed three tries (503, then 429 with Retry-After: 1).
    let slack = rx.got("slack");
    assert_eq!(slack.len(), 4, "two failed tries and two messages");
    let first = slack[0].body.clone();
    assert!(
        slack[..3].iter().all(|g| g.body == first),
        "retries resend the same message"
    );
    for g in &slack[2..] {
        let m = g.json();
        let text = m["text"].as_str().unwrap();
        assert!(
            text.contains("Fleet regression in proj-0: coder v2"),
            "{text}"
        );
        assert_eq!(m["blocks"][0]["type"], "section");
    }
    // PagerDuty: two triggers, their dedup keys the alerts' ids.
    let pd: Vec<Value> = rx.got("pagerduty").iter().map(Got::json).collect();
    assert_eq!(pd.len(), 2);
    for e in &pd {
        assert_eq!(e["event_action"], "trigger");
        assert_eq!(e["routing_key"], ROUTING_KEY);
        assert_eq!(e["payload"]["severity"], "error");
        assert_eq!(e["payload"]["component"], "coder");
        assert_eq!(e["payload"]["group"], PROJECT);
        assert!(e["payload"]["summary"]
            .as_str()
            .unwrap()
            .contains("coder v2"));
    }
    assert_eq!(ids(&pd, "dedup_key"), alert_ids);
    // Alertmanager holds both, firing, with the series' labels and the static one.
    let active = am.alerts(true).await;
    let ours: Vec<&Value> = active
        .iter()
        .filter(|a| alert_ids.contains(a["labels"]["event_id"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(ours.len(), 2, "{active:#?}");
    for a in &ours {
        assert_eq!(a["labels"]["alertname"], "EddyFleetRegression");
        assert_eq!(
            (
                &a["labels"]["agent"],
                &a["labels"]["version"],
                &a["labels"]["team"]
            ),
            (&"coder".into(), &"2".into(), &"agents".into())
        );
        assert_eq!(a["status"]["state"], "active");
    }
    // ... and routes them on, as it would to a pager.
    let notified = rx.await_n("am", 2, Duration::from_secs(30)).await;
    let firing: BTreeSet<String> = notified
        .iter()
        .map(Got::json)
        .filter(|n| n["status"] == "firing")
        .flat_map(|n| {
            n["alerts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["labels"]["event_id"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(firing, alert_ids);
    // The destination that kept failing: three tries each, then a dead letter with the reason.
    assert_eq!(rx.got("broken").len(), 6);
    let dead: Vec<Value> = read_all(&cfg, &dlq)
        .iter()
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect();
    assert_eq!(dead.len(), 2, "{dead:#?}");
    for d in &dead {
        assert_eq!(
            (
                &d["kind"],
                &d["destination"],
                &d["destination_kind"],
                &d["reason"],
                &d["attempts"]
            ),
            (
                &"notify_dead_letter".into(),
                &"broken".into(),
                &"webhook".into(),
                &"exhausted".into(),
                &3.into()
            )
        );
        assert!(d["detail"].as_str().unwrap().contains("HTTP 500"), "{d}");
    }
    assert_eq!(
        dead.iter()
            .map(|d| d["event"]["event_id"].as_str().unwrap().to_string())
            .collect::<BTreeSet<_>>(),
        alert_ids
    );

    // A second pass: nothing evaluated, nothing sent, nothing dead-lettered again.
    let counts = |rx: &Receiver| ["hook", "slack", "pagerduty", "broken"].map(|p| rx.got(p).len());
    let before = counts(&rx);
    assert_eq!(once_env(), "fleet-watch: 0 windows evaluated, 0 alerts");
    assert_eq!(counts(&rx), before);
    assert_eq!(read_all(&cfg, &dlq).len(), 2);

    // Hour 8 arrives, so hour 7 closes: coder v2 is gone from it, and a daemon (a restart)
    // resolves both alerts at every destination, repeating none of the triggers.
    let mut hour8 = batch(8, "coder@1", 10, 0.1, 800);
    hour8.extend(batch(8, "reviewer", 10, 0.1, 801));
    let (_, runs) = fleet(true);
    {
        let _worker = spawn_worker(&cfg, &[]);
        produce(&cfg, &hour8).await;
        let got = await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.runs FINAL",
            runs as u64 + 20,
            Duration::from_secs(120),
        )
        .await;
        assert_eq!(got, runs as u64 + 20);
    }
    let admin = free_addr();
    let mut daemon = Worker(
        fleet_watch(&cfg, "", &[])
            .envs(env.clone())
            .env("EDDY_FLEET__ADMIN_ADDR", &admin)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn"),
    );
    let pd = rx.await_n("pagerduty", 4, Duration::from_secs(90)).await;
    let hook = rx.await_n("hook", 4, Duration::from_secs(30)).await;
    let slack = rx.await_n("slack", 6, Duration::from_secs(30)).await;
    let _ = rx.await_n("broken", 12, Duration::from_secs(30)).await;

    let resolves: Vec<Value> = pd[2..].iter().map(Got::json).collect();
    for r in &resolves {
        assert_eq!(
            r.as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect::<BTreeSet<_>>(),
            BTreeSet::from(["dedup_key", "event_action", "routing_key"]),
            "{r}"
        );
        assert_eq!(r["event_action"], "resolve");
    }
    assert_eq!(ids(&resolves, "dedup_key"), alert_ids);
    let published = alerts(&cfg, "");
    let resolved = by_kind(&published, "fleet_alert_resolved");
    assert_eq!(ids(&resolved, "resolves"), alert_ids);
    for r in &resolved {
        assert_eq!(r["reason"], "recovered");
        assert_eq!(r["window_start"], "2026-01-01T07:00:00Z");
    }
    for g in &hook[2..] {
        verify(g);
        assert_eq!(g.header("X-Eddy-Event-Kind"), "fleet_alert_resolved");
        assert!(published.contains(&g.body));
    }
    for g in &slack[4..] {
        assert!(g.json()["text"]
            .as_str()
            .unwrap()
            .contains("Resolved in proj-0: coder v2"));
    }
    // Alertmanager: both ended, and its receiver told so.
    let start = Instant::now();
    loop {
        let still: Vec<Value> = am
            .alerts(true)
            .await
            .into_iter()
            .filter(|a| alert_ids.contains(a["labels"]["event_id"].as_str().unwrap_or_default()))
            .collect();
        if still.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "still active in Alertmanager: {still:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let start = Instant::now();
    loop {
        let resolved_in_am: BTreeSet<String> = rx
            .got("am")
            .iter()
            .map(Got::json)
            .filter(|n| n["status"] == "resolved")
            .flat_map(|n| {
                n["alerts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["labels"]["event_id"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        if resolved_in_am == alert_ids {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "Alertmanager told of {resolved_in_am:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The daemon's metrics, then a graceful stop; the triggers were never sent again.
    let m = http_get(&admin, "/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default();
    assert!(
        m.contains("eddy_notify_delivered_total{destination=\"oncall\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("eddy_notify_dead_letters_total{destination=\"broken\",reason=\"exhausted\"} 2"),
        "{m}"
    );
    let _ = Command::new("kill")
        .args(["-TERM", &daemon.id().to_string()])
        .status();
    let status = daemon.wait().expect("fleet-watch exits");
    assert!(status.success(), "graceful stop: {status}");
    let triggers = rx
        .got("pagerduty")
        .iter()
        .filter(|g| g.json()["event_action"] == "trigger")
        .count();
    assert_eq!(triggers, 2, "no trigger sent twice");
    assert_eq!(rx.got("hook").len(), 4);
    assert_eq!(
        read_all(&cfg, &dlq).len(),
        4,
        "the resolutions' dead letters"
    );
    drop(am.child);
}
