//! The fingerprints themselves: keelwave's raw hash of record and eddy's domain-separated
//! hashes of the canonical texts. Changing any of these changes stored fingerprints, so they
//! are kept together and small.
use sha2::{Digest, Sha256};

pub(crate) type Fp = [u8; 32];

/// A step's fingerprints: what the detectors compare and the sink stores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepFingerprints {
    /// keelwave's fingerprint of record; `None` when the step has no tool_name.
    pub raw: Option<Fp>,
    /// Canonical tool + input; `None` when the step has no tool_name.
    pub canonical_input: Option<Fp>,
    /// Canonical output + success flag; `None` when the step has no tool_name.
    pub canonical_output: Option<Fp>,
}

fn digest(domain: &[u8], parts: &[&[u8]]) -> Fp {
    let mut h = Sha256::new();
    h.update(domain);
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// Fingerprint of a tool call: the tool and its canonical input.
pub fn canonical_input_fp(tool: &str, canon_input: &str) -> Fp {
    digest(
        b"eddy.canon.input.v1",
        &[tool.as_bytes(), canon_input.as_bytes()],
    )
}

/// Fingerprint of a tool result: its success and canonical output.
pub fn canonical_output_fp(success: Option<bool>, canon_output: &str) -> Fp {
    let flag: &[u8] = match success {
        Some(true) => b"1",
        Some(false) => b"0",
        None => b"-",
    };
    digest(b"eddy.canon.output.v1", &[flag, canon_output.as_bytes()])
}

/// `sha256(tool_name || 0x00 || tool_input)`; an omitted input hashes as `sha256(name || 0x00)`.
pub fn keelwave_raw(tool_name: &str, tool_input: Option<&str>) -> Fp {
    let mut h = Sha256::new();
    h.update(tool_name.as_bytes());
    h.update([0u8]);
    if let Some(input) = tool_input {
        h.update(input.as_bytes());
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from keelwave's wire contract (server formula over httpx-serialised bytes).
    #[test]
    fn keelwave_server_vectors() {
        let cases = [
            (
                "web_search",
                Some(r#"{"q":"keelwave"}"#),
                "4f7c82ef6cf35555fcf58350e7d571fb609ea283aeba537b8a890386bd201f23",
            ),
            (
                "web_search",
                Some(r#"{"q":"keelwave","limit":5}"#),
                "360e2b692d686bc778140f529f279b3bc577e92897f2f3e751a9401690d697d5",
            ),
            (
                "web_search",
                Some(r#"{"limit":5,"q":"keelwave"}"#),
                "e4f39d80694868439d3bcaae439f50e8b8b99aa0f8096dd9d000817cfc09af0d",
            ),
            (
                "search",
                Some("{\"q\":\"caf\u{e9}\"}"),
                "342899b6267516f87e92bde0b99a7322c8d78716931c1561034b5073f8e93881",
            ),
            (
                "get_quota",
                Some("{}"),
                "b1242d11109b1c072a3ee6af7661e03c47e18df7d05d496809b5d02f5ffb25c3",
            ),
            (
                "web_search",
                None,
                "37dae15233f41c2974e656fe0ffacb5398ad9a69cacdde6c200d352f4b8c87a5",
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(
                hex::encode(keelwave_raw(name, input)),
                want,
                "{name} {input:?}"
            );
        }
    }
}
