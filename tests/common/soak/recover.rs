//! After each fault: waiting for every mode to be caught up with every worker holding
//! partitions, restarting workers as an orchestrator (and, for a stuck mode, an operator)
//! would, and writing what a stuck mode looks like.
use super::{wall_clock, Soak};
use crate::soak::report::Outcome;
use std::time::{Duration, Instant};

impl Soak {
    /// Waits until, per mode, the producer is done, the lag is 0 and every running worker
    /// holds partitions, restarting workers as an orchestrator would; records the time from
    /// now (the fault's end) to lag 0 and to that whole group. Past `stuck_after` a mode is
    /// stuck (reported); past `give_up` the soak restarts its idle workers, as an operator
    /// would, and waits as long again before it gives up on that mode.
    pub(super) async fn recover(
        &mut self,
        what: &'static str,
        producers: Vec<tokio::task::JoinHandle<usize>>,
    ) {
        let end = Instant::now();
        let n = self.lanes.len();
        let mut producers: Vec<_> = producers.into_iter().map(Some).collect();
        let mut caught_up: Vec<Option<Duration>> = vec![None; n];
        let mut whole: Vec<Option<Duration>> = vec![None; n];
        let mut idle: Vec<Vec<String>> = vec![Vec::new(); n];
        let mut stuck = vec![false; n];
        let mut operator = vec![false; n];
        let mut restarts = vec![0u32; n];
        let mut last_lag: Vec<Result<i64, String>> = vec![Err("not asked".into()); n];
        let mut last_livez = Instant::now();
        loop {
            let check_livez = last_livez.elapsed() >= Duration::from_secs(2);
            if check_livez {
                last_livez = Instant::now();
            }
            for l in 0..n {
                if let Some(h) = producers[l].take_if(|h| h.is_finished()) {
                    match h.await {
                        Ok(resent) => self.lanes[l].resent += resent,
                        Err(e) => {
                            panic!("the fleet producer of {} failed: {e}", self.lanes[l].name)
                        }
                    }
                }
                restarts[l] += self.orchestrate(l, check_livez).await;
                if caught_up[l].is_none() && producers[l].is_none() {
                    last_lag[l] = self.lanes[l].lag().await;
                    if last_lag[l] == Ok(0) {
                        caught_up[l] = Some(end.elapsed());
                    }
                }
                if caught_up[l].is_some() && whole[l].is_none() {
                    if let Ok(i) = self.lanes[l].idle().await {
                        if i.is_empty() {
                            whole[l] = Some(end.elapsed());
                        }
                        idle[l] = i;
                    }
                }
            }
            if whole.iter().all(Option::is_some) {
                break;
            }
            let waited = end.elapsed();
            let mut give_up = false;
            for l in 0..n {
                if whole[l].is_some() {
                    continue;
                }
                let late = !stuck[l] && waited > self.plan.stuck_after;
                let act = !operator[l] && waited > self.plan.give_up && producers[l].is_none();
                if late || act {
                    // Who holds nothing now (the lag may be what is stuck, not the group).
                    if let Ok(i) = self.lanes[l].idle().await {
                        idle[l] = i;
                    }
                }
                if late && producers[l].is_some() {
                    // Not eddy: the fleet's own producer is still waiting for the broker.
                    stuck[l] = true;
                    let name = self.lanes[l].name;
                    self.note(&format!(
                        "{name}: the fleet producer is still sending {} s after `{what}` ended",
                        waited.as_secs()
                    ));
                    self.problems.push(format!(
                        "{what}: {name}: the fleet producer (not a worker) still had undelivered \
                         events {} s after the fault's end",
                        self.plan.stuck_after.as_secs()
                    ));
                } else if late {
                    stuck[l] = true;
                    self.diagnose(what, l, &idle[l]).await;
                }
                if act {
                    operator[l] = true;
                    restarts[l] += self.operator_restart(l, &idle[l]);
                } else if waited > self.plan.give_up * 2 {
                    give_up = true;
                }
            }
            if give_up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if whole.iter().all(Option::is_some) {
            self.unrecovered_steps = 0;
        } else {
            self.unrecovered_steps += 1;
        }
        for l in 0..n {
            let lane = self.lanes[l].name;
            let secs = |d: Option<Duration>| {
                d.map_or_else(
                    || "never".to_string(),
                    |d| format!("{:.1} s", d.as_secs_f64()),
                )
            };
            self.note(&format!(
                "{what}: {lane} lag 0 after {}, every worker holding partitions after {}{}",
                secs(caught_up[l]),
                secs(whole[l]),
                if restarts[l] > 0 {
                    format!(", {} worker restart(s)", restarts[l])
                } else {
                    String::new()
                }
            ));
            if stuck[l] {
                self.problems.push(format!(
                    "{what}: {lane} was stuck (not caught up with every worker holding \
                     partitions within {} s; lag 0 after {}, whole after {}; idle: {:?}; \
                     last lag seen: {:?})",
                    self.plan.stuck_after.as_secs(),
                    secs(caught_up[l]),
                    secs(whole[l]),
                    idle[l],
                    last_lag[l]
                ));
            }
            self.outcomes.push(Outcome {
                fault: what,
                lane,
                recovery: caught_up[l],
                whole: whole[l],
                stuck: stuck[l],
                restarts: restarts[l],
            });
        }
    }

    /// What an operator does about a stuck mode: SIGKILL and restart its idle workers, or
    /// every worker when none is idle (the lag is what is stuck); returns how many.
    fn operator_restart(&mut self, l: usize, idle: &[String]) -> u32 {
        let lane = &mut self.lanes[l];
        let pick: Vec<usize> = (0..lane.slots.len())
            .filter(|&i| idle.is_empty() || idle.contains(&lane.slots[i].name))
            .collect();
        let names: Vec<String> = pick.iter().map(|&i| lane.slots[i].name.clone()).collect();
        for &i in &pick {
            lane.kill(i);
            lane.spawn(i);
        }
        self.note(&format!(
            "still stuck after {} s: restarting {names:?} as an operator would",
            self.plan.give_up.as_secs()
        ));
        pick.len() as u32
    }

    /// Each worker's `/livez` and `/readyz` answers, into the timeline.
    pub(super) async fn probe(&mut self, what: &str) {
        let mut seen = Vec::new();
        for lane in &self.lanes {
            for i in 0..lane.slots.len() {
                let name = &lane.slots[i].name;
                if !lane.running(i) {
                    seen.push(format!("{name}: not running"));
                    continue;
                }
                let short = |t: String| t.replace('\n', " ").chars().take(60).collect::<String>();
                let live = short(lane.admin_text(i, "/livez").await);
                let ready = short(lane.admin_text(i, "/readyz").await);
                seen.push(format!("{name}: livez {live}, readyz {ready}"));
            }
        }
        self.note(&format!("during {what}: {}", seen.join("; ")));
    }

    /// Restarts the workers of lane `l` that exited, or (when `check_livez`) whose `/livez`
    /// failed three checks in a row; returns how many.
    async fn orchestrate(&mut self, l: usize, check_livez: bool) -> u32 {
        let mut n = 0;
        for (i, status) in self.lanes[l].exited() {
            let name = self.lanes[l].slots[i].name.clone();
            self.note(&format!(
                "{name} exited by itself ({status}): restarting it"
            ));
            self.lanes[l].spawn(i);
            n += 1;
        }
        if !check_livez {
            return n;
        }
        for i in 0..self.lanes[l].slots.len() {
            if !self.lanes[l].running(i) {
                continue;
            }
            match self.lanes[l].livez(i).await {
                Ok(()) => self.lanes[l].slots[i].livez_failures = 0,
                Err(e) => {
                    let slot = &mut self.lanes[l].slots[i];
                    slot.livez_failures += 1;
                    if slot.livez_failures >= 3 {
                        let name = slot.name.clone();
                        self.note(&format!(
                            "{name} failed /livez 3 times ({e}): restarting it"
                        ));
                        self.lanes[l].kill(i);
                        self.lanes[l].spawn(i);
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// A stall report for lane `l`, next to the worker logs.
    async fn diagnose(&mut self, what: &str, l: usize, idle: &[String]) {
        self.stalls += 1;
        let lane = &self.lanes[l];
        let path = self
            .plan
            .dir
            .join(format!("stall-{}-{}.txt", self.stalls, lane.name));
        let mut r = format!(
            "STALL at {} after `{what}`: {} not caught up with every worker holding partitions \
             within {} s of the fault's end; running workers in no assignment: {idle:?}\n\n",
            wall_clock(),
            lane.name,
            self.plan.stuck_after.as_secs()
        );
        r.push_str(&lane.lag_detail().await);
        let direct = lane.cfg.kafka.brokers.clone();
        let group = lane.cfg.kafka.group_id.clone();
        for extra in [&["--members", "--verbose"][..], &["--state"][..], &[][..]] {
            let mut args = vec![
                "consumer-groups",
                "--bootstrap-server",
                &direct,
                "--describe",
                "--group",
                &group,
            ];
            args.extend_from_slice(extra);
            r.push_str(&format!("\n$ scripts/stack kafka {}\n", args.join(" ")));
            r.push_str(&self.stack.kafka_tool(&args).await);
        }
        for i in 0..lane.slots.len() {
            let s = &lane.slots[i];
            r.push_str(&format!(
                "\n== {} (generation {}, admin {}, log {})\n",
                s.name,
                s.generation,
                s.admin,
                s.log.display()
            ));
            for route in ["/livez", "/readyz"] {
                r.push_str(&format!("{route}: {}\n", lane.admin_text(i, route).await));
            }
            let metrics = lane.admin_text(i, "/metrics").await;
            for line in metrics.lines().filter(|l| l.starts_with("eddy_")) {
                r.push_str(line);
                r.push('\n');
            }
        }
        let _ = std::fs::write(&path, &r);
        let name = lane.name;
        self.note(&format!(
            "STALL: {name} not whole and caught up {} s after `{what}`; report in {}",
            self.plan.stuck_after.as_secs(),
            path.display()
        ));
    }
}
