//! The comparison forms of messages and error texts: whitespace collapsed, lowercased, volatile
//! values replaced, and for errors the further values that differ between two occurrences of
//! the same failure.
use super::volatile::normalize_volatile_cow;

/// Whether `hay` contains `needle` (ASCII lowercase), ignoring ASCII case, without a
/// lowercased copy: step types and error texts are read on every step.
pub(crate) fn contains_ci(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// Collapse whitespace, lowercase and normalise volatile values: the comparison form of a
/// message or error text.
pub(crate) fn normalize_message(s: &str) -> String {
    let v = normalize_volatile_cow(s);
    if v.is_ascii() {
        if !needs_collapse(v.as_bytes()) {
            // Most messages: single spaces between words, nothing to collapse. A copy
            // lowercased in place is the result, without a branch per byte.
            let mut out = v.into_owned();
            out.make_ascii_lowercase();
            return out;
        }
        // The same result in one pass over the bytes: for ASCII text `split_whitespace` breaks
        // at tab, LF, VT, FF, CR and space, and lowercasing is per byte.
        let mut bytes = Vec::with_capacity(v.len());
        let mut gap = false;
        for &b in v.as_bytes() {
            if matches!(b, 0x09..=0x0d | b' ') {
                gap = !bytes.is_empty();
            } else {
                if std::mem::take(&mut gap) {
                    bytes.push(b' ');
                }
                bytes.push(b.to_ascii_lowercase());
            }
        }
        // ASCII bytes only: always valid.
        return String::from_utf8(bytes).unwrap_or_default();
    }
    let mut out = String::with_capacity(v.len());
    for w in v.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        if w.is_ascii() {
            out.extend(w.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            out.push_str(&w.to_lowercase());
        }
    }
    out
}

/// Whether collapsing the whitespace of ASCII text changes it: a tab, LF, VT, FF or CR
/// anywhere, a space at either end or two spaces in a row.
fn needs_collapse(b: &[u8]) -> bool {
    let ctl = |c: u8| c.wrapping_sub(0x09) < 5;
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    if first == b' ' || last == b' ' || ctl(last) {
        return true;
    }
    let pair = |w: &[u8]| ctl(w[0]) | ((w[0] == b' ') & (w[1] == b' '));
    // 32 pairs at a time (33 bytes), without an exit per pair: vector compares.
    let mut at = 0;
    while let Some(block) = b.get(at..at + 33) {
        if block.windows(2).fold(false, |any, w| any | pair(w)) {
            return true;
        }
        at += 32;
    }
    b[at..].windows(2).any(pair)
}

/// The identity form of an error message: [`normalize_message`] plus the values that differ
/// between two occurrences of the *same* failure although they are not volatile in ordinary
/// data: the frames of a Python traceback (the same exception reached through `python -m` or a
/// direct call is one error), integer durations (`retry in 17s`, `345ms`), temporary paths
/// (`/tmp/tmpa8f3kx2_/out.csv`, `/tmp/pytest-of-u/pytest-12/`), process ids (`pid 4242`) and
/// generated ids that mix letters and digits (`req_7Hq2x9Lm0aZk`). Used for error keys only:
/// in tool inputs and data such tokens can name different things.
pub(crate) fn normalize_error(s: &str) -> String {
    let s = strip_traceback_frames(s);
    let norm = normalize_message(&s);
    let mut out = String::with_capacity(norm.len());
    let mut prev_pid = false;
    for (i, tok) in norm.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if prev_pid && tok.chars().all(|c| c.is_ascii_digit()) && !tok.is_empty() {
            out.push_str("<pid>");
        } else {
            normalize_error_token(tok, &mut out);
        }
        let bare = tok.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        prev_pid = matches!(bare, "pid" | "process" | "worker");
    }
    out
}

/// Python tracebacks: keep the header and the exception lines, drop the indented frames.
fn strip_traceback_frames(s: &str) -> std::borrow::Cow<'_, str> {
    // Built once: a searcher for this needle per error text was a visible share of the time.
    static TRACEBACK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| {
            memchr::memmem::Finder::new("Traceback (most recent call last)")
        });
    if TRACEBACK.find(s.as_bytes()).is_none() {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut in_tb = false;
    for line in s.lines() {
        if line
            .trim_start()
            .starts_with("Traceback (most recent call last)")
        {
            in_tb = true;
            out.push_str(line.trim());
            out.push('\n');
            continue;
        }
        if in_tb && (line.starts_with(' ') || line.starts_with('\t')) {
            continue;
        }
        in_tb = false;
        out.push_str(line);
        out.push('\n');
    }
    std::borrow::Cow::Owned(out)
}

const TEMP_ROOTS: &[&str] = &[
    "/tmp/",
    "/var/tmp/",
    "/var/folders/",
    "/private/var/folders/",
    "/private/tmp/",
    "/dev/shm/",
];

