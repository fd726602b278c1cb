//! A step's [`Canonical`] form: its payloads parsed (or, above `max_field_bytes`, summarised),
//! normalised, written canonically and hashed, once per step for every detector to share.
use super::canonical::write_canonical;
use super::digest::{canonical_input_fp, canonical_output_fp, keelwave_raw, Fp, StepFingerprints};
use super::fingerprint_config::FingerprintConfig;
use super::key_sets::KeySets;
use crate::contract::{JsonText, Step};
use crate::engine::json::Json;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The normalised payloads of a step, computed once and shared by all detectors; their
/// strings borrow from the step's.
pub struct Canonical<'s> {
    pub fps: StepFingerprints,
    pub(crate) input: Json<'s>,
    pub(crate) output: Json<'s>,
    pub input_text: String,
    pub output_text: String,
    /// `max_field_bytes` in effect (detectors read message content up to it).
    pub(crate) max_field_bytes: usize,
}

/// Buffers for a step's canonical input and output texts.
#[derive(Debug, Default)]
pub(crate) struct TextBufs(String, String);

/// A field above `max_field_bytes`: its length and the SHA-256 of its first `max` bytes. No
/// text of it is kept, so nothing of it (secrets included) can reach evidence.
fn oversized(raw: &str, max: usize) -> Json<'static> {
    let digest: Fp = Sha256::digest(&raw.as_bytes()[..max.min(raw.len())]).into();
    Json::String(Cow::Owned(format!(
        "<oversized {} bytes, prefix sha256 {}>",
        raw.len(),
        hex::encode(&digest[..16])
    )))
}

/// Parse a field, or summarise it when it is above `max` bytes (0 = no limit).
fn parse_bounded(raw: Option<&JsonText>, max: usize) -> Option<Json<'static>> {
    match raw {
        Some(r) if max > 0 && r.get().len() > max => Some(oversized(r.get(), max)),
        _ => None,
    }
}

impl<'s> Canonical<'s> {
    /// `keys` must be the key sets of the configuration `fp` belongs to (see
    /// `DetectorConfig::canonical` for one-off use).
    pub(crate) fn compute_with(step: &'s Step, fp: &FingerprintConfig, keys: &KeySets) -> Self {
        Self::compute_in(step, fp, keys, TextBufs::default())
    }

    /// [`Canonical::compute_with`], writing the canonical texts into `bufs` (from
    /// [`Canonical::into_parts`] of an earlier step): two allocations less per step.
    pub(crate) fn compute_in(
        step: &'s Step,
        fp: &FingerprintConfig,
        keys: &KeySets,
        bufs: TextBufs,
    ) -> Self {
        let raw = step
            .tool_name
            .as_deref()
            .map(|name| keelwave_raw(name, step.tool_input.as_ref().map(|r| r.get())));
        let vol = keys.volatility(step.tool_name.as_deref());
        let max = fp.max_field_bytes;
        let field = |raw: Option<&'s JsonText>| {
            parse_bounded(raw, max).unwrap_or_else(|| vol.parse_normalized(raw))
        };
        let input = field(step.tool_input.as_ref());
        let output = field(step.tool_output.as_ref());
        let text = |v: &Json<'_>, raw: Option<&JsonText>, mut s: String| {
            s.clear();
            // The canonical form is about as long as the payload: size it once.
            s.reserve(raw.map_or(8, |r| r.get().len() + 8));
            write_canonical(v, &mut s);
            s
        };
        let input_text = text(&input, step.tool_input.as_ref(), bufs.0);
        let output_text = text(&output, step.tool_output.as_ref(), bufs.1);
        let (ci, co) = match step.tool_name.as_deref() {
            Some(t) => (
                Some(canonical_input_fp(t, &input_text)),
                Some(canonical_output_fp(step.tool_success, &output_text)),
            ),
            None => (None, None),
        };
        Self {
            fps: StepFingerprints {
                raw,
                canonical_input: ci,
                canonical_output: co,
            },
            input,
            output,
            input_text,
            output_text,
            max_field_bytes: max,
        }
    }

    /// The fingerprints, and the texts' buffers for the next step's [`Canonical::compute_in`]
    /// (a buffer grown past 64 KiB by a large payload is dropped rather than kept).
    pub(crate) fn into_parts(self) -> (StepFingerprints, TextBufs) {
        let keep = |s: String| {
            if s.capacity() > 64 * 1024 {
                String::new()
            } else {
                s
            }
        };
        (
            self.fps,
            TextBufs(keep(self.input_text), keep(self.output_text)),
        )
    }

    /// A step's message content, cut to `max_field_bytes` (at a character boundary).
    pub(crate) fn content<'t>(&self, step: &'t Step) -> Option<&'t str> {
        let c = step.content.as_deref()?;
        if self.max_field_bytes == 0 || c.len() <= self.max_field_bytes {
            return Some(c);
        }
        let mut end = self.max_field_bytes;
        while !c.is_char_boundary(end) {
            end -= 1;
        }
        Some(&c[..end])
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::detectors::DetectorConfig;

    #[test]
    fn oversized_fields_are_summarised_not_parsed() {
        let mut cfg = DetectorConfig::default();
        cfg.fingerprint.max_field_bytes = 1024;
        let big = format!(r#"{{"data":"{}","api_key":"sk-secret"}}"#, "x".repeat(4000));
        let line = format!(
            r#"{{"v":1,"kind":"step","project_id":"p","run_id":"r","ts":1,"step_index":1,"step_type":"tool_call","tool_name":"t","tool_input":{{}},"tool_output":{big}}}"#
        );
        let crate::contract::Event::Step(s) = crate::contract::decode(line.as_bytes()).unwrap()
        else {
            panic!()
        };
        let c = cfg.canonical(&s);
        assert!(c.output_text.contains("oversized"), "{}", c.output_text);
        assert!(!c.output_text.contains("sk-secret"));
        assert!(c.output_text.len() < 200);
    }
}
