//! FNV-1a: the stable 64-bit hash of a feature's text (persisted, so no `std` hasher).

pub(super) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a: stable across platforms and Rust versions (unlike `DefaultHasher`).
pub(crate) fn fnv64(bytes: &[u8]) -> u64 {
    fnv64_from(FNV_OFFSET, bytes)
}

/// FNV-1a continued from state `h`: `fnv64_from(fnv64(a), b) == fnv64(a ++ b)`.
pub(super) fn fnv64_from(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// [`fnv64_from`] of the ASCII-lowercased bytes, from two states at once: the word's own hash
/// and its pair's with the word before. Each byte costs a multiply whose result the next one
/// waits for; in one loop the two chains overlap, where one after the other they took twice as
/// long.
#[inline(always)]
pub(super) fn fnv64_lower2(mut a: u64, mut b: u64, bytes: &[u8]) -> (u64, u64) {
    for c in bytes {
        let c = u64::from(c.to_ascii_lowercase());
        a = (a ^ c).wrapping_mul(0x0100_0000_01b3);
        b = (b ^ c).wrapping_mul(0x0100_0000_01b3);
    }
    (a, b)
}
