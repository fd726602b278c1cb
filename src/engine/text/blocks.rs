//! 64-byte blocks classified into bit masks: how the volatile-value scan and the block
//! tokeniser read text without a branch per byte.

/// `f(n, block)` for each block of 64 bytes of `b` in turn, the last one padded with `pad`.
#[inline(always)]
pub(super) fn each_block64(b: &[u8], pad: u8, mut f: impl FnMut(usize, &[u8; 64])) {
    let mut full = b.chunks_exact(64);
    let mut n = 0;
    for c in &mut full {
        if let Ok(block) = <&[u8; 64]>::try_from(c) {
            f(n, block);
        }
        n += 1;
    }
    let rest = full.remainder();
    if !rest.is_empty() {
        let mut block = [pad; 64];
        block[..rest.len()].copy_from_slice(rest);
        f(n, &block);
    }
}

/// Bit `j` set where `f(block[j])`. The test runs on all 64 bytes as 0/1 bytes, which the
/// compiler does in vector registers when `f` is arithmetic (not a table lookup); each eight
/// of them are then gathered into a byte by one multiply. A byte loop shifting each bit into
/// place took about five times as long, and this classifies every message and payload string.
#[inline(always)]
pub(super) fn byte_mask(block: &[u8; 64], f: impl Fn(u8) -> bool) -> u64 {
    let mut ones = [0u8; 64];
    for (o, &c) in ones.iter_mut().zip(block) {
        *o = u8::from(f(c));
    }
    let mut m = 0;
    for (k, e) in ones.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        // Byte i (0 or 1) lands on bit 56 + i and nothing else reaches bits 56..64.
        m |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The bit gathered for each byte is the byte's own, in its place.
        #[test]
        fn byte_masks_hold_each_bytes_test(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 64)) {
            let mut block = [0u8; 64];
            block.copy_from_slice(&bytes);
            let mut want = 0u64;
            for (j, &c) in bytes.iter().enumerate() {
                want |= u64::from(c.is_ascii_hexdigit()) << j;
            }
            proptest::prop_assert_eq!(byte_mask(&block, |c| c.is_ascii_hexdigit()), want);
        }
    }
}
