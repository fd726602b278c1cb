//! The policy layer's state ([`PolicyState`]): the recent corroborating findings, as (detector
//! name, step) pairs.
use crate::engine::detectors::policy::PolicyState;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::VecDeque;

#[derive(Serialize, Deserialize)]
#[serde(remote = "PolicyState", rename = "PolicyState")]
struct PolicyStateDef {
    /// Detector names are static; one read from a record is mapped back to its static name, so
    /// entries own no string (only a name this version does not know would).
    #[serde(deserialize_with = "static_names")]
    recent: VecDeque<(Cow<'static, str>, u64)>,
}

through_remote!(PolicyState, PolicyStateDef);

/// The names detectors report under (`Finding::detector`).
const DETECTORS: [&str; 10] = [
    "repeated_operation",
    "no_progress",
    "repeated_failure",
    "cycle",
    "near_duplicate",
    "handoff_cycle",
    "content_repetition",
    "context_pressure",
    "keelwave_fingerprint",
    "budget",
];

fn static_names<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<VecDeque<(Cow<'static, str>, u64)>, D::Error> {
    let v = VecDeque::<(String, u64)>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|(n, s)| {
            let name = match DETECTORS.iter().find(|d| **d == n) {
                Some(d) => Cow::Borrowed(*d),
                None => Cow::Owned(n),
            };
            (name, s)
        })
        .collect())
}
