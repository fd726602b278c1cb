//! When each kind of loop reaches a verdict, and the healthy look-alikes that must not. The
//! expectations come from the peers' public semantics (cited per test), not from eddy's output.
mod common_trace;

use common_trace::{repeat, Trace};
use eddy::contract::Severity;
use serde_json::json;

/// Roo Code blocks the call after three identical consecutive ones (the issue's example of
/// conclusive evidence: an identical call with an identical result for the third time): the
/// third stops, with no alert before it.
#[test]
fn identical_consecutive_calls_stop_at_the_third() {
    let t = Trace::default().tool("ls", json!({"path": "x"}), json!({"n": 0}));
    let t = repeat(t, 4, |t, _| {
        t.tool(
            "read_file",
            json!({"path": "config.yaml"}),
            json!({"content": "a: 1"}),
        )
    });
    assert_eq!(t.first(Severity::Alert), Some(4));
    assert_eq!(t.first(Severity::Stop), Some(4));
}

/// Thoughts between the calls bring no new input: still back to back.
#[test]
fn thoughts_between_identical_calls_do_not_reset_them() {
    let t = repeat(Trace::default(), 3, |t, _| {
        t.tool("search", json!({"q": "acme ceo"}), json!({"hits": []}))
            .say("think", "Nothing yet.")
    });
    assert_eq!(t.first(Severity::Alert), Some(5));
}

/// Cline drops `task_progress` before comparing calls; a turn counter is the same kind of
/// parameter.
#[test]
fn progress_tracking_parameters_are_not_part_of_the_call() {
    let t = repeat(Trace::default(), 3, |t, k| {
        t.tool(
            "execute_command",
            json!({"command": "npm run build", "task_progress": format!("- [ ] build ({k})"), "turn": k}),
            json!({"stdout": "TS2304 Cannot find name 'foo'"}),
        )
    });
    assert_eq!(t.first(Severity::Alert), Some(3));
}

