//! A deterministic b-bit MinHash: signatures of feature sets, persisted in run state and in
//! the changelog, and the Jaccard similarity estimated from two of them.

#[inline(always)]
fn mix(mut z: u64) -> u64 {
    // splitmix64 finaliser: cheap, well-distributed permutation for the MinHash family.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub(crate) const MINHASH_K: usize = 32;

/// A stored MinHash signature: b-bit MinHash with b = 8, the low byte of each slot's 32-bit
/// minimum. Signatures are most of an open run's state (a window of thoughts and one of
/// argument sets), and a byte per slot loses little: two different minima share their low byte
/// with probability 2⁻⁸, which [`similarity`] corrects for, so its estimate stays unbiased and
/// its spread grows only slightly against thresholds set in tenths. Fixed-size, so it lives
/// inline, not behind a pointer.
pub(crate) type Signature = [u8; MINHASH_K];

/// The probability that two different 32-bit minima share a stored slot.
const CHANCE: f64 = 1.0 / 256.0;

/// MinHash signature of a feature set. Empty sets get an all-`u8::MAX` signature, which
/// compares equal to another empty set (and to a non-empty one only with probability 2⁻²⁵⁶).
#[cfg(test)]
pub(crate) fn minhash<'a>(features: impl IntoIterator<Item = &'a str>) -> Signature {
    let hashes: Vec<u64> = features
        .into_iter()
        .map(|f| super::fnv::fnv64(f.as_bytes()))
        .collect();
    minhash_of(&hashes)
}

/// [`minhash`] of features given by their [`fnv64`].
pub(crate) fn minhash_of(hashes: &[u64]) -> Signature {
    let mut sig = [0; MINHASH_K];
    minhash_into(&mut sig, hashes);
    truncate(&sig)
}

/// The stored form of a full 32-bit signature (minimum first, then its low bits: b-bit
/// MinHash keeps the low bits of the minimum, not the minimum of the low bits).
pub(crate) fn truncate(full: &[u32; MINHASH_K]) -> Signature {
    full.map(|x| x as u8)
}

/// Reads a signature written with 32-bit slots (records of versions 1 and 2), 16-bit ones
/// (version 3) or bytes (`changelog::state::signature` reads records with it): the low byte of any of them is the stored slot. Any length is
/// accepted, as earlier versions did: surplus slots are dropped and missing ones read as an
/// empty set's, so a malformed record restores instead of failing.
pub(crate) fn signature_from(values: impl IntoIterator<Item = u64>) -> Signature {
    let mut sig = [u8::MAX; MINHASH_K];
    for (slot, v) in sig.iter_mut().zip(values) {
        *slot = v as u8;
    }
    sig
}

