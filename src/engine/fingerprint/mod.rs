//! Fingerprints of a step.
//!
//! `raw` is keelwave's fingerprint of record (server formula): `sha256(tool_name || 0x00 ||
//! raw tool_input bytes)`, the bytes exactly as they arrived, so `/loops` answers match keelwave.
//!
//! `canonical_input` / `canonical_output` are eddy's own canonical JSON (keys sorted at every
//! depth by UTF-8 bytes, numbers normalised so `1.0 == 1`, strings re-escaped one way) after
//! removing volatile keys and normalising volatile values. It resembles RFC 8785 but is not it;
//! docs/fingerprints.md defines it exactly, versioned, with test vectors. Two calls that differ
//! only by key order, a request id or a timestamp get the same canonical fingerprint.
//!
//! One file per stage: `config` says what is volatile or secret, `keys` turns that into
//! the per-tool key sets looked up for every key of every payload, `normalize` and `parse`
//! strip and mask (on a parsed value, or while parsing), `canonical` writes the canonical
//! text, `digest` hashes it (and keelwave's raw bytes), and `step` does all of it for one
//! step, once, for every detector.
mod canonical;
mod digest;
mod fingerprint_config;
mod key_sets;
mod normalize;
mod parse;
mod step;

pub(crate) use canonical::canonical_string;
pub use digest::{canonical_input_fp, canonical_output_fp, keelwave_raw, StepFingerprints};
pub(crate) use fingerprint_config::FingerprintConfig;
#[cfg(test)]
pub(crate) use fingerprint_config::REDACTED;
pub(crate) use key_sets::KeySets;
pub(crate) use step::{Canonical, TextBufs};

#[cfg(test)]
mod tests;
