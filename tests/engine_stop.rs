//! `stop` at the evidence: conclusive evidence stops at the step it becomes conclusive, weak
//! evidence alerts first and stops when the agent does the same again; and the healthy
//! look-alikes of each (polling that resolves, retries that recover, pagination, batch lookups,
//! edit -> error -> re-read -> edit) are never stopped. The expectations come from the peers'
//! public semantics and issue 41's examples of conclusive evidence, not from eddy's output.
mod common_trace;

use common_trace::{repeat, Trace};
use eddy::contract::Severity;
use serde_json::json;

/// LoopGuard scores a permanent error repeated (attempts=2) as STOP: the same request refused
/// for a reason retrying cannot change, with nothing done in between.
#[test]
fn a_permanent_error_repeated_with_nothing_between_stops_at_the_second() {
    let err = json!({"status": 401, "message": "Bad credentials"});
    let t = Trace::default()
        .tool("ls", json!({}), json!(["a"]))
        .fail(
            "github_api",
            json!({"path": "/repos/acme/app"}),
            err.clone(),
        )
        .fail("github_api", json!({"path": "/repos/acme/app"}), err);
    assert_eq!(t.first(Severity::Stop), Some(3));
}

/// Something done between the two (here: a token refreshed) may have been meant to fix it: the
/// second alerts, and the third, after the fix did not help, stops.
#[test]
fn a_permanent_error_after_an_attempted_fix_alerts_then_stops() {
    let err = json!({"status": 401, "message": "Bad credentials"});
    let t = Trace::default()
        .fail(
            "github_api",
            json!({"path": "/repos/acme/app"}),
            err.clone(),
        )
        .tool("refresh_token", json!({}), json!({"expires_in": 3600}))
        .fail(
            "github_api",
            json!({"path": "/repos/acme/app"}),
            err.clone(),
        );
    assert_eq!(t.first(Severity::Alert), Some(3));
    assert_eq!(t.first(Severity::Stop), None);
    let t = t.fail("github_api", json!({"path": "/repos/acme/app"}), err);
    assert_eq!(t.first(Severity::Stop), Some(4));
}

/// OpenHands SDK: three consecutive agent messages are stuck; OpenHands' monologue rule: the
/// same message three times. Both stop at the third.
#[test]
fn monologues_and_repeated_thoughts_stop_at_the_third() {
    let t = Trace::default()
        .tool("ls", json!({}), json!(["a"]))
        .say(
            "message",
            "Let me check the deployment configuration first.",
        )
        .say("message", "I'll look at the service logs now.")
        .say("message", "Now I'm going to verify the settings.");
    assert_eq!(t.first(Severity::Stop), Some(4));
    let t = repeat(Trace::default(), 3, |t, _| {
        t.say(
            "think",
            "I need to verify the migration before proceeding with the schema change.",
        )
    });
    assert_eq!(t.first(Severity::Stop), Some(3));
}

/// LoopGuard's handoff detector: a cycle that came back around (2 repeats) is a STOP; here it
/// must also have handed over the same thing on every leg.
#[test]
fn a_handoff_cycle_back_around_with_nothing_new_stops() {
    let mut t = Trace::default();
    for _ in 0..2 {
        for (agent, caller, text) in [
            (
                "writer",
                "reviewer",
                "Draft: the churn report, section 2 still open.",
            ),
            (
                "reviewer",
                "writer",
                "Please rework section 2 of the churn report.",
            ),
        ] {
            t = t.raw(json!({"step_type": "think", "content": text,
                             "agent": agent, "caller": caller}));
        }
    }
    assert_eq!(t.first(Severity::Stop), Some(4));
}

/// Three reworded searches that all come back empty: LoopGuard's third similar call, with
/// nothing found each time (its progress detector's "no results").
#[test]
fn three_reworded_searches_finding_nothing_stop_at_the_third() {
    let t = [
        "acme corp ceo name",
        "who is the ceo of acme corp",
        "name of the acme corp ceo",
    ]
    .iter()
    .fold(Trace::default(), |t, q| {
        t.tool("web_search", json!({"query": q}), json!({"results": []}))
    });
    assert_eq!(t.first(Severity::Stop), Some(3));
}

/// Weak evidence alerts at a count and stops at the next repeat: the same call with the same
/// result a fifth time among other calls (loopcanary alerts at twice its 3), at step 9, then
/// a sixth time, at step 11.
#[test]
fn interleaved_repeats_alert_then_stop_at_the_next_one() {
    let t = repeat(Trace::default(), 6, |t, k| {
        t.tool("read_file", json!({"path": "config.yaml"}), json!("a: 1"))
            .tool("note", json!({"n": k}), json!({"ok": true}))
    });
    let op = Some("repeated_operation");
    assert_eq!(t.first_by(op, Severity::Alert), Some(9));
    assert_eq!(t.first_by(op, Severity::Stop), Some(11));
}

