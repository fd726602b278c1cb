//! The end checks of a soak: the input holds the fleet, the output topic equals the offline
//! replay, ClickHouse `FINAL` holds the fleet, and both workers of each mode are alive, answer
//! `/livez` and hold partitions.
use super::Soak;
use crate::common;
use eddy::config::Delivery;
use std::time::{Duration, Instant};

impl Soak {
    /// The end checks of lane `l`; what failed, in words.
    pub(super) async fn verify(&mut self, l: usize) -> Vec<String> {
        let lane = &self.lanes[l];
        let name = lane.name;
        let mut problems = Vec::new();
        // The input itself first: an event the broker acknowledged to the fleet's producer
        // but does not hold would show up below as outputs and rows missing, not eddy's doing.
        // Parts resent after a failed delivery may be in twice; eddy takes a step it has seen
        // as a redelivery, so the outputs must still equal the replay.
        let sent = lane.fleet.lines.len() as i64;
        let resent = lane.resent as i64;
        match lane.input_len().await {
            Ok(n) if n >= sent && n <= sent + resent => {}
            other => problems.push(format!(
                "{name}: the input topic holds {other:?} messages, the fleet sent {sent} (and \
                 {resent} again): the broker lost acknowledged input, so what follows does not \
                 judge eddy"
            )),
        }
        let (cfg, want, delivery) = (lane.cfg.clone(), lane.fleet.want.clone(), lane.delivery);
        let read = tokio::task::spawn_blocking(move || {
            // Lag is 0: every output is durable already; the wait is for the reader alone.
            let got = common::read_all_expected(&cfg, &want, Duration::from_secs(120), None);
            let dupes = common::assert_exact_or_duplicate(&got, &want);
            (got.len(), dupes)
        })
        .await;
        match read {
            Ok((got, dupes)) => {
                let msg = format!(
                    "{name}: output topic holds every one of the {} events of the offline \
                     replay ({got} read, {dupes} exact duplicates)",
                    lane.fleet.want.len()
                );
                if delivery == Delivery::ExactlyOnce && dupes > 0 {
                    problems.push(format!("{msg}: exactly_once must have none"));
                }
                self.note(&msg);
            }
            Err(e) => problems.push(format!("{name}: output topic: {}", panic_text(e))),
        }
        let lane = &self.lanes[l];
        let t = Duration::from_secs(60);
        let runs = lane.fleet.runs as u64;
        for (table, want) in [("steps", lane.fleet.steps), ("runs", runs)] {
            let sql = format!("SELECT count() FROM {{db}}.{table} FINAL");
            let got = common::await_ch_count(&lane.cfg, &sql, want, t).await;
            if got != want {
                problems.push(format!(
                    "{name}: ClickHouse {table} FINAL has {got} rows, the fleet {want}"
                ));
            }
        }
        let ids: Result<Vec<String>, _> = common::clickhouse(&lane.cfg)
            .query(&format!(
                "SELECT event_id FROM {}.signals FINAL",
                lane.cfg.clickhouse.database
            ))
            .fetch_all()
            .await;
        let want: std::collections::BTreeSet<&String> = lane
            .fleet
            .want
            .iter()
            .filter(|(_, o)| !matches!(o, eddy::contract::OutputEvent::RunTerminated(_)))
            .map(|(id, _)| id)
            .collect();
        match ids {
            Ok(ids) => {
                let got: std::collections::BTreeSet<&String> = ids.iter().collect();
                if got != want {
                    problems.push(format!(
                        "{name}: ClickHouse signals FINAL: {} ids, the replay {} ({} missing, {} unknown)",
                        got.len(),
                        want.len(),
                        want.difference(&got).count(),
                        got.difference(&want).count()
                    ));
                }
            }
            Err(e) => problems.push(format!("{name}: ClickHouse signals: {e}")),
        }
        for i in 0..lane.slots.len() {
            if let Err(e) = lane.livez(i).await {
                problems.push(format!("{}: /livez {e}", lane.slots[i].name));
            }
        }
        problems.extend(self.members(l).await);
        problems
    }

    /// Both workers of lane `l` are members of its group and hold partitions (the issue's
    /// stuck workers were alive and held none). A rebalance may be settling: asked for 60 s.
    async fn members(&mut self, l: usize) -> Vec<String> {
        let lane = &self.lanes[l];
        let (direct, group) = (
            lane.cfg.kafka.brokers.clone(),
            lane.cfg.kafka.group_id.clone(),
        );
        let args = [
            "consumer-groups",
            "--bootstrap-server",
            &direct,
            "--describe",
            "--group",
            &group,
            "--members",
        ];
        let t0 = Instant::now();
        let mut text;
        loop {
            text = self.stack.kafka_tool(&args).await;
            let parts: Vec<usize> = text
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(group.as_str()))
                .filter_map(|l| l.split_whitespace().last()?.parse().ok())
                .collect();
            if parts.len() == 2 && parts.iter().all(|&p| p > 0) {
                let name = lane.name;
                self.note(&format!("{name}: group members hold {parts:?} partitions"));
                return Vec::new();
            }
            if t0.elapsed() > Duration::from_secs(60) {
                break;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        vec![format!(
            "{}: not two members each holding partitions:\n{text}",
            lane.name
        )]
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()),
        Err(e) => e.to_string(),
    }
}