/// Appends the identity form of one token to `out`.
fn normalize_error_token(tok: &str, out: &mut String) {
    // Temporary paths, possibly quoted or embedded (`'/tmp/tmpx/out.csv'`, `rootdir=/tmp/...`).
    // Every root holds a `/`: most tokens have none and need no search.
    let roots = if memchr::memchr(b'/', tok.as_bytes()).is_some() {
        TEMP_ROOTS
    } else {
        &[]
    };
    for root in roots {
        if let Some(at) = tok.find(root) {
            let (head, path) = tok.split_at(at);
            let path = path.trim_end_matches(['\'', '"', ',', ')', ']', ':']);
            let tail = &tok[at + path.len()..];
            let base = path.rsplit('/').find(|x| !x.is_empty()).unwrap_or("");
            let keep = if base.contains('.') && !base.starts_with("tmp") {
                base
            } else {
                ""
            };
            out.push_str(head);
            out.push_str("<tmp>/");
            out.push_str(keep);
            out.push_str(tail);
            return;
        }
    }
    // Integer durations: `17s`, `345ms`, `30sec`.
    let dig = tok.bytes().take_while(u8::is_ascii_digit).count();
    if dig > 0 && dig < tok.len() {
        let unit = tok[dig..].trim_end_matches(['.', ',', ')', ';']);
        if matches!(
            unit,
            "ms" | "s" | "sec" | "secs" | "seconds" | "second" | "min" | "mins" | "minutes"
        ) {
            out.push_str("<dur>");
            return;
        }
    }
    // Generated ids: alphanumeric runs of 8+ mixing letters and digits several times.
    let mut start = 0;
    let mut cur: Option<bool> = None;
    let mut part = |is_word: bool, p: &str| {
        out.push_str(if is_word && looks_generated(p) {
            "<id>"
        } else {
            p
        });
    };
    for (i, c) in tok.char_indices() {
        let w = c.is_ascii_alphanumeric();
        if let Some(x) = cur.filter(|x| *x != w) {
            part(x, &tok[start..i]);
            start = i;
        }
        cur = Some(w);
    }
    if let Some(w) = cur {
        part(w, &tok[start..]);
    }
}

fn looks_generated(run: &str) -> bool {
    if run.len() < 8 {
        return false;
    }
    let b = run.as_bytes();
    let d = b.iter().filter(|c| c.is_ascii_digit()).count();
    let l = b.len() - d;
    let flips = b
        .windows(2)
        .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
        .count();
    d >= 2 && l >= 2 && flips >= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_identity_ignores_frames_durations_temp_paths_and_ids() {
        let tb = |frames: &str| {
            format!("Traceback (most recent call last):\n{frames}ModuleNotFoundError: No module named 'x'\n")
        };
        assert_eq!(
            normalize_error(&tb("  File \"a.py\", line 3, in f\n    g()\n")),
            normalize_error(&tb("  File \"<frozen runpy>\", line 198, in _run\n"))
        );
        assert_eq!(
            normalize_error("429: try again in 17s (req_7f3a9c2e1b4d5a)"),
            normalize_error("429: try again in 3s (req_0a1b2c3d4e5f6a)")
        );
        assert_eq!(
            normalize_error(
                "No such file: '/tmp/tmpab3k_x9q/export.csv', pid 4242 exited after 345ms"
            ),
            normalize_error("No such file: '/tmp/tmpzz81kq0w/export.csv', pid 17 exited after 9ms")
        );
        // Different errors stay different; ordinary words and versions are kept.
        assert_ne!(
            normalize_error("permission denied for table orders"),
            normalize_error("permission denied for table payments")
        );
        assert_eq!(
            normalize_error("psycopg2 sha256 x86_64"),
            "psycopg2 sha256 x86_64"
        );
    }

    proptest::proptest! {
        /// The copy-free test agrees with lowercasing the text and searching it.
        #[test]
        fn contains_ci_agrees_with_lowercasing(
            hay in "[a-zA-Z _\u{e9}]{0,24}",
            needle in "[a-z _]{0,4}",
        ) {
            proptest::prop_assert_eq!(
                contains_ci(&hay, &needle),
                hay.to_ascii_lowercase().contains(&needle)
            );
        }

        /// ASCII messages take a byte loop; it must collapse and lowercase exactly as the
        /// general path does (control characters other than whitespace included).
        #[test]
        fn ascii_messages_normalise_as_any_text(s in "[ -~\t\n\x0b\x0c\r\x1c\x00]{0,80}") {
            let v = normalize_volatile_cow(&s);
            let want: Vec<String> = v.split_whitespace().map(str::to_lowercase).collect();
            proptest::prop_assert_eq!(normalize_message(&s), want.join(" "));
        }

        /// Messages spaced as most are, where the result is the text lowercased, and near
        /// misses of that (a double space, a tab, a space at an end), anywhere in 32-byte
        /// blocks or their tail.
        #[test]
        fn single_spaced_messages_normalise_as_any_text(
            words in proptest::collection::vec("[A-Za-z0-9.:-]{1,12}", 0..20),
            seps in proptest::collection::vec(
                proptest::sample::select(vec![" ", " ", " ", " ", "  ", "\t", " \n"]),
                20,
            ),
            ends in 0usize..4,
        ) {
            let mut s = String::new();
            for (i, w) in words.iter().enumerate() {
                if i > 0 {
                    s.push_str(seps[i]);
                }
                s.push_str(w);
            }
            match ends {
                0 => s.insert(0, ' '),
                1 => s.push(' '),
                _ => {}
            }
            let v = normalize_volatile_cow(&s);
            let want: Vec<String> = v.split_whitespace().map(str::to_lowercase).collect();
            proptest::prop_assert_eq!(normalize_message(&s), want.join(" "));
        }
    }
}
