//! A call's MinHash signature in its two stored forms (the feature hashes while they are fewer
//! than the signature's bytes, else the packed signature) and the similarity of two calls
//! computed from whichever forms they hold, without unpacking when both are full.
use crate::engine::detectors::OutKind;
use crate::engine::text::{estimate, minhash_of, signature_from, similarity, Signature, MINHASH_K};

/// What a call's MinHash signature is computed from, kept in the smaller form. Most tool
/// arguments have one to a few features, and a window of full signatures was the largest part
/// of a run's state; the signature is recomputed, exactly, only when a call of the same tool
/// with a stagnant result is compared against it. This is the records' form (written and read
/// by `changelog::state`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sig {
    /// The signature itself (also what records written before `Features` hold), as byte
    /// slots; records of version 3 hold 16-bit ones and earlier ones 32-bit ones, read as
    /// their low byte.
    Full(Vec<u32>),
    /// The feature hashes ([`crate::engine::text::feature_hashes`]), when there are at most
    /// [`MAX_FEATURES`] (records of version 3 and before allowed eight: more than
    /// [`MAX_FEATURES`] are read as the full signature they give).
    Features { f: Vec<u64> },
}

/// Feature hashes (two words each) are kept instead of the signature while they are no
/// larger than it.
pub(super) const MAX_FEATURES: usize = SIG_WORDS / 2;
/// Words of a full signature in [`NearDupState::buf`](super::NearDupState): four byte slots to a word.
pub(super) const SIG_WORDS: usize = MINHASH_K / 4;
// A call's stored signature, either form, fits in a `[u32; MINHASH_K]` scratch.
const _: () = assert!(2 * MAX_FEATURES <= MINHASH_K && SIG_WORDS <= MINHASH_K);

/// A signature as [`SIG_WORDS`] words: slot `4i + j` in byte `j` (from the low end) of word `i`.
pub(super) fn pack(sig: &Signature) -> [u32; SIG_WORDS] {
    std::array::from_fn(|i| {
        u32::from_le_bytes([sig[4 * i], sig[4 * i + 1], sig[4 * i + 2], sig[4 * i + 3]])
    })
}

/// How many of the four bytes of `x` are not zero: a byte's high bit survives the mask and
/// its low seven bits carry into it only when the byte is not zero, and no carry crosses a
/// byte (at most 0x7f + 0x7f).
fn nonzero_bytes(x: u32) -> u32 {
    (((x & 0x7f7f_7f7f).wrapping_add(0x7f7f_7f7f) | x) & 0x8080_8080).count_ones()
}

/// [`pack`] undone; missing words (a malformed record's) read as an empty set's slots.
pub(super) fn unpack(words: &[u32]) -> Signature {
    std::array::from_fn(|i| {
        words
            .get(i / 4)
            .map_or(u8::MAX, |w| (w >> (8 * (i % 4))) as u8)
    })
}

/// A call as compared: a window entry with its signature, or the current call. Crate-visible
/// for `changelog::state`, which writes and reads window entries.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) tool: u64,
    pub(crate) result: u64,
    pub(crate) kind: OutKind,
    /// `sig` is the full signature ([`pack`]ed), else the feature hashes as (low, high) halves.
    pub(crate) full: bool,
    pub(crate) sig: &'a [u32],
}

/// `sig` as stored: (full, values).
pub(crate) fn encode(sig: Sig) -> (bool, Vec<u32>) {
    match sig {
        Sig::Full(s) => (
            true,
            pack(&signature_from(s.into_iter().map(u64::from))).to_vec(),
        ),
        Sig::Features { f } if f.len() > MAX_FEATURES => (true, pack(&minhash_of(&f)).to_vec()),
        Sig::Features { f } => (
            false,
            f.iter()
                .flat_map(|h| [*h as u32, (h >> 32) as u32])
                .collect(),
        ),
    }
}

impl Call<'_> {
    fn features(&self) -> impl Iterator<Item = u64> + '_ {
        self.sig
            .chunks_exact(2)
            .map(|p| u64::from(p[0]) | (u64::from(p[1]) << 32))
    }

    pub(crate) fn record_sig(&self) -> Sig {
        if self.full {
            Sig::Full(unpack(self.sig).map(u32::from).to_vec())
        } else {
            Sig::Features {
                f: self.features().collect(),
            }
        }
    }

    pub(super) fn full_sig(&self) -> Signature {
        if self.full {
            unpack(self.sig)
        } else {
            // At most MAX_FEATURES features: gathered on the stack, not in a Vec.
            let mut hashes = [0u64; MAX_FEATURES];
            let mut n = 0;
            for (slot, h) in hashes.iter_mut().zip(self.features()) {
                *slot = h;
                n += 1;
            }
            minhash_of(&hashes[..n])
        }
    }

    /// [`similarity`] of the two signatures; `other_full` is `other.full_sig()`.
    pub(super) fn similarity<'a>(
        &self,
        other: &Call<'_>,
        other_full: impl FnOnce() -> &'a Signature,
    ) -> f64 {
        if !self.full && !other.full && self.sig == other.sig {
            // The same features give the same signature: all of its slots agree.
            return 1.0;
        }
        if self.full && other.full && self.sig.len() == SIG_WORDS && other.sig.len() == SIG_WORDS {
            // Slot by slot on the packed words, without unpacking either.
            let same: u32 = self
                .sig
                .iter()
                .zip(other.sig)
                .map(|(a, b)| 4 - nonzero_bytes(a ^ b))
                .sum();
            return estimate(same);
        }
        similarity(&self.full_sig(), other_full())
    }
}
