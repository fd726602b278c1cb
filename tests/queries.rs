//! The analyst's query pack on real data: a fleet through `eddy run` into ClickHouse, then every
//! query's answer checked against what the events and the offline replay say independently.
mod common;

use common::*;
use eddy::contract::{decode, Event, OutputEvent};
use eddy::engine::fingerprint::keelwave_raw;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

const T0: i64 = 1_767_225_600_000;

/// One row of keelwave's `/loops`: (base64 fingerprint, hits, step indices, tool).
type LoopRow = (String, usize, String, String);
/// Per run: raw fingerprint → (step indices, tool).
type RunFingerprints = HashMap<[u8; 32], (Vec<u64>, String)>;

fn p(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn col<'a>(t: &'a eddy::query::Table, row: &'a [String], name: &str) -> &'a str {
    &row[t.column(name).unwrap_or_else(|| panic!("column {name}"))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_pack_answers_match_the_events() {
    let ep = endpoints().await;
    let cfg = test_config(&ep, "queries");
    let sim = eddy::simulate::SimulateArgs {
        runs: 240,
        loop_rate: 0.35,
        seed: 8,
        projects: 2,
        start_ms: T0,
        out: None,
        unfinished_rate: 0.0,
        ..Default::default()
    };
    let lines: Vec<(String, String)> = eddy::simulate::generate(&sim)
        .into_iter()
        .map(|(_, k, l)| (k, l))
        .collect();
    let input: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let (outs, _) = eddy::replay::replay_to_vec(
        input.as_bytes(),
        Arc::new(cfg.engine.clone()),
        cfg.kafka.topics.partitions as u32,
    );
    produce(&cfg, &lines).await;
    let mut w = spawn_worker(&cfg, &[]);
    let t = Duration::from_secs(120);
    assert_eq!(
        await_ch_count(
            &cfg,
            "SELECT count() FROM {db}.runs FINAL",
            sim.runs as u64,
            t
        )
        .await,
        sim.runs as u64
    );
    let steps = lines
        .iter()
        .filter(|(_, l)| l.contains("\"kind\":\"step\""))
        .count() as u64;
    assert_eq!(
        await_ch_count(&cfg, "SELECT count() FROM {db}.steps FINAL", steps, t).await,
        steps
    );
    stop_gracefully(&mut w);

    let client = clickhouse(&cfg).with_database(&cfg.clickhouse.database);
    let project = "proj-0";
    let window = [
        ("project_id", project),
        ("from", "2026-01-01T00:00:00Z"),
        ("to", "2026-01-02T00:00:00Z"),
    ];
    let terminated: Vec<_> = outs
        .iter()
        .filter_map(|o| match o {
            OutputEvent::RunTerminated(t) if t.project_id == project => Some(t.clone()),
            _ => None,
        })
        .collect();
    let loop_runs = terminated.iter().filter(|t| t.loop_detected).count();
    assert!(
        loop_runs > 0 && loop_runs < terminated.len(),
        "the fixture has both kinds"
    );

    // summary: this window, and the empty one before it.
    let s = eddy::query::execute(&client, "summary", &p(&window))
        .await
        .expect("summary");
    let r = &s.rows[0];
    assert_eq!(col(&s, r, "runs"), terminated.len().to_string());
    assert_eq!(col(&s, r, "loop_runs"), loop_runs.to_string());
    assert_eq!(col(&s, r, "prev_runs"), "0");

    // health: per agent.
    let h = eddy::query::execute(&client, "health", &p(&window))
        .await
        .expect("health");
    let mut want: HashMap<String, (usize, usize)> = HashMap::new();
    for t in &terminated {
        let e = want
            .entry(t.agent_name.clone().unwrap_or_default())
            .or_default();
        e.0 += 1;
        e.1 += usize::from(t.loop_detected);
    }
    assert_eq!(h.rows.len(), want.len());
    for row in &h.rows {
        let (runs, loops) = want[col(&h, row, "agent_name")];
        assert_eq!(col(&h, row, "runs"), runs.to_string());
        assert_eq!(col(&h, row, "loop_runs"), loops.to_string());
    }

    // runs_timeseries: buckets partition the window; their sums are the totals.
    let ts = eddy::query::execute(
        &client,
        "runs_timeseries",
        &p(&[window[0], window[1], window[2], ("bucket_seconds", "120")]),
    )
    .await
    .expect("timeseries");
    assert!(ts.rows.len() > 1, "several two-minute buckets");
    let sum = |c: &str| -> usize {
        ts.rows
            .iter()
            .map(|r| col(&ts, r, c).parse::<usize>().unwrap_or(0))
            .sum()
    };
    assert_eq!(sum("runs"), terminated.len());
    assert_eq!(sum("loop_runs"), loop_runs);

    // terminations by reason.
    let tr = eddy::query::execute(&client, "terminations", &p(&window))
        .await
        .expect("terminations");
    let mut reasons: HashMap<String, usize> = HashMap::new();
    for t in &terminated {
        *reasons.entry(t.termination_reason.clone()).or_default() += 1;
    }
    for row in &tr.rows {
        assert_eq!(
            col(&tr, row, "runs"),
            reasons[col(&tr, row, "termination_reason")].to_string()
        );
    }

    // loop_onset: where loops began, as the replay says.
    let lo = eddy::query::execute(&client, "loop_onset", &p(&window))
        .await
        .expect("onset");
    let mut onsets: BTreeMap<u64, usize> = BTreeMap::new();
    for t in terminated.iter().filter(|t| t.loop_detected) {
        *onsets
            .entry(t.loop_step_index.expect("caught runs have an onset"))
            .or_default() += 1;
    }
    let got: BTreeMap<u64, usize> = lo
        .rows
        .iter()
        .map(|r| {
            (
                col(&lo, r, "onset_step").parse().unwrap_or(0),
                col(&lo, r, "loop_runs").parse().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(got, onsets);

    // top_looping_tools and loop cost: totals agree with the runs they cover.
    let tt = eddy::query::execute(&client, "top_looping_tools", &p(&window))
        .await
        .expect("tools");
    let tool_loops: usize = tt
        .rows
        .iter()
        .map(|r| col(&tt, r, "loop_runs").parse::<usize>().unwrap_or(0))
        .sum();
    assert_eq!(tool_loops, loop_runs);
    let lc = eddy::query::execute(&client, "loop_cost_per_agent_day", &p(&window))
        .await
        .expect("cost");
    assert!(!lc.rows.is_empty());

    // agent_rollup: the per-minute rollup at 5-minute buckets, against sums recomputed here from
    // the raw events (steps, errors, tokens, cost, run starts) and the replay's verdicts (ends,
    // loops, where each loop was caught).
    check_agent_rollup(&client, project, &window, &lines, &terminated).await;

    // run_loops: keelwave's /loops, recomputed here from the raw events.
    let mut by_run: HashMap<String, RunFingerprints> = HashMap::new();
    for (_, l) in &lines {
        if let Ok(Event::Step(s)) = decode(l.as_bytes()) {
            if s.key.project_id != project {
                continue;
            }
            if let Some(tool) = &s.tool_name {
                let fp = keelwave_raw(tool, s.tool_input.as_ref().map(|r| r.get()));
                let e = by_run
                    .entry(s.key.run_id.clone())
                    .or_default()
                    .entry(fp)
                    .or_insert_with(|| (Vec::new(), tool.clone()));
                e.0.push(s.step_index);
            }
        }
    }
    let mut checked_nonempty = 0;
    let mut checked_empty = 0;
    let mut checked_ties = 0;
    // Every run, in a fixed order: a sample drawn from a HashMap's order made a wrong tie rule
    // pass or fail by chance.
    let mut runs: Vec<_> = by_run.iter().collect();
    runs.sort_by(|a, b| a.0.cmp(b.0));
    for (run, fps) in runs {
        let mut want: Vec<(u64, LoopRow)> = fps
            .iter()
            .filter(|(_, (ix, _))| ix.len() >= 2)
            .map(|(fp, (ix, tool))| {
                use base64::Engine;
                let mut ix = ix.clone();
                ix.sort();
                let list = format!(
                    "[{}]",
                    ix.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                );
                (
                    ix[0],
                    (
                        base64::engine::general_purpose::STANDARD.encode(fp),
                        ix.len(),
                        list,
                        tool.clone(),
                    ),
                )
            })
            .collect();
        // Ties on hits go by first step, numerically: a step has one fingerprint, so the order is
        // total and comparing the rendered lists as strings would put "[13,16]" before "[5,10]".
        want.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        let want: Vec<LoopRow> = want.into_iter().map(|(_, row)| row).collect();
        let got = eddy::query::execute(
            &client,
            "run_loops",
            &p(&[("project_id", project), ("run_id", run)]),
        )
        .await
        .expect("run_loops");
        let got: Vec<LoopRow> = got
            .rows
            .iter()
            .map(|r| {
                (
                    col(&got, r, "fingerprint").to_string(),
                    col(&got, r, "hits").parse().unwrap_or(0),
                    col(&got, r, "step_indices").to_string(),
                    col(&got, r, "tool_name").to_string(),
                )
            })
            .collect();
        assert_eq!(got, want, "run_loops for {run}");
        if want.windows(2).any(|w| w[0].1 == w[1].1) {
            checked_ties += 1;
        }
        if want.is_empty() {
            checked_empty += 1;
        } else {
            checked_nonempty += 1;
        }
    }
    assert!(
        checked_nonempty > 0 && checked_empty > 0 && checked_ties > 0,
        "every shape of answer was checked: {checked_nonempty} with loops \
         ({checked_ties} with tied hits), {checked_empty} without"
    );
}

/// (bucket start, agent) → [runs_started, runs_ended, loop_runs, steps, errors, tokens, loops_caught]
/// and (cost, loop cost).
type RollupWant = BTreeMap<(String, String), ([u64; 7], [f64; 2])>;

async fn check_agent_rollup(
    client: &clickhouse::Client,
    project: &str,
    window: &[(&str, &str); 3],
    lines: &[(String, String)],
    terminated: &[eddy::contract::RunTerminated],
) {
    const BUCKET_MS: i64 = 300_000;
    let bucket = |ms: i64| -> String {
        let t =
            time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(BUCKET_MS) * BUCKET_MS / 1000)
                .expect("bucket time");
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    };
    let ms_of = |ts: &str| -> i64 {
        let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339)
            .expect("rfc3339");
        (t.unix_timestamp_nanos() / 1_000_000) as i64
    };
    let by_run: HashMap<&str, &eddy::contract::RunTerminated> =
        terminated.iter().map(|t| (t.run_id.as_str(), t)).collect();
    let agent_of = |run: &str| -> String {
        by_run
            .get(run)
            .and_then(|t| t.agent_name.clone())
            .unwrap_or_default()
    };
    let mut want: RollupWant = BTreeMap::new();
    let mut started: std::collections::HashSet<String> = Default::default();
    // Steps to catch, counted from the events: the run's distinct step indices seen when its
    // catching step arrived, after the loop's first step up to the catching one. Per bucket:
    // (sum, loops).
    let mut seen: HashMap<String, std::collections::BTreeSet<u64>> = HashMap::new();
    let mut to_catch: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for (_, l) in lines {
        let Ok(ev) = decode(l.as_bytes()) else {
            continue;
        };
        if ev.key().project_id != project {
            continue;
        }
        let run = ev.key().run_id.clone();
        if started.insert(run.clone()) {
            want.entry((bucket(ev.ts_ms()), agent_of(&run)))
                .or_default()
                .0[0] += 1;
        }
        if let Event::Step(s) = ev {
            let t = by_run[run.as_str()];
            let fresh = seen.entry(run.clone()).or_default().insert(s.step_index);
            if let (Some(began), Some(caught)) = (t.loop_step_index, t.loop_caught_step_index) {
                if fresh && s.step_index == caught {
                    let n = seen[run.as_str()].range(began + 1..=caught).count() as u64;
                    let e = to_catch
                        .entry((bucket(s.ts_ms), agent_of(&run)))
                        .or_default();
                    e.0 += n;
                    e.1 += 1;
                }
            }
            let e = want.entry((bucket(s.ts_ms), agent_of(&run))).or_default();
            e.0[3] += 1;
            e.0[4] += u64::from(s.tool_success == Some(false));
            e.0[5] += s.tokens.unwrap_or(0);
            let cost = s.cost_usd.unwrap_or(0.0);
            e.1[0] += cost;
            if let Some(caught) = t.loop_caught_step_index {
                if s.step_index >= caught {
                    e.1[1] += cost;
                }
                if s.step_index == caught {
                    e.0[6] += 1;
                }
            }
        }
    }
    for t in terminated {
        let e = want
            .entry((
                bucket(ms_of(&t.ts)),
                t.agent_name.clone().unwrap_or_default(),
            ))
            .or_default();
        e.0[1] += 1;
        e.0[2] += u64::from(t.loop_detected);
    }
    let got = eddy::query::execute(
        client,
        "agent_rollup",
        &p(&[window[0], window[1], window[2], ("bucket_seconds", "300")]),
    )
    .await
    .expect("agent_rollup");
    let n = |row: &[String], c: &str| -> u64 { col(&got, row, c).parse().unwrap_or(u64::MAX) };
    let f = |row: &[String], c: &str| -> f64 { col(&got, row, c).parse().unwrap_or(f64::NAN) };
    let mut seen = 0;
    for row in &got.rows {
        let k = (
            col(&got, row, "bucket_start").to_string(),
            col(&got, row, "agent_name").to_string(),
        );
        let (w, c) = want
            .get(&k)
            .unwrap_or_else(|| panic!("unexpected rollup bucket {k:?}"));
        let counts = [
            n(row, "runs_started"),
            n(row, "runs_ended"),
            n(row, "loop_runs"),
            n(row, "steps"),
            n(row, "errors"),
            n(row, "tokens"),
            n(row, "loops_caught"),
        ];
        assert_eq!(&counts, w, "agent_rollup counts for {k:?}");
        let (sum, loops) = to_catch.get(&k).copied().unwrap_or((0, 0));
        let avg = (sum as f64 / loops.max(1) as f64 * 100.0 + 0.5).floor() / 100.0;
        assert!(
            (f(row, "avg_caught_after_steps") - avg).abs() < 1e-9,
            "steps to catch for {k:?}: {} (want {avg})",
            col(&got, row, "avg_caught_after_steps")
        );
        assert!((f(row, "cost_usd") - c[0]).abs() < 1e-5, "cost for {k:?}");
        assert!(
            (f(row, "loop_cost_usd") - c[1]).abs() < 1e-5,
            "loop cost for {k:?}"
        );
        seen += 1;
    }
    assert_eq!(seen, want.len(), "every expected bucket is in the rollup");
    assert!(
        want.values().any(|(w, _)| w[6] > 0),
        "the fixture catches loops"
    );
}
