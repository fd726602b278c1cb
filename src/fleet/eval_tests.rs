use super::*;
use crate::fleet::alert::alert_id;

const T0: u32 = 1_767_225_600; // 2026-01-01T00:00:00Z
const H: u32 = 3600;

fn cfg() -> FleetConfig {
    FleetConfig::default() // hour windows, 6 baseline windows, 20 runs, ×2 and +0.10 / +$0.05
}

/// `n` runs of `agent` ending in window `w`, the first `loops` of them looping at `cost` each.
fn runs(w: u32, agent: &str, n: usize, loops: usize, cost: f64) -> Vec<MinuteRow> {
    (0..n)
        .map(|i| MinuteRow {
            bucket: T0 + w * H + 60 * (i as u32 % 60),
            agent_name: agent.into(),
            run_id: format!("{agent}-w{w}-r{i:03}"),
            runs_ended: 1,
            loop_runs: u8::from(i < loops),
            loop_cost_usd: if i < loops { cost } else { 0.0 },
        })
        .collect()
}

fn steady(agent: &str) -> Vec<MinuteRow> {
    (0..6).flat_map(|w| runs(w, agent, 30, 3, 0.2)).collect()
}

fn window6() -> Window {
    Window {
        start: T0 + 6 * H,
        seconds: H,
    }
}

#[test]
fn a_steady_fleet_raises_nothing() {
    let mut rows = steady("coder");
    rows.extend(steady("reviewer"));
    rows.extend(runs(6, "coder", 30, 4, 0.2));
    rows.extend(runs(6, "reviewer", 30, 2, 0.2));
    assert_eq!(evaluate("p", window6(), &rows, &cfg()), vec![]);
}

#[test]
fn a_new_version_that_loops_more_is_named() {
    let mut rows = steady("coder@1");
    rows.extend(steady("reviewer"));
    rows.extend(runs(6, "coder@1", 30, 3, 0.2));
    rows.extend(runs(6, "coder@2", 30, 15, 0.2));
    rows.extend(runs(6, "reviewer", 30, 3, 0.2));
    let alerts = evaluate("p", window6(), &rows, &cfg());
    let got: Vec<(&str, Option<&str>, Metric)> = alerts
        .iter()
        .map(|a| (a.agent_name.as_str(), a.agent_version.as_deref(), a.metric))
        .collect();
    assert_eq!(
        got,
        vec![
            ("coder", Some("2"), Metric::LoopRate),
            ("coder", Some("2"), Metric::LoopCostPerRun)
        ]
    );
    // Baseline: 18 looping of 180 ended; current: 15 of 30.
    assert_eq!(
        alerts[0].baseline,
        Stat {
            value: 0.1,
            runs: 180
        }
    );
    assert_eq!(
        alerts[0].current,
        Stat {
            value: 0.5,
            runs: 30
        }
    );
    // 18 × $0.2 over 180 runs; 15 × $0.2 over 30.
    assert_eq!(
        alerts[1].baseline,
        Stat {
            value: 0.02,
            runs: 180
        }
    );
    assert_eq!(
        alerts[1].current,
        Stat {
            value: 0.1,
            runs: 30
        }
    );
    assert_eq!(alerts[0].window_start, "2026-01-01T06:00:00Z");
    assert_eq!(alerts[0].window_end, "2026-01-01T07:00:00Z");
    assert_eq!(alerts[0].baseline_start, "2026-01-01T00:00:00Z");
    assert_eq!(alerts[0].example_run_ids.len(), 5);
    assert!(alerts[0]
        .example_run_ids
        .iter()
        .all(|r| r.starts_with("coder@2-w6-")));
}

#[test]
fn an_agent_without_versions_is_judged_whole() {
    let mut rows = steady("coder");
    rows.extend(runs(6, "coder", 40, 20, 0.0));
    let alerts = evaluate("p", window6(), &rows, &cfg());
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].agent_version, None);
    assert_eq!(alerts[0].metric, Metric::LoopRate);
    assert_eq!(
        alerts[0].current,
        Stat {
            value: 0.5,
            runs: 40
        }
    );
}

#[test]
fn small_numbers_and_small_rises_raise_nothing() {
    // Every run of the window loops, but there are only 5 of them.
    let mut rows = steady("coder");
    rows.extend(runs(6, "coder", 5, 5, 0.2));
    assert_eq!(evaluate("p", window6(), &rows, &cfg()), vec![]);
    // Five times the baseline rate, but 0.01 → 0.05 is under the absolute rise.
    let mut rows: Vec<MinuteRow> = (0..6).flat_map(|w| runs(w, "a", 100, 1, 0.0)).collect();
    rows.extend(runs(6, "a", 100, 5, 0.0));
    assert_eq!(evaluate("p", window6(), &rows, &cfg()), vec![]);
    // A new agent has no baseline of its own: nothing to compare with.
    let rows = runs(6, "newcomer", 50, 50, 1.0);
    assert_eq!(evaluate("p", window6(), &rows, &cfg()), vec![]);
}