/// OpenClaw's poll proposal: kill an unchanged poll at twice its warning (20); a poll is waiting,
/// so the stop comes only after the alert, at the next unchanged answer.
#[test]
fn a_stuck_poll_alerts_then_stops() {
    let t = repeat(Trace::default(), 21, |t, _| {
        t.tool(
            "get_deployment_status",
            json!({"id": "d-1"}),
            json!({"state": "pending", "reason": "ImagePullBackOff"}),
        )
    });
    assert_eq!(t.first(Severity::Alert), Some(20));
    assert_eq!(t.first(Severity::Stop), Some(21));
}

// ---------------------------------------------------------------- healthy look-alikes

/// Polls that resolve: a job status, a long-running operation's `done` flag, and conditional
/// requests answered 304 Not Modified until the resource changes.
#[test]
fn polling_that_resolves_is_never_stopped() {
    let poll = |t: Trace, out: serde_json::Value| t.tool("get_job", json!({"id": "j-1"}), out);
    let t = repeat(Trace::default(), 8, |t, _| {
        poll(t, json!({"status": "running"}))
    });
    assert_eq!(
        poll(t, json!({"status": "done"})).first(Severity::Alert),
        None
    );
    let t = repeat(Trace::default(), 8, |t, _| {
        t.tool(
            "get_operation",
            json!({"name": "operations/77"}),
            json!({"name": "operations/77", "done": false}),
        )
    });
    let t = t.tool(
        "get_operation",
        json!({"name": "operations/77"}),
        json!({"name": "operations/77", "done": true}),
    );
    assert_eq!(t.first(Severity::Alert), None);
    let t = repeat(Trace::default(), 8, |t, k| {
        t.tool(
            "http_request",
            json!({"url": "https://api.github.com/repos/a/b/actions/runs/9", "if_none_match": "W/\"e1\""}),
            json!({"status": 304, "headers": {"ETag": "W/\"e1\"", "X-RateLimit-Remaining": 4000 - k}}),
        )
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Retries that recover (goose resets its error streak on a success) and pagination (the same
/// call with the next page, answered with new items).
#[test]
fn retries_that_recover_and_pagination_are_never_stopped() {
    let err = json!({"status": 503, "error": "Service Unavailable"});
    let t = repeat(Trace::default(), 4, |t, _| {
        t.fail(
            "http_request",
            json!({"url": "https://api.example.com/v1/x"}),
            err.clone(),
        )
    })
    .tool(
        "http_request",
        json!({"url": "https://api.example.com/v1/x"}),
        json!({"items": [1]}),
    );
    assert_eq!(t.first(Severity::Stop), None);
    let t = repeat(Trace::default(), 10, |t, k| {
        t.tool(
            "list_customers",
            json!({"page": k + 1}),
            json!({"items": [format!("cus_{k}a"), format!("cus_{k}b")], "next": k + 2}),
        )
    });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Lookups of different entities, four in a row not found: a batch, whatever the shared error.
#[test]
fn batch_lookups_of_missing_entities_are_never_flagged() {
    let t = ["cus_Q1x9", "cus_Zk22", "cus_Pp03", "cus_Ab77"]
        .iter()
        .fold(Trace::default(), |t, id| {
            t.fail(
                "stripe_get_customer",
                json!({"customer": id}),
                json!({"error": {"code": "resource_missing", "message": format!("No such customer: '{id}'")}}),
            )
        });
    assert_eq!(t.first(Severity::Alert), None);
}

/// Edit, error, re-read, a different edit: the recovery the edit tools prescribe.
#[test]
fn edit_error_reread_edit_is_never_stopped() {
    let read = |t: Trace| t.tool("read_file", json!({"path": "a.go"}), json!("func a() {}"));
    let t = repeat(read(Trace::default()), 3, |t, k| {
        read(t.fail(
            "str_replace",
            json!({"path": "a.go", "old": format!("func b{k}()")}),
            json!({"error": "No match found for old_str in a.go. Re-read the file and try again."}),
        ))
    })
    .tool(
        "str_replace",
        json!({"path": "a.go", "old": "func a()"}),
        json!({"ok": true}),
    );
    assert_eq!(t.first(Severity::Stop), None);
}
