//! The fast path against the serde path on generated messages that look like real events,
//! with every kind of damage: the two must agree wherever the fast path answers.
use super::*;
use proptest::prelude::*;
use proptest::sample::select;

const KEYS: &[&str] = &scan::FIELD_NAMES;

/// Values a field may plausibly hold, good and bad, as JSON text.
fn good_values(key: &str) -> Vec<&'static str> {
    match key {
        "v" => vec!["1", "1", "2", "1.0", "\"1\""],
        "kind" => vec![
            "\"run_started\"",
            "\"step\"",
            "\"run_finished\"",
            "\"st\\u0065p\"",
            "\"nope\"",
        ],
        "ts" => vec![
            "1767225601081",
            "\"2026-01-02T03:04:05.678+01:00\"",
            "\"2026-01-02T03:04:05Z\"",
            "\"yesterday\"",
            "253402300799999",
            "253402300800000",
            "1.5",
            "1e3",
            "-0",
        ],
        "step_index" | "tokens" | "tokens_in_context" | "reported_loop_step_index" => vec![
            "0", "3", "2.0", "-1", "1e2", "18446744073709551615", "18446744073709551616",
            "9007199254740993.0", "0.5",
        ],
        "tool_latency_ms" | "cost_usd" => vec![
            "0.0021", "350", "-0", "-0.0", "1e400", "-1", "0.1e-2", "1.7976931348623157e308",
            "2.2250738585072011e-308", "123456789012345678901234567890",
        ],
        "tool_success" | "reported_loop_detected" => vec!["true", "false", "\"true\"", "1"],
        "status" => vec!["\"completed\"", "\"failed\"", "\"maybe\""],
        "termination_reason" => vec![
            "\"clean\"", "\"loop_detected\"", "\"timeout\"", "\"evicted\"", "\"Clean\"",
        ],
        "reported_totals" => vec![
            "{\"total_steps\":7,\"total_tokens\":5120,\"total_cost_usd\":0.0132,\"duration_ms\":8312}",
            "{\"total_cost_usd\":-1}",
            "{\"total_steps\":1,\"total_steps\":2}",
            "{}",
        ],
        "metadata" | "tool_input" | "tool_output" => vec![
            "{\"path\":\"src/mod1.rs\"}",
            "{\"bytes\":1001}",
            "[1, {\"a\" : [true,false,null]}]",
            "\"s\\ud800\"",
            "{\"k\\\"ey\":\"\\u00e9\\n\"}",
        ],
        _ => vec![
            "\"proj-0\"",
            "\"run-0fca6d76dee06510\"",
            "\"tool_call\"",
            "\"\"",
            "\"proj\\u002d0\"",
            "\"line\\nbreak \\\"q\\\" \\\\ \\/ \\t\"",
            "\"é😀\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud800\"",
        ],
    }
}

fn any_value() -> impl Strategy<Value = String> {
    let leaf = select(vec![
        "null",
        "true",
        "false",
        "nul",
        "tru",
        "0",
        "1",
        "-0",
        "01",
        "1.",
        ".5",
        "-",
        "1e3",
        "1E+2",
        "2.5e-3",
        "-12.75",
        "18446744073709551616",
        "\"\"",
        "\"plain\"",
        "\"é😀\"",
        "\"\\u00e9\"",
        "\"\\\"\"",
        "\"\\\\\"",
        "\"\\/\\b\\f\\n\\r\\t\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"\\udc00x\"",
        "\"\\ud83dx\"",
        "\"\\u12G4\"",
        "\"\\q\"",
        "\"a\u{1}b\"",
        "\"a\u{7f}b\"",
        "\"unterminated",
    ])
    .prop_map(String::from);
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((select(vec!["a", "b", "k\\\"", ""]), inner), 0..4).prop_map(
                |v| {
                    let body: Vec<String> =
                        v.iter().map(|(k, x)| format!("\"{k}\": {x}")).collect();
                    format!("{{{}}}", body.join(","))
                }
            ),
        ]
    })
}

fn key_text() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(KEYS).prop_map(|k| format!("\"{k}\"")),
        1 => select(vec!["\"unknown\"", "\"\"", "\"V\"", "\"k\\u0069nd\"", "\"ts\\n\"", "\"\\ud800\""])
            .prop_map(String::from),
    ]
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        // Not JSON whitespace: rare, since one spoils the whole message.
        300 => Just(""),
        100 => select(vec![" ", "\n", "\t", "\r", " \n\t\r "]),
        1 => select(vec!["\u{a0}", "\x0b", "\x0c"]),
    ]
}

