//! The current call's signature, from its argument text, memoised by canonical input: a fleet
//! repeats the same arguments across its runs, so most calls skip tokenising and hashing. The
//! memo and buffers are the partition's, lent to each step; outputs never depend on them.
use super::signature::{pack, MAX_FEATURES, SIG_WORDS};
use crate::engine::detectors::StepView;
use crate::engine::json::Json;
use crate::engine::text::{message_feature_hashes, minhash_into, truncate, MINHASH_K};

/// Scratch text kept between calls up to this capacity; a huge argument's is freed.
const SCRATCH_KEEP: usize = 64 * 1024;

/// A call's signature as stored (`Call::full`, `Call::sig`) and its feature count, with the
/// canonical input it was computed from.
#[derive(Clone)]
struct SigMemo {
    /// Empty while the slot is unused (no canonical input is empty: `null` at least).
    input: String,
    features: usize,
    full: bool,
    len: usize,
    sig: [u32; MINHASH_K],
}

/// Slots of the memo: a fleet repeats the same arguments across its runs (and a looping run
/// repeats its own), so most calls find their signature here instead of tokenising, hashing and
/// MinHashing their arguments again.
const MEMO_SLOTS: usize = 128;
/// Longer canonical inputs are not memoised (bounds the memo's memory).
const MEMO_MAX_INPUT: usize = 256;

/// The detector's buffers and signature memo, lent by the partition's engine (see
/// [`crate::engine::detectors::Caches`]).
#[derive(Default)]
pub(crate) struct Scratch {
    /// The argument text and feature hashes of the call at hand: reused, so a call allocates
    /// neither.
    text: String,
    hashes: Vec<u64>,
    memo: Vec<SigMemo>,
}

/// The current call's signature into `sig` as stored, and (features, full, length). The
/// argument text is a function of the canonical input text (the normalised value it was written
/// from, whose objects hold their keys in the order written), so the memo is keyed by that
/// text, compared whole.
pub(super) fn call_sig(
    v: &StepView<'_>,
    sig: &mut [u32; MINHASH_K],
    s: &mut Scratch,
) -> (usize, bool, usize) {
    let input = v.canon.input_text.as_str();
    let memo = !input.is_empty() && input.len() <= MEMO_MAX_INPUT;
    let slot = (v.action_key % MEMO_SLOTS as u64) as usize;
    {
        if memo {
            if let Some(m) = s.memo.get(slot).filter(|m| m.input == input) {
                sig[..m.len].copy_from_slice(&m.sig[..m.len]);
                return (m.features, m.full, m.len);
            }
        }
        s.text.clear();
        arg_text(&v.canon.input, &mut s.text);
        message_feature_hashes(&s.text, &mut s.hashes);
        let hashes = &s.hashes;
        let got = if hashes.len() <= MAX_FEATURES {
            for (d, h) in sig.chunks_exact_mut(2).zip(hashes.iter()) {
                d[0] = *h as u32;
                d[1] = (h >> 32) as u32;
            }
            (hashes.len(), false, 2 * hashes.len())
        } else {
            let mut full = [0; MINHASH_K];
            minhash_into(&mut full, hashes);
            sig[..SIG_WORDS].copy_from_slice(&pack(&truncate(&full)));
            (hashes.len(), true, SIG_WORDS)
        };
        if s.text.capacity() > SCRATCH_KEEP {
            s.text = String::new();
        }
        if memo {
            if s.memo.is_empty() {
                s.memo = vec![
                    SigMemo {
                        input: String::new(),
                        features: 0,
                        full: false,
                        len: 0,
                        sig: [0; MINHASH_K],
                    };
                    MEMO_SLOTS
                ];
            }
            if let Some(m) = s.memo.get_mut(slot) {
                m.input.clear();
                m.input.push_str(input);
                (m.features, m.full, m.len) = got;
                m.sig = *sig;
            }
        }
        got
    }
}

pub(super) fn arg_text(v: &Json<'_>, out: &mut String) {
    match v {
        Json::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Json::Number(n) => {
            use std::fmt::Write;
            // Writing to a String cannot fail.
            let _ = write!(out, "{n} ");
        }
        Json::Bool(b) => out.push_str(if *b { "true " } else { "false " }),
        Json::Null => {}
        Json::Array(a) => a.iter().for_each(|x| arg_text(x, out)),
        Json::Object(m) => m.values().for_each(|x| arg_text(x, out)),
    }
}
