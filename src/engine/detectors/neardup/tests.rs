use super::memo::{arg_text, call_sig, Scratch};
use super::signature::{encode, pack, unpack, Sig, MAX_FEATURES};
use super::unordered::unordered_key;
use super::*;
use crate::contract::Step;
use crate::engine::detectors::DetectorConfig;
use crate::engine::json::Json;
use crate::engine::text::features::feature_hashes;
use crate::engine::text::{minhash_of, normalize_message, similarity};

fn step(tool: &str, input: &str) -> Step {
    let mut s = crate::engine::detectors::view::tests::step(tool, input, "null", Some(true));
    s.tool_output = None;
    s
}

/// The signature as computed before the memo: from the argument text, every time.
fn fresh(v: &StepView<'_>) -> (usize, bool, Vec<u32>) {
    let mut text = String::new();
    arg_text(&v.canon.input, &mut text);
    let h = feature_hashes(&normalize_message(&text));
    if h.len() <= MAX_FEATURES {
        let (_, s) = encode(Sig::Features { f: h.clone() });
        (h.len(), false, s)
    } else {
        (h.len(), true, pack(&minhash_of(&h)).to_vec())
    }
}

fn key_of(text: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    unordered_key(&Json::from_value(v))
}

/// The same records in another order, with fresh generated ids and scores, are one answer;
/// a changed record, a reordered text, or a renamed column are not.
#[test]
fn unordered_key_ignores_list_order_ids_and_scores_only() {
    let a = r#"{"results":[{"id":"res_1f3a7b","score":0.91,"title":"Acme leadership"},{"id":"res_9c2d10","score":0.4,"title":"Acme profile"}]}"#;
    let b = r#"{"results":[{"id":"res_77e0a1","score":0.12,"title":"Acme profile"},{"id":"res_0b5c3d","score":0.83,"title":"Acme leadership"}]}"#;
    assert_eq!(key_of(a), key_of(b));
    let other_doc = r#"{"results":[{"id":"res_77e0a1","score":0.12,"title":"Acme profile"},{"id":"res_0b5c3d","score":0.83,"title":"Acme history"}]}"#;
    assert_ne!(key_of(a), key_of(other_doc));
    assert_ne!(
        key_of(r#"{"text":"the cache was flushed before the deploy"}"#),
        key_of(r#"{"text":"the deploy was flushed before the cache"}"#)
    );
    assert_ne!(
        key_of(r#"{"columns":[{"name":"manifest_0"},{"name":"invoice_1"}]}"#),
        key_of(r#"{"columns":[{"name":"manifest_1"},{"name":"invoice_0"}]}"#)
    );
    // Counts are data, not scores.
    assert_ne!(
        key_of(r#"{"rows":[[1,5916]]}"#),
        key_of(r#"{"rows":[[1,4072]]}"#)
    );
}

/// Packed signatures compare as the unpacked ones do, and unpack to what was packed.
#[test]
fn packed_signatures_compare_as_unpacked() {
    let texts = [
        "latest release notes for tokio runtime and its scheduler",
        "release notes for the latest tokio runtime scheduler",
        "select id, status from orders where status is open order by created",
        "",
    ];
    let sigs: Vec<Signature> = texts
        .iter()
        .map(|t| crate::engine::text::feature_sig(t, 0, &mut Vec::new()).1)
        .collect();
    for a in &sigs {
        let pa = pack(a);
        assert_eq!(unpack(&pa), *a);
        for b in &sigs {
            let pb = pack(b);
            let call = |sig| Call {
                tool: 1,
                result: 2,
                kind: OutKind::Empty,
                full: true,
                sig,
            };
            let got = call(&pa[..]).similarity(&call(&pb[..]), || b);
            assert_eq!(got, similarity(a, b));
        }
    }
    assert!(similarity(&sigs[0], &sigs[1]) > similarity(&sigs[0], &sigs[2]));
}

proptest::proptest! {
    /// Byte by byte on the packed words, including the bytes whose high bit alone differs.
    #[test]
    fn packed_comparison_counts_agreeing_slots(
        a in proptest::array::uniform32(proptest::prelude::any::<u8>()),
        other in proptest::array::uniform32(proptest::prelude::any::<u8>()),
        keep in proptest::array::uniform32(0u8..4),
    ) {
        // Slots of `b` equal `a`'s, differ in the high bit only, or are unrelated.
        let b: Signature = std::array::from_fn(|i| match keep[i] {
            0 | 1 => a[i],
            2 => a[i] ^ 0x80,
            _ => other[i],
        });
        let (pa, pb) = (pack(&a), pack(&b));
        proptest::prop_assert_eq!(unpack(&pa), a);
        let call = |sig| Call { tool: 1, result: 2, kind: OutKind::Empty, full: true, sig };
        let packed = call(&pa[..]).similarity(&call(&pb[..]), || &b);
        proptest::prop_assert_eq!(packed, similarity(&a, &b));
    }
}

/// Records of version 3 and before kept up to eight feature hashes; past [`MAX_FEATURES`]
/// they restore as the full signature of those features, not cut to the first few.
#[test]
fn records_with_more_features_restore_as_their_signature() {
    let f: Vec<u64> = (1..=8u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    assert!(f.len() > MAX_FEATURES);
    assert_eq!(
        encode(Sig::Features { f: f.clone() }),
        (true, pack(&minhash_of(&f)).to_vec())
    );
    let few = f[..MAX_FEATURES].to_vec();
    let (full, words) = encode(Sig::Features { f: few.clone() });
    let c = Call {
        tool: 1,
        result: 2,
        kind: OutKind::Empty,
        full,
        sig: &words,
    };
    assert!(!full);
    assert_eq!(c.full_sig(), minhash_of(&few));
}

#[test]
fn memoised_signatures_are_the_computed_ones() {
    let cfg = DetectorConfig::default();
    let inputs = [
        r#"{"path":"src/mod1.rs"}"#,
        r#"{"q":"latest release notes for tokio","limit":5}"#,
        r#"{"limit":5,"q":"latest release notes for tokio"}"#,
        r#"{"q":"the a of"}"#,
        r#"{"query":"select * from orders where id = 42 and status = 'open' order by created desc"}"#,
        r#"{"at":"2024-05-01","time":"10:00"}"#,
        r#"{"q":"caf\u00e9 \u03a3\u03a3 x-y"}"#,
        "{}",
        "null",
    ];
    // Twice over, and under several tools (other slots, same texts): hits and misses.
    let (mut memos, mut scratch) = (Default::default(), Scratch::default());
    for round in 0..2 {
        for tool in ["search", "web_search", "sql"] {
            for input in inputs {
                let s = step(tool, input);
                let c = cfg.canonical(&s);
                let v = StepView::new(&cfg, &s, &c, &mut memos);
                let mut sig = [0; MINHASH_K];
                let (n, full, len) = call_sig(&v, &mut sig, &mut scratch);
                assert_eq!(
                    (n, full, sig[..len].to_vec()),
                    fresh(&v),
                    "{round} {tool} {input}"
                );
            }
        }
    }
}
