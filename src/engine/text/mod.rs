//! Text utilities shared by the fingerprints and the detectors: volatile-value normalisation,
//! word-level tokens, phrase matching and a deterministic MinHash.
//!
//! Everything here is a pure function of its input (no random seeds, no process-dependent
//! hashers) because fingerprints and MinHash signatures are persisted in the changelog and must
//! compare equal after a restore on another machine or Rust version.
//!
//! One file a job, each depending only on those listed before it:
//! - `blocks`: 64-byte blocks classified into bit masks, the branch-free scan both fast paths use;
//! - `volatile`: ids, timestamps and durations replaced by placeholders;
//! - `normalize`: the comparison forms of messages and error texts;
//! - `tokens`: the one definition of a word and its tokenisers ([`Words`], [`ascii_tokens`]);
//! - `fnv`, `minhash`: the stable feature hash and the signatures built from it;
//! - `stopwords`: the words that carry no content, and stemming;
//! - `features`: near-duplicate features of free text and their signatures;
//! - `keys`: SHA-256 state keys and the memo of names' keys.
mod blocks;
pub(crate) mod features;
mod fnv;
mod minhash;
mod normalize;
mod state_key;
mod stopwords;
mod tokens;
mod volatile;

pub(crate) use features::{feature_sig, message_feature_hashes};
pub(crate) use fnv::fnv64;
pub(crate) use minhash::{
    estimate, minhash_into, minhash_of, signature_from, similarity, truncate, Signature, MINHASH_K,
};
pub(crate) use normalize::{contains_ci, normalize_error, normalize_message};
pub(crate) use state_key::{key64, NameKeys};
pub(crate) use tokens::{ascii_tokens, Words};
pub(crate) use volatile::normalize_volatile_cow;
