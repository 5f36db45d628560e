//! What every database store shares: values as JSON text in rows and back, with the nesting
//! bounded both ways. (The in-process cache of parsed plans is [`crate::plan_cache`].)

use serde::Serialize;
use serde::de::DeserializeOwned;
use stratum_compiler::plan::Plan;

use super::StoreError;
use crate::ids::FlowId;

/// The deepest JSON document a store reads back (see [`decode`]).
pub const MAX_STORED_DEPTH: usize = 1024;

/// A value as JSON text; refused (failing the command, which leaves the flow as it was) when
/// it nests too deep for [`decode`] to read back: a row that cannot be read would stop its flow
/// for good.
pub fn encode(value: &impl Serialize) -> Result<String, EncodeError> {
    let json = serde_json::to_string(value).map_err(|error| EncodeError(error.to_string()))?;
    if nesting_beyond(json.as_bytes(), MAX_STORED_DEPTH) {
        return Err(EncodeError(format!(
            "the value nests deeper than the {MAX_STORED_DEPTH} levels the store reads back"
        )));
    }
    Ok(json)
}

/// Why a value cannot be stored.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(String);

impl From<EncodeError> for StoreError {
    fn from(error: EncodeError) -> StoreError {
        StoreError::Database(format!("cannot store a value: {error}"))
    }
}

/// Reads back what [`encode`] wrote. The values in it (results, inputs) nest as deep as the
/// agent sent them, plus the few levels of the state around them: deeper than `serde_json`'s
/// default limit of 128, which would make a flow unreadable after a result it accepted. So the
/// limit is lifted, and the nesting bounded by a scan first, which does not recurse.
pub fn decode<T: DeserializeOwned>(json: &str, what: impl Fn() -> String) -> Result<T, StoreError> {
    if nesting_beyond(json.as_bytes(), MAX_STORED_DEPTH) {
        return Err(StoreError::Corrupt(format!(
            "{} nests deeper than {MAX_STORED_DEPTH} levels",
            what()
        )));
    }
    let mut deserializer = serde_json::Deserializer::from_str(json);
    deserializer.disable_recursion_limit();
    T::deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|error| StoreError::Corrupt(format!("{} cannot be read: {error}", what())))
}

/// Whether the brackets of JSON text nest deeper than `limit` (strings skipped): the plan
/// loader's scan, which does not recurse.
pub fn nesting_beyond(bytes: &[u8], limit: usize) -> bool {
    stratum_compiler::plan::nesting_beyond(bytes, limit).is_some()
}

pub fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Database(format!("{what} ({value}) is too large to store")))
}

/// A flow's id and version as a row holds them (text, a signed integer).
pub fn flow_version(id: &str, version: i64) -> Result<(FlowId, u64), StoreError> {
    let flow = FlowId::parse(id)
        .ok_or_else(|| StoreError::Corrupt(format!("the flow id {id:?} is not a flow id")))?;
    let version = u64::try_from(version)
        .map_err(|_| StoreError::Corrupt(format!("flow {id} has version {version}")))?;
    Ok((flow, version))
}

/// Loads a stored plan's JSON, refusing one that is damaged or is another plan than its key
/// names (it would run the wrong steps).
pub fn load_plan(checksum: &str, json: &str) -> Result<Plan, StoreError> {
    let loaded = stratum_compiler::plan::load(json.as_bytes()).map_err(|error| {
        StoreError::Corrupt(format!("the stored plan {checksum} is refused: {error}"))
    })?;
    if loaded.checksum != checksum {
        return Err(StoreError::Corrupt(format!(
            "the plan stored as {checksum} is the plan {}",
            loaded.checksum
        )));
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{MAX_STORED_DEPTH, decode, encode, nesting_beyond};
    use crate::state::StepState;

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert!(!nesting_beyond(br#"{"a": [[1]]}"#, 3));
        assert!(nesting_beyond(br#"{"a": [[[1]]]}"#, 3));
        assert!(!nesting_beyond(br#"{"a": "[[[[\"[[[["}"#, 1));
    }

    #[test]
    fn a_null_output_reads_back_as_a_null_output() {
        for output in [None, Some(json!(null)), Some(json!({"n": 1}))] {
            let state = StepState {
                output: output.clone(),
                attempts: 1,
                ..StepState::default()
            };
            let text = encode(&state).expect("encodes");
            let back: StepState = decode(&text, || "a step".to_owned()).expect("decodes");
            assert_eq!(back, state, "{text}");
        }
    }

    #[test]
    fn what_could_not_be_read_back_is_not_written() {
        let mut deep = json!(1);
        for _ in 0..=MAX_STORED_DEPTH {
            deep = json!([deep]);
        }
        assert!(encode(&deep).is_err());
        let text = format!(
            "{}1{}",
            "[".repeat(MAX_STORED_DEPTH + 1),
            "]".repeat(MAX_STORED_DEPTH + 1)
        );
        assert!(decode::<serde_json::Value>(&text, || "a value".to_owned()).is_err());
    }
}