/// [`minhash_of`] into `sig`, without allocating.
///
/// The hottest loop of the text detectors: 32 mixes per feature, for every thought and every
/// large argument set. Compiled a second time for AVX2 and picked at run time: there the 32
/// slots run four to a vector (the 64-bit multiplies emulated from 32-bit ones), about 3× faster
/// than baseline x86-64 on the 40-feature signature of a sentence. A third build for AVX-512
/// (with DQ's native 64-bit multiply, no emulation) runs eight slots to a vector where the CPU
/// has it. Integer arithmetic, so every version gives the same bits.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512dq+avx512vl+avx2", "x86_64+avx2"))]
pub(crate) fn minhash_into(sig: &mut [u32; MINHASH_K], hashes: &[u64]) {
    sig.fill(u32::MAX);
    for &base in hashes {
        for (k, slot) in sig.iter_mut().enumerate() {
            let h = (mix(base ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32) as u32;
            // `min`, not a compare-and-store: it compiles to a branch-free lane-wise minimum.
            *slot = (*slot).min(h);
        }
    }
}

/// Estimated Jaccard similarity of two MinHash signatures.
pub(crate) fn similarity(a: &Signature, b: &Signature) -> f64 {
    let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
    estimate(same as u32)
}

/// The Jaccard similarity estimated from `same` agreeing slots of [`MINHASH_K`]. A slot agrees
/// when the two minima are equal (probability J) or, failing that, by chance ([`CHANCE`]):
/// P = J + (1 − J)·c, so J = (P − c) / (1 − c). Clamped at 0 (fewer agreements than chance
/// alone gives); all slots agreeing estimates exactly 1.
pub(crate) fn estimate(same: u32) -> f64 {
    corrected(f64::from(same) / MINHASH_K as f64)
}

/// J from the share `p` of agreeing slots.
fn corrected(p: f64) -> f64 {
    ((p - CHANCE) / (1.0 - CHANCE)).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::super::fnv::fnv64;
    use super::*;

    #[test]
    fn minhash_is_stable_and_estimates_overlap() {
        let a = minhash(["x", "y", "z"].iter().copied());
        let b = minhash(["z", "y", "x"].iter().copied());
        assert_eq!(a, b);
        let c = minhash(["p", "q", "r"].iter().copied());
        assert!(similarity(&a, &c) < 0.3);
        assert_eq!(fnv64(b"abc"), 0xe71f_a219_0541_574b);
    }

    #[test]
    fn estimate_corrects_for_chance_agreements() {
        // At the expected number of agreeing slots for a true similarity J, the estimate is J.
        for j in [0.0, 0.1, 0.3, 0.5, 0.6, 0.7, 0.9, 1.0] {
            let k = MINHASH_K as f64;
            let expected_same = j * k + (1.0 - j) * k / 256.0;
            let got = corrected(expected_same / k);
            assert!((got - j).abs() < 1e-12, "{j}: {got}");
        }
        assert_eq!(estimate(MINHASH_K as u32), 1.0);
        assert_eq!(estimate(0), 0.0);
        // Never above the raw share of agreeing slots, and rising with it.
        for same in 1..=MINHASH_K as u32 {
            assert!(estimate(same) <= f64::from(same) / MINHASH_K as f64);
            assert!(estimate(same) > estimate(same - 1));
        }
    }

    proptest::proptest! {
        /// Whichever version of the MinHash loop the CPU gets (AVX-512 or AVX2), it computes the
        /// definition: per slot k, the least high half of mix(feature ^ k·φ).
        #[test]
        fn minhash_matches_its_definition(hashes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..80)) {
            let mut want = [u32::MAX; MINHASH_K];
            for &h in &hashes {
                for (k, w) in want.iter_mut().enumerate() {
                    let v = (mix(h ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32) as u32;
                    if v < *w {
                        *w = v;
                    }
                }
            }
            let mut got = [7; MINHASH_K];
            minhash_into(&mut got, &hashes);
            proptest::prop_assert_eq!(got, want);
        }

        /// Equal minima keep equal low bytes, so stored slots agree wherever the full ones
        /// do, and beyond that only by chance (2⁻⁸ per differing slot: five or more chance
        /// agreements among 32 slots happen about once in five million pairs).
        #[test]
        fn truncated_signatures_agree_as_the_full_ones(
            shared in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
            a_own in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
            b_own in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..30),
        ) {
            let (mut a, mut b) = ([0; MINHASH_K], [0; MINHASH_K]);
            minhash_into(&mut a, &[shared.as_slice(), &a_own].concat());
            minhash_into(&mut b, &[shared.as_slice(), &b_own].concat());
            let full = a.iter().zip(&b).filter(|(x, y)| x == y).count();
            let (ta, tb) = (truncate(&a), truncate(&b));
            let short = ta.iter().zip(&tb).filter(|(x, y)| x == y).count();
            proptest::prop_assert!(short >= full);
            proptest::prop_assert!(short - full <= 4, "{short} vs {full}");
            proptest::prop_assert_eq!(similarity(&ta, &tb), estimate(short as u32));
        }
    }
}
