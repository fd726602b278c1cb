//! Near-duplicate features of free text: content words and their adjacent pairs, hashed and
//! turned into MinHash signatures, with ASCII fast paths that read the tokens in place.
use super::fnv::{fnv64_from, fnv64_lower2, FNV_OFFSET};
use super::minhash::{minhash_of, Signature};
use super::normalize::normalize_message;
use super::stopwords::{ascii_stem, is_stopword, is_stopword_head, stem};
use super::tokens::{for_each_ascii_token, Words};
use super::volatile::normalize_volatile_cow;

/// Features for near-duplicate comparison of free text: content words (stopwords removed,
/// stemmed) plus their adjacent pairs, so both vocabulary and some word order count.
#[cfg(test)]
pub(crate) fn text_features(text: &str) -> Vec<String> {
    let w = Words::of(text);
    let mut f: Vec<String> = features(&w)
        .into_iter()
        .map(|(a, b)| {
            if b.is_empty() {
                a.to_string()
            } else {
                format!("{a} {b}")
            }
        })
        .collect();
    f.sort();
    f
}

/// [`text_features`] as (word, next word or "") pairs, sorted and distinct. Tokens hold no
/// whitespace and are never empty, so two pairs are equal exactly when their joined texts are.
#[cfg(test)]
fn features(w: &Words) -> Vec<(&str, &str)> {
    let toks: Vec<&str> = w.iter().filter(|t| !is_stopword(t)).map(stem).collect();
    let mut f: Vec<(&str, &str)> = toks.iter().map(|t| (*t, "")).collect();
    f.extend(toks.windows(2).map(|p| (p[0], p[1])));
    f.sort_unstable();
    f.dedup();
    f
}

/// Whether `text` has at least `enough` distinct [`text_features`], and their [`minhash`]
/// signature, without building the feature strings. `scratch` is a buffer lent by the caller
/// (its contents are not read).
pub(crate) fn feature_sig(text: &str, enough: usize, scratch: &mut Vec<u64>) -> (bool, Signature) {
    if text.is_ascii() {
        // Every thought comes here: the hashes go to a reused buffer, not to a fresh
        // allocation shrunk for keeping (only the signature is kept).
        let h = scratch;
        h.clear();
        // Unsorted, repeats kept: a repeated feature cannot change a minimum, and only
        // `enough` distinct ones need counting, so the sort `feature_hashes` needs for its
        // list is skipped.
        ascii_feature_hashes_raw(text, h);
        let got = (has_distinct(h, enough), minhash_of(h));
        if h.capacity() > 4096 {
            *h = Vec::new();
        }
        return got;
    }
    let h = feature_hashes(text);
    (h.len() >= enough, minhash_of(&h))
}

/// Whether `hashes` holds at least `enough` distinct values (a small number: a linear scan).
fn has_distinct(hashes: &[u64], enough: usize) -> bool {
    let mut seen: smallvec::SmallVec<[u64; 8]> = smallvec::SmallVec::new();
    for &h in hashes {
        if seen.len() >= enough {
            break;
        }
        if !seen.contains(&h) {
            seen.push(h);
        }
    }
    seen.len() >= enough
}

/// The [`fnv64`] of each distinct [`text_features`] of `text`, ordered by hash: what its
/// [`minhash`] is computed from (`minhash_of(&feature_hashes(t)) == feature_sig(t, 0).1`). Equal
/// lists give equal signatures.
pub(crate) fn feature_hashes(text: &str) -> Vec<u64> {
    if text.is_ascii() {
        let mut f = Vec::new();
        ascii_feature_hashes(text, &mut f);
        // Kept in run state: no spare capacity.
        f.shrink_to_fit();
        return f;
    }
    let w = Words::of(text);
    let toks: Vec<&str> = w.iter().filter(|t| !is_stopword(t)).map(stem).collect();
    let hash = |a: &str, b: &str| {
        let h = fnv64_from(FNV_OFFSET, a.as_bytes());
        if b.is_empty() {
            h
        } else {
            fnv64_from(fnv64_from(h, b" "), b.as_bytes())
        }
    };
    let mut f: Vec<u64> = Vec::with_capacity(toks.len() * 2);
    f.extend(toks.iter().map(|t| hash(t, "")));
    f.extend(toks.windows(2).map(|p| hash(p[0], p[1])));
    // Distinct by hash: the same as distinct by text but for a 64-bit collision, which would
    // only merge two features of one text.
    f.sort_unstable();
    f.dedup();
    // Kept in run state: no spare capacity.
    f.shrink_to_fit();
    f
}

