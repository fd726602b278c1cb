//! MinHash signatures in records: a list of slots, written as bytes since version 4 and read
//! at any slot width an earlier version wrote.
use crate::engine::text::{signature_from, Signature};

/// Serde `deserialize_with` for a [`Signature`] field of a record (written as its list of
/// slots): reads either slot width (see [`signature_from`]).
pub(super) fn deserialize_signature<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Signature, D::Error> {
    use serde::Deserialize;
    Ok(signature_from(Vec::<u64>::deserialize(d)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::text::{minhash_into, minhash_of, MINHASH_K};

    #[test]
    fn signatures_read_from_either_slot_width() {
        let mut full = [0u32; MINHASH_K];
        minhash_into(&mut full, &[1, 2, 3, 0xdead_beef]);
        let old = serde_json::to_string(&full.to_vec()).unwrap();
        assert!(
            full.iter().any(|&x| x > u32::from(u16::MAX)),
            "a 32-bit record"
        );
        let mut de = serde_json::Deserializer::from_str(&old);
        let read = deserialize_signature(&mut de).unwrap();
        assert_eq!(read, minhash_of(&[1, 2, 3, 0xdead_beef]));
        // Version 3 records: 16-bit slots.
        let v3 = serde_json::to_string(&full.map(|x| x as u16).to_vec()).unwrap();
        let mut de = serde_json::Deserializer::from_str(&v3);
        assert_eq!(deserialize_signature(&mut de).unwrap(), read);
        let buf = serde_json::to_vec(read.as_slice()).unwrap();
        let mut de = serde_json::Deserializer::from_slice(&buf);
        assert_eq!(deserialize_signature(&mut de).unwrap(), read);
        // A malformed record's signature restores (as an empty set's past its end).
        assert_eq!(signature_from([]), minhash_of(&[]));
        assert_eq!(signature_from([5; 40])[MINHASH_K - 1], 5);
    }
}