#[test]
fn rows_outside_the_windows_and_their_order_change_nothing() {
    let mut rows = steady("coder");
    rows.extend(runs(6, "coder", 40, 20, 0.3));
    let want = serde_json::to_string(&evaluate("p", window6(), &rows, &cfg())).unwrap();
    assert!(want.contains("fleet_alert"));
    let mut noisy = rows.clone();
    noisy.extend(runs(7, "coder", 40, 40, 9.0)); // after the window
    noisy.extend(runs(6, "x", 40, 40, 9.0).into_iter().map(|mut r| {
        r.bucket -= 7 * H; // before the baseline
        r
    }));
    noisy.reverse();
    let got = serde_json::to_string(&evaluate("p", window6(), &noisy, &cfg())).unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_run_spanning_minutes_counts_once_per_window() {
    let mut rows = steady("coder");
    // One run of the window, in three minutes, looping in the last two.
    for (m, ended, cost) in [(0u32, 0u8, 0.0), (1, 0, 0.25), (2, 1, 0.5)] {
        rows.push(MinuteRow {
            bucket: T0 + 6 * H + 60 * m,
            agent_name: "coder".into(),
            run_id: "long".into(),
            runs_ended: ended,
            loop_runs: ended,
            loop_cost_usd: cost,
        });
    }
    // One run proves nothing: this is about counting, so any window may alert.
    let c = FleetConfig {
        min_runs: 1,
        max_p_value: 1.0,
        ..cfg()
    };
    let alerts = evaluate("p", window6(), &rows, &c);
    assert_eq!(alerts.len(), 2);
    assert_eq!(
        alerts[0].current,
        Stat {
            value: 1.0,
            runs: 1
        }
    );
    assert_eq!(
        alerts[1].current,
        Stat {
            value: 0.75,
            runs: 1
        }
    );
    assert_eq!(alerts[1].example_run_ids, vec!["long".to_string()]);
}

#[test]
fn ids_are_the_documented_hash_and_differ_per_window_and_metric() {
    // Test vector of docs/fleet-alerts.md, computed there with Python's hashlib.
    assert_eq!(
        alert_id(
            "p",
            "coder",
            "2",
            Metric::LoopRate,
            "2026-01-01T06:00:00Z",
            "2026-01-01T07:00:00Z"
        ),
        "5ecc74b084fd7c76ba8b1e6b13130fb2"
    );
    let a = |m, s: &str| alert_id("p", "coder", "", m, s, "e");
    assert_ne!(a(Metric::LoopRate, "s"), a(Metric::LoopCostPerRun, "s"));
    assert_ne!(a(Metric::LoopRate, "s"), a(Metric::LoopRate, "t"));
}

/// Test vector of docs/fingerprints.md, computed there with Python's hashlib: the resolution
/// of the alert above.
#[test]
fn a_resolution_id_is_the_documented_hash() {
    let open = crate::fleet::alert::OpenAlert {
        event_id: "5ecc74b084fd7c76ba8b1e6b13130fb2".into(),
        agent_name: "coder".into(),
        agent_version: Some("2".into()),
        metric: Metric::LoopRate,
    };
    let w = Window {
        start: T0 + 7 * H,
        seconds: H,
    };
    let (r, _) = crate::fleet::alert::resolve("p", w, &[open], &[]);
    assert_eq!(r[0].event_id, "d4af7a7190d5c84bab40c2de5ecf28e3");
}

#[test]
fn due_windows_resume_after_progress_and_stop_at_the_closed_ones() {
    // No progress: only the last closed window (backfill 1), or the last three.
    assert_eq!(due_windows(None, T0 + 3 * H + 59, H, 1), vec![T0 + 2 * H]);
    assert_eq!(
        due_windows(None, T0 + 3 * H, H, 3),
        vec![T0, T0 + H, T0 + 2 * H]
    );
    // After progress up to 01:00: 01:00 and 02:00, not 03:00 (it closes at 04:00).
    assert_eq!(
        due_windows(Some(T0 + H), T0 + 3 * H + 1800, H, 1),
        vec![T0 + H, T0 + 2 * H]
    );
    assert_eq!(
        due_windows(Some(T0 + 3 * H), T0 + 3 * H + 1800, H, 1),
        Vec::<u32>::new()
    );
}

#[test]
fn versions_split_at_the_last_separator() {
    assert_eq!(split_version("coder@2.1", "@"), ("coder", "2.1"));
    assert_eq!(split_version("team@coder@2", "@"), ("team@coder", "2"));
    assert_eq!(split_version("coder", "@"), ("coder", ""));
    assert_eq!(split_version("coder@", "@"), ("coder@", ""));
    assert_eq!(split_version("coder@2", ""), ("coder@2", ""));
}

#[test]
fn tails_match_exact_arithmetic() {
    // References: exact rational sums (Python's fractions and math.comb) and math.erfc.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.max(1e-300) + 1e-15;
    for (n, k, p, want) in [
        (40, 7, 0.05, 0.0033918975779359812),
        (40, 8, 1.0 / 12.0, 0.0159422183493606),
        (30, 15, 0.1, 3.559479269444172e-08),
        (10_000, 3000, 0.29, 0.014370193529239293),
    ] {
        let got = binomial_tail(n, k, p);
        assert!(close(got, want), "Bin({n}, {p}) >= {k}: {got} vs {want}");
    }
    assert_eq!(binomial_tail(10, 0, 0.3), 1.0);
    assert_eq!(binomial_tail(10, 11, 0.3), 0.0);
    assert_eq!(binomial_tail(10, 1, 0.0), 0.0);
    assert!((normal_tail(3.0) - 0.0013498980316300957).abs() < 2e-7);
    assert!((normal_tail(-1.0) - 0.8413447460685429).abs() < 2e-7);
}

#[test]
fn noise_a_steady_rate_makes_by_chance_is_not_a_regression() {
    // 10 % looping before; 8 of 40 (20 %) now: twice the rate and 10 points up, but a window
    // like this comes about once in sixty under the old rate.
    let mut rows: Vec<MinuteRow> = (0..6).flat_map(|w| runs(w, "a", 40, 4, 0.0)).collect();
    rows.extend(runs(6, "a", 40, 8, 0.0));
    assert_eq!(evaluate("p", window6(), &rows, &cfg()), vec![]);
    // 14 of 40 is not chance.
    rows.truncate(240);
    rows.extend(runs(6, "a", 40, 14, 0.0));
    assert_eq!(evaluate("p", window6(), &rows, &cfg()).len(), 1);
}
