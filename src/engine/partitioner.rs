//! Which input partition a run belongs to: Kafka's default keyed partitioner, reproduced so that
//! `eddy replay --partitions N` and producers agree with the topic.

/// Partition a run id exactly as Kafka's default (Java) partitioner does for a keyed record:
/// murmur2 of the key bytes, positive, modulo the partition count. Producers of the input topic
/// are expected to use it (librdkafka: `partitioner=murmur2_random`).
pub fn partition_for(run_id: &str, partitions: u32) -> u32 {
    if partitions <= 1 {
        return 0;
    }
    (murmur2(run_id.as_bytes()) & 0x7fff_ffff) % partitions
}

fn murmur2(data: &[u8]) -> u32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rem = chunks.remainder();
    if rem.len() >= 3 {
        h ^= u32::from(rem[2]) << 16;
    }
    if rem.len() >= 2 {
        h ^= u32::from(rem[1]) << 8;
    }
    if !rem.is_empty() {
        h ^= u32::from(rem[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka_java_partitioner() {
        // Reference values from Kafka's own Utils.murmur2 test vectors.
        assert_eq!(murmur2(b"21") as i32, -973932308);
        assert_eq!(murmur2(b"foobar") as i32, -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string") as i32, -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string") as i32, -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") as i32,
            -58897971
        );
        assert_eq!(murmur2(b"abc") as i32, 479470107);
    }
}
