//! Flow ids: UUIDs, validated before anything looks them up, never used in a path.
//!
//! The pure core makes no randomness of its own: a [`Context`](crate::Context) carries a seed,
//! and every id a command needs (a new flow, a child flow) is derived from it and a counter, so
//! that the same command on the same state gives the same ids.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A flow execution's id: a UUID in its lowercase hyphenated form.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FlowId(String);

impl FlowId {
    /// Reads an id an agent sent: a UUID (any case, hyphenated), or `None`.
    pub fn parse(text: &str) -> Option<FlowId> {
        let bytes = text.as_bytes();
        if bytes.len() != 36 {
            return None;
        }
        let well_formed = bytes.iter().enumerate().all(|(at, byte)| match at {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        });
        well_formed.then(|| FlowId(text.to_ascii_lowercase()))
    }

    /// A version-4-shaped UUID derived from `seed` and `counter`.
    pub fn derive(seed: u128, counter: u64) -> FlowId {
        let mut hasher = Sha256::new();
        hasher.update(seed.to_le_bytes());
        hasher.update(counter.to_le_bytes());
        let digest = hasher.finalize();
        let mut bytes = [0u8; 16];
        for (to, from) in bytes.iter_mut().zip(digest.iter()) {
            *to = *from;
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let part = |from: usize, to: usize| hex.get(from..to).unwrap_or_default().to_owned();
        FlowId(format!(
            "{}-{}-{}-{}-{}",
            part(0, 8),
            part(8, 12),
            part(12, 16),
            part(16, 20),
            part(20, 32)
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FlowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::FlowId;

    #[test]
    fn parses_uuids_only() {
        assert!(FlowId::parse("a704dade-1b2c-4d5e-8f90-0123456789ab").is_some());
        assert_eq!(
            FlowId::parse("A704DADE-1B2C-4D5E-8F90-0123456789AB").map(|id| id.to_string()),
            Some("a704dade-1b2c-4d5e-8f90-0123456789ab".to_owned())
        );
        for bad in [
            "",
            "../../etc/passwd",
            "a704dade1b2c4d5e8f900123456789ab",
            "a704dade-1b2c-4d5e-8f90-0123456789a/",
        ] {
            assert!(FlowId::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn derived_ids_parse_and_differ() {
        let first = FlowId::derive(7, 0);
        assert_eq!(FlowId::parse(first.as_str()), Some(first.clone()));
        assert_ne!(first, FlowId::derive(7, 1));
        assert_eq!(first, FlowId::derive(7, 0));
    }
}