/// `feature_hashes(&normalize_message(text))` into `out` (cleared first). For ASCII text the
/// tokens are read in place: whitespace collapsing is invisible to [`Words`], which splits on
/// whitespace and lowercases anyway, so only the volatile values need rewriting. This runs on
/// every counted tool call, and the three copies of the text it saves were most of its cost.
pub(crate) fn message_feature_hashes(text: &str, out: &mut Vec<u64>) {
    out.clear();
    if text.is_ascii() {
        // The replacements of volatile values are ASCII: the text stays ASCII.
        ascii_feature_hashes(&normalize_volatile_cow(text), out);
    } else {
        out.extend(feature_hashes(&normalize_message(text)));
    }
}

/// [`feature_hashes`] of ASCII text, appended to `out`: the tokens of [`Words::of`] read in place
/// and lowercased as they are hashed, without the token buffer.
fn ascii_feature_hashes(text: &str, out: &mut Vec<u64>) {
    let start_len = out.len();
    ascii_feature_hashes_raw(text, out);
    // Distinct by hash, as in `feature_hashes`.
    out[start_len..].sort_unstable();
    let mut w = start_len;
    for r in start_len..out.len() {
        if w == start_len || out[r] != out[w - 1] {
            out[w] = out[r];
            w += 1;
        }
    }
    out.truncate(w);
}

/// The hashes of [`ascii_feature_hashes`] as the tokens give them: in text order, repeats
/// included.
fn ascii_feature_hashes_raw(text: &str, out: &mut Vec<u64>) {
    let mut prev: Option<u64> = None;
    for_each_ascii_token(text.as_bytes(), |t, head| {
        if is_stopword_head(t.len(), head) {
            return;
        }
        let t = ascii_stem(t);
        let pair_from = prev.map(|p| fnv64_from(p, b" "));
        let (h, pair) = fnv64_lower2(FNV_OFFSET, pair_from.unwrap_or(FNV_OFFSET), t);
        out.push(h);
        if pair_from.is_some() {
            out.push(pair);
        }
        prev = Some(h);
    });
}

#[cfg(test)]
mod tests {
    use super::super::fnv::fnv64;
    use super::super::minhash::minhash;
    use super::super::tokens::{ascii_tokens, words};
    use super::*;

    #[test]
    fn in_place_tokens_and_features_match_the_copies() {
        let texts = [
            "",
            "  ...  ",
            "The Files searching SEARCHED /tmp/a_b- x.py -- a.b. c/ __init__.py",
            "Find release notes for Tokio at 2024-05-01 10:00:00Z, req 3f2b1c9e-1a2b-4c3d-8e9f-0123456789ab",
            "Please CHECK the status: it's RUNNING (took 0.53s) id=4bf92f3577b34da6a3ce929d0e0e4736",
            "a\tb\nc\x0bd\x0ce\rf  g\x1ch",
            "caf\u{e9} \u{3a3}\u{3a3}: x-y AUTH.py auth.py",
            "epoch 1767225600000 and 12:01:02 then 0.532 seconds",
        ];
        for t in texts {
            let reference: Vec<u64> = {
                let mut h: Vec<u64> = text_features(&normalize_message(t))
                    .iter()
                    .map(|f| fnv64(f.as_bytes()))
                    .collect();
                h.sort_unstable();
                h.dedup();
                h
            };
            let mut got = vec![7];
            message_feature_hashes(t, &mut got);
            assert_eq!(got, reference, "{t}");
            assert_eq!(feature_hashes(&normalize_message(t)), reference, "{t}");
            if t.is_ascii() {
                let lower: Vec<String> = ascii_tokens(t).map(str::to_ascii_lowercase).collect();
                assert_eq!(lower, words(t), "{t}");
            }
        }
    }

    #[test]
    fn feature_signatures_match_the_feature_strings() {
        for t in [
            "",
            "the a of",
            "search searching files file the files",
            "Find the latest release notes for tokio and the latest for tokio",
            "caf\u{e9} \u{3a3}\u{3a3} x-y auth.py auth.py",
        ] {
            let n = normalize_message(t);
            let f = text_features(&n);
            for enough in [0, 1, f.len(), f.len() + 1, 5] {
                assert_eq!(
                    feature_sig(&n, enough, &mut Vec::new()),
                    (f.len() >= enough, minhash(f.iter().map(String::as_str))),
                    "{t} {enough}"
                );
            }
        }
    }
}