/// A JSON object mostly like a real event: the required fields of a kind with values from
/// [`good_values`], random other fields, some dropped, duplicated or given other values,
/// whitespace anywhere, and sometimes damage to the whole text.
fn message() -> impl Strategy<Value = Vec<u8>> {
    let fields = prop::collection::vec(
        (
            select(KEYS),
            any::<prop::sample::Index>(),
            prop::option::weighted(0.05, any_value()),
            prop::option::weighted(0.04, key_text()),
        ),
        4..22,
    );
    let kind = select(vec!["run_started", "step", "run_finished"]);
    (
        kind,
        fields,
        prop::collection::vec(ws(), 200),
        0u8..32,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(kind, fields, spaces, damage, cut)| {
            let mut entries: Vec<(String, String)> = vec![
                ("\"v\"".into(), "1".into()),
                ("\"kind\"".into(), format!("\"{kind}\"")),
                ("\"project_id\"".into(), "\"proj-0\"".into()),
                ("\"run_id\"".into(), "\"run-1\"".into()),
                ("\"ts\"".into(), "1767225601081".into()),
            ];
            match kind {
                "run_started" => entries.push(("\"agent_name\"".into(), "\"coder\"".into())),
                "step" => {
                    entries.push(("\"step_index\"".into(), "1".into()));
                    entries.push(("\"step_type\"".into(), "\"tool_call\"".into()));
                }
                _ => entries.push(("\"status\"".into(), "\"completed\"".into())),
            }
            for (key, pick, other, key_override) in fields {
                let value = other.unwrap_or_else(|| {
                    // The first value is a good one; it gets two thirds of the picks.
                    let vals = good_values(key);
                    vals.get(pick.index(3 * vals.len()))
                        .unwrap_or(&vals[0])
                        .to_string()
                });
                let key = key_override.unwrap_or_else(|| format!("\"{key}\""));
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    // Usually replace, so that duplicates stay a minority.
                    Some(e) if pick.index(29) != 0 => e.1 = value,
                    _ => entries.push((key, value)),
                }
            }
            if damage == 1 && entries.len() > 1 {
                let i = cut.index(entries.len());
                entries.remove(i);
            }
            let mut sp = spaces.into_iter().cycle();
            let mut out = String::new();
            out.push_str(sp.next().unwrap_or_default());
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(sp.next().unwrap_or_default());
                out.push_str(k);
                out.push_str(sp.next().unwrap_or_default());
                out.push(':');
                out.push_str(sp.next().unwrap_or_default());
                out.push_str(v);
                out.push_str(sp.next().unwrap_or_default());
            }
            out.push('}');
            out.push_str(sp.next().unwrap_or_default());
            let mut bytes = out.into_bytes();
            match damage {
                2 => bytes.truncate(cut.index(bytes.len() + 1)),
                3 => bytes.extend_from_slice(b"x"),
                4 => bytes.extend_from_slice(b"{}"),
                5 => {
                    let i = cut.index(bytes.len());
                    bytes[i] = 0xff;
                }
                6 => {
                    bytes.splice(0..0, b"\xEF\xBB\xBF".iter().copied());
                }
                7 => {
                    let d = 60 + cut.index(10);
                    let deep = format!("{}{}", "[".repeat(d), "]".repeat(d));
                    let at =
                        bytes.len() - 1 - bytes.iter().rev().take_while(|b| **b != b'}').count();
                    bytes.splice(at..at, format!(",\"x\":{deep}").into_bytes());
                }
                _ => {}
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    #[test]
    fn fast_path_agrees_with_serde(msg in message()) {
        check_against_reference(&msg);
    }
}

/// The generator must reach both sides, or the test above proves little.
#[test]
fn generator_reaches_both_paths() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut fast, mut ok, mut total) = (0, 0, 0);
    for _ in 0..2000 {
        let msg = message().new_tree(&mut runner).map(|t| t.current());
        let Ok(msg) = msg else { continue };
        total += 1;
        fast += usize::from(check_against_reference(&msg));
        ok += usize::from(reference(&msg).is_ok());
    }
    eprintln!("fast path took {fast}, serde accepted {ok}, of {total}");
    assert!(fast > total / 10, "fast path took {fast} of {total}");
    assert!(
        ok > fast,
        "serde accepted {ok}, fast path {fast} of {total}"
    );
    assert!(ok < total * 9 / 10, "too few rejections: {ok} of {total}");
}
