//! The `requestState` of a gate's form on 2026-07-28, where a server cannot send its client a
//! request during a call: `stratum_gate_wait` answers `input_required` with the form and a
//! sealed state, and the client calls again with the person's answer and the state echoed.
//!
//! The echoed state is the client's to alter, so it is sealed (HMAC-SHA256, rmcp's
//! [`RequestStateCodec`]) with a secret of the store, the same for every process on it, and
//! bound to the flow and to who asks: the access token over HTTP, this server process over
//! stdio (one process is one connection). It carries the gate and the round it was issued for
//! and expires with the gate's timeout. A forged or altered state, one issued to another caller
//! or for another flow or gate, is refused and changes nothing; a replayed one is for a round that its
//! first use decided (the core refuses a decision for another round with `stale_round`, and a
//! decided gate is no longer waiting), so a state decides at most once.

use std::time::Duration;

use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};

use crate::outputs::ToolError;
use crate::store::{Store, StoreError};

/// The name of the store's secret the states are sealed with.
const SECRET: &str = "gate_form_request_state";
/// What the sealed bytes are for: a state sealed for anything else never opens here.
const PURPOSE: &str = "stratum/gate-form/v1";
/// The longest `requestState` the server reads; its own are a few hundred characters.
pub const MAX_STATE_CHARS: usize = 4096;

/// What the state says: the gate's form as it was shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateForm {
    pub flow_id: String,
    pub step_id: String,
    /// The round the form asked about: the decision is for it and no other.
    pub round: u32,
    /// When the form was issued (Unix milliseconds).
    pub issued_ms: u64,
}

/// Seals and opens gate-form states with the store's secret.
#[derive(Clone)]
pub struct Sealer {
    codec: RequestStateCodec,
}

/// Why an echoed state is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a state this store sealed for this caller and gate, or altered.
    Invalid,
    /// Sealed here, but past its time (the gate's timeout, or the wait it was issued for).
    Expired,
}

impl Sealer {
    /// The sealer of `store`: its secret, made now (32 random bytes) when it has none.
    pub fn of_store(store: &dyn Store) -> Result<Sealer, StoreError> {
        let mut fresh = [0_u8; 32];
        getrandom::fill(&mut fresh).map_err(|error| {
            StoreError::Database(format!("no randomness for a secret: {error}"))
        })?;
        let fresh: String = fresh.iter().map(|byte| format!("{byte:02x}")).collect();
        let secret = store.secret(SECRET, &fresh)?;
        let codec = RequestStateCodec::try_new(secret.into_bytes()).map_err(|error| {
            StoreError::Database(format!(
                "the store's secret `{SECRET}` cannot seal a state ({error}); delete its row so \
                 that a new one is made"
            ))
        })?;
        Ok(Sealer { codec })
    }

    /// `form`, sealed for `caller`, opening until `ttl` has passed.
    pub fn seal(&self, form: &GateForm, caller: &str, ttl: Duration) -> Result<String, ToolError> {
        let bound = bound_to(caller, &form.flow_id);
        self.codec
            .seal_json_with(
                form,
                &SealOptions::new()
                    .associated_data(bound.as_bytes())
                    .ttl(ttl),
            )
            .map_err(|error| ToolError::new("internal_error", format!("sealing a form: {error}")))
    }

    /// The form `sealed` says, when this store sealed it for `caller` and `flow_id`, about the
    /// gate `step_id` when one is given, and it has not expired.
    pub fn open(
        &self,
        sealed: &str,
        caller: &str,
        flow_id: &str,
        step_id: Option<&str>,
    ) -> Result<GateForm, Refusal> {
        if sealed.len() > MAX_STATE_CHARS {
            return Err(Refusal::Invalid);
        }
        let bound = bound_to(caller, flow_id);
        let form: GateForm = match self.codec.open_json_with(sealed, bound.as_bytes()) {
            Ok(form) => form,
            Err(RequestStateError::Expired) => return Err(Refusal::Expired),
            Err(_) => return Err(Refusal::Invalid),
        };
        // The binding already says so; a second look costs nothing.
        if form.flow_id != flow_id || step_id.is_some_and(|step_id| form.step_id != step_id) {
            return Err(Refusal::Invalid);
        }
        Ok(form)
    }
}

/// The associated data a state is bound to: what it is for, who asked, which flow. Each part
/// is length-prefixed, so no two different pairs give the same bytes.
fn bound_to(caller: &str, flow_id: &str) -> String {
    let mut bound = String::from(PURPOSE);
    for part in [caller, flow_id] {
        bound.push_str(&format!("|{}:{part}", part.len()));
    }
    bound
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::store::MemoryStore;

    fn form() -> GateForm {
        GateForm {
            flow_id: "f1".to_owned(),
            step_id: "review".to_owned(),
            round: 2,
            issued_ms: 1,
        }
    }

    #[test]
    fn a_state_opens_for_its_caller_and_gate_only() {
        let store = MemoryStore::default();
        let sealer = Sealer::of_store(&store).unwrap();
        let sealed = sealer
            .seal(&form(), "token:alice", Duration::from_secs(60))
            .unwrap();
        assert_eq!(
            sealer.open(&sealed, "token:alice", "f1", Some("review")),
            Ok(form())
        );
        for (caller, flow, step) in [
            ("token:bob", "f1", "review"),
            ("token:alice", "f2", "review"),
            ("token:alice", "f1", "write"),
        ] {
            assert_eq!(
                sealer.open(&sealed, caller, flow, Some(step)),
                Err(Refusal::Invalid)
            );
        }
    }

    #[test]
    fn every_process_on_a_store_seals_alike_and_another_store_does_not() {
        let store = MemoryStore::default();
        let sealed = Sealer::of_store(&store)
            .unwrap()
            .seal(&form(), "stdio:1", Duration::from_secs(60))
            .unwrap();
        let again = Sealer::of_store(&store).unwrap();
        assert!(again.open(&sealed, "stdio:1", "f1", Some("review")).is_ok());
        let elsewhere = Sealer::of_store(&MemoryStore::default()).unwrap();
        assert_eq!(
            elsewhere.open(&sealed, "stdio:1", "f1", Some("review")),
            Err(Refusal::Invalid)
        );
    }

    #[test]
    fn an_altered_or_oversized_state_is_invalid_and_an_old_one_expired() {
        let store = MemoryStore::default();
        let sealer = Sealer::of_store(&store).unwrap();
        let sealed = sealer.seal(&form(), "c", Duration::from_secs(60)).unwrap();
        // Flip one character of the payload part.
        let mut altered: Vec<char> = sealed.chars().collect();
        let middle = altered.len() / 2;
        altered[middle] = if altered[middle] == 'A' { 'B' } else { 'A' };
        let altered: String = altered.into_iter().collect();
        assert_eq!(
            sealer.open(&altered, "c", "f1", Some("review")),
            Err(Refusal::Invalid)
        );
        assert_eq!(
            sealer.open(&"x".repeat(MAX_STATE_CHARS + 1), "c", "f1", Some("review")),
            Err(Refusal::Invalid)
        );
        let expired = sealer.seal(&form(), "c", Duration::ZERO).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            sealer.open(&expired, "c", "f1", Some("review")),
            Err(Refusal::Expired)
        );
    }
}