/// The same call answered differently each time is progress (loopctl's rule), however often.
#[test]
fn the_same_call_with_changing_results_stays_quiet() {
    let t = repeat(Trace::default(), 8, |t, k| {
        t.tool(
            "queue_depth",
            json!({"q": "emails"}),
            json!({"depth": 1000 - 100 * k}),
        )
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Re-reading an unchanged file between different failed edits is the recovery the edit tools
/// ask for.
#[test]
fn rereads_between_different_failed_edits_stay_quiet() {
    let read = |t: Trace| t.tool("read_file", json!({"path": "a.rs"}), json!("fn a() {}"));
    let t = repeat(Trace::default(), 3, |t, k| {
        read(t).fail(
            "str_replace",
            json!({"path": "a.rs", "old": format!("fn b{k}")}),
            json!({"error": "old text not found"}),
        )
    });
    let t = read(t).tool(
        "str_replace",
        json!({"path": "a.rs", "old": "fn a"}),
        json!({"ok": true}),
    );
    assert_eq!(t.first(Severity::Alert), None);
}

/// OpenHands: six events alternating A, B with identical observations is stuck. The first leg
/// of the third round alerts, the third round's end stops.
#[test]
fn a_ping_pong_with_stagnant_results_alerts_in_its_third_round() {
    let t = repeat(Trace::default(), 3, |t, _| {
        t.tool(
            "git_checkout",
            json!({"b": "main"}),
            json!({"ok": true, "head": "a1"}),
        )
        .tool(
            "git_checkout",
            json!({"b": "dev"}),
            json!({"ok": true, "head": "b2"}),
        )
    });
    assert_eq!(t.first(Severity::Alert), Some(5));
    // Corroborated by the repeated calls of A, the cycle may stop sooner, never later.
    assert!(t.first(Severity::Stop).is_some_and(|s| s <= 6));
}

#[test]
fn a_three_step_cycle_with_stagnant_results_alerts_in_its_third_round() {
    let t = repeat(Trace::default(), 3, |t, _| {
        t.tool("open", json!({"p": "a"}), json!("see b"))
            .tool("open", json!({"p": "b"}), json!("see c"))
            .tool("open", json!({"p": "c"}), json!("see a"))
    });
    assert_eq!(t.first(Severity::Alert), Some(7));
    assert!(t.first(Severity::Stop).is_some_and(|s| s <= 9));
}

/// Read, test, edit, test again with the test's output changing: converging, not a cycle.
#[test]
fn a_cycle_whose_results_change_stays_quiet() {
    let t = repeat(Trace::default(), 5, |t, k| {
        t.tool("run_tests", json!({}), json!({"failed": 5 - k}))
            .tool(
                "edit",
                json!({"path": format!("m{k}.py")}),
                json!({"ok": true}),
            )
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Gemini CLI halts a response that repeats a 50-character chunk ten times.
#[test]
fn a_response_repeating_one_sentence_is_caught_at_that_step() {
    let unit = "The answer is in the configuration file, line 12. ";
    let t = Trace::default()
        .tool("ls", json!({}), json!([]))
        .say("message", &unit.repeat(10));
    assert!(
        t.first(Severity::Alert) == Some(2),
        "{:?}",
        t.first(Severity::Alert)
    );
    let t = Trace::default().say("message", &"Yes. No. Maybe. ".repeat(30));
    assert_eq!(t.first(Severity::Alert), Some(1));
}

/// What Gemini CLI's users reported as false positives: tables, lists with a shared prefix,
/// box drawing, code blocks, headings and dividers repeat by design.
#[test]
fn markdown_structures_are_not_chanting() {
    let rows: String = (0..30)
        .map(|k| format!("| item | {k} | ok | ok | ok |\n"))
        .collect();
    let list: String = (0..30)
        .map(|k| format!("- Update the import path in src/components/shared/widgets/w{k}.tsx\n"))
        .collect();
    let boxes = format!(
        "┌──────────────┬──────────────┐\n{}└──────────────┴──────────────┘\n",
        "│              │              │\n".repeat(20)
    );
    let code = format!(
        "```\n{}```\n",
        "    assert check(x) == expected\n".repeat(30)
    );
    let heads: String = (0..12)
        .map(|k| format!("## Section {k}\n\nSee below.\n\n---\n\n"))
        .collect();
    for text in [rows, list, boxes, code, heads] {
        let t = Trace::default().say("message", &format!("Here it is:\n\n{text}"));
        assert_eq!(t.first(Severity::Warn), None, "{text}");
    }
}

/// OpenHands SDK: three consecutive agent messages with nothing in between is a monologue.
#[test]
fn three_announcements_without_acting_are_a_monologue() {
    let t = Trace::default()
        .tool("ls", json!({}), json!(["a"]))
        .say(
            "message",
            "Let me check the deployment configuration first.",
        )
        .say("message", "I'll look at the service logs now.")
        .say("message", "Now I'm going to verify the settings.");
    assert_eq!(t.first(Severity::Alert), Some(4));
}

/// A long answer in parts, each bringing new text, is not a monologue; nor is a chat where the
/// user speaks between the agent's messages.
#[test]
fn a_multi_part_answer_and_a_chat_are_not_monologues() {
    let parts = [
        "Part 1 of 3: the billing service retries failed requests with exponential backoff \
         and records every attempt in the ledger table, so a replay can reconcile charges.",
        "Part 2 of 3: search indexes are rebuilt nightly from the primary replica; queries \
         during the rebuild read the previous snapshot, which is why results lag a day.",
        "Part 3 of 3: to fix the drift, pin the snapshot version in the query layer and add \
         an alert on replica lag above five minutes; then the dashboards agree again.",
    ];
    let t = parts
        .iter()
        .fold(Trace::default(), |t, p| t.say("message", p));
    assert_eq!(t.first(Severity::Warn), None);
    let questions = [
        "what about billing?",
        "and the search cluster?",
        "how is the ledger doing?",
        "any news on shipping?",
    ];
    let t = repeat(Trace::default(), 4, |t, k| {
        t.say("user", questions[k])
            .say("message", "Let me check that for you.")
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// opencode caps compaction attempts at two: a third with nothing new since is a loop.
#[test]
fn compactions_with_nothing_new_between_them_alert() {
    let t = Trace::default().tool("read", json!({"p": "log"}), json!("ERROR timeout"));
    let t = repeat(t, 3, |t, k| {
        t.say("compaction", &format!("Conversation compacted ({k})."))
            .tool("read", json!({"p": "log"}), json!("ERROR timeout"))
    });
    let alert = t.first(Severity::Alert).expect("an alert");
    assert!(alert <= 6, "alert at {alert}");
}

/// A context that piles up tokens while no step brings anything new (model calls that add
/// nothing), and one that grows as the agent reads new pages.
#[test]
fn context_growing_with_nothing_new_alerts() {
    let idle = |t: Trace| {
        let mut t = t;
        t.0.push(json!({"step_type": "llm"}));
        t
    };
    let t = Trace::default().tool("fetch", json!({"u": "a"}), json!("page a"));
    let t = repeat(t, 5, |t, _| idle(t));
    let t = t.with_context(&[10_000, 20_000, 28_000, 36_000, 44_000, 52_000]);
    let at = t.first_by(Some("context_pressure"), Severity::Alert);
    assert!(at.is_some_and(|s| s <= 6), "{at:?}");
    let t = repeat(Trace::default(), 6, |t, k| {
        t.tool("fetch", json!({"u": k}), json!(format!("page {k}")))
    })
    .with_context(&[10_000, 20_000, 28_000, 36_000, 44_000, 52_000]);
    assert_eq!(t.first(Severity::Alert), None);
}

/// A success after repeated errors ends the failure streak (goose resets on success): two
/// errors, a success, two errors never make three in a row.
#[test]
fn errors_that_recover_reset_the_failure_evidence() {
    let t = repeat(Trace::default(), 3, |t, k| {
        let err = json!({"error": "upstream returned an error: connection refused"});
        t.fail("http_get", json!({"url": "u"}), err.clone())
            .fail("http_get", json!({"url": "u"}), err)
            .tool("http_get", json!({"url": "u"}), json!({"page": k}))
            .tool("note", json!({"k": k}), json!({"ok": k}))
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// A retry streak that warned, then recovered, no longer corroborates: re-reading a file three
/// times afterwards (a warning of its own) stays a warning.
#[test]
fn a_recovered_failure_does_not_corroborate_later_warnings() {
    let err = json!({"error": "503 Service Unavailable: upstream temporarily unavailable"});
    let t = repeat(Trace::default(), 5, |t, _| {
        t.fail("http_get", json!({"url": "u"}), err.clone())
    })
    .tool("http_get", json!({"url": "u"}), json!({"items": [1, 2]}));
    assert!(t.first(Severity::Warn).is_some(), "the retries warn");
    let t = repeat(t, 3, |t, k| {
        t.tool("read_file", json!({"path": "cfg.yaml"}), json!("a: 1"))
            .tool("write_note", json!({"n": k}), json!({"ok": k}))
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Gymnasium's TimeLimit counter in an observation counts steps, not states: an environment
/// that answers the same observation with only the counter moving is stuck.
#[test]
fn an_elapsed_steps_counter_does_not_make_an_observation_new() {
    let t = repeat(Trace::default(), 3, |t, k| {
        t.tool(
            "step",
            json!({"a": "down"}),
            json!({"obs": {"pos": [3, 4]}, "r": -0.01, "elapsed_steps": 40 + k}),
        )
    });
    assert_eq!(t.first(Severity::Alert), Some(3));
}

/// LoopGuard's semantic check flags the third similar call; three reworded searches that all
/// come back empty are how a reviewer first sees a search loop.
#[test]
fn three_reworded_searches_that_find_nothing_alert_at_the_third() {
    let queries = [
        "acme corp ceo name",
        "who is the ceo of acme corp",
        "name of the acme corp ceo",
        "acme corp ceo",
    ];
    let t = queries.iter().fold(Trace::default(), |t, q| {
        t.tool("web_search", json!({"query": q}), json!({"results": []}))
    });
    assert_eq!(t.first(Severity::Alert), Some(3));
}

/// The same documents in a new order, each with a per-request result id and score, are the same
/// answer: reworded searches that keep getting it are a loop, as with an identical answer.
#[test]
fn reworded_searches_answered_with_the_same_documents_reshuffled_alert() {
    let docs = [
        (
            "Acme Corp leadership team",
            "https://acme.example/about/leadership",
        ),
        (
            "Acme annual report letter to shareholders",
            "https://acme.example/investors",
        ),
        (
            "Acme Corp company profile and key people",
            "https://companies.example/acme",
        ),
    ];
    let queries = [
        "who runs acme corp",
        "acme corp chief executive officer",
        "acme corp ceo name",
        "the acme corp ceo",
        "current leader of acme corp",
    ];
    let t = queries.iter().enumerate().fold(Trace::default(), |t, (i, q)| {
        // A different order and fresh ids on every answer.
        let results: Vec<_> = (0..docs.len())
            .map(|k| {
                let (title, url) = docs[(k + i) % docs.len()];
                json!({"id": format!("res_{:06x}", 0x1f3a7 * (i + 1) + k), "score": 0.9 - 0.1 * k as f64 - 0.01 * i as f64,
                       "title": title, "url": url})
            })
            .collect();
        t.tool("web_search", json!({"query": q, "n": 3}), json!({"results": results}))
    });
    let at = t.first(Severity::Alert).expect("a verdict");
    assert!(
        at <= 4,
        "alerted at step {at}, the fourth reworded search at the latest"
    );
}

/// A narrowing search finds new documents each time, sharing one with the previous answer:
/// progress, whatever the wording has in common.
#[test]
fn reworded_searches_that_find_new_documents_stay_quiet() {
    let queries = [
        "acme corp ceo",
        "acme corp ceo appointment 2025",
        "acme ceo interview",
        "acme ceo biography",
        "acme ceo early career",
    ];
    let themes = ["alpha", "beta", "gamma", "delta", "epsilon"];
    let news = [
        "ceo named in march",
        "interview with the new chief",
        "a conversation on strategy",
        "born and raised in ohio",
        "first job at a startup",
    ];
    let t = queries
        .iter()
        .enumerate()
        .fold(Trace::default(), |t, (i, q)| {
            let (theme, title) = (themes[i], news[i]);
            let url = format!("https://news.example/{}", title.replace(' ', "-"));
            let results = json!([
                {"id": format!("res_{i}a"), "title": format!("Acme profile and key people {theme}"),
                 "url": "https://companies.example/acme"},
                {"id": format!("res_{i}b"), "title": title, "url": url},
            ]);
            t.tool(
                "web_search",
                json!({"query": q}),
                json!({"results": results}),
            )
        });
    assert_eq!(t.first(Severity::Alert), None);
}
