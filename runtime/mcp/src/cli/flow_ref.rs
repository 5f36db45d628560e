//! A flow named on the command line: its whole id, or the start of it (`6e85abb0`, as `watch`,
//! `query flows` and the console show it). Takes the text and the store; gives the one flow it
//! names, none, or every flow it could mean, so the caller can say which.

use crate::ids::FlowId;
use crate::store::{Store, StoreError};

/// The shortest start of an id taken: shorter ones would match too much to be meant.
pub const MIN_PREFIX: usize = 4;
/// How many of the flows an ambiguous start matches are named.
pub const MATCHES_SHOWN: usize = 10;

/// What a flow reference names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowRef {
    One(FlowId),
    None,
    /// Several flows start so; at most [`MATCHES_SHOWN`] of them, and how many there are.
    Many {
        shown: Vec<FlowId>,
        total: usize,
    },
}

/// Resolves `given`, a whole flow id or a start of one of at least [`MIN_PREFIX`] characters
/// (case does not matter).
pub fn resolve(store: &dyn Store, given: &str) -> Result<FlowRef, StoreError> {
    let given = given.trim();
    if let Some(id) = FlowId::parse(given) {
        return Ok(FlowRef::One(id));
    }
    let prefix = given.to_ascii_lowercase();
    let plausible = prefix.len() >= MIN_PREFIX
        && prefix.len() < 36
        && prefix
            .bytes()
            .all(|byte| byte.is_ascii_hexdigit() || byte == b'-');
    if !plausible {
        return Ok(FlowRef::None);
    }
    let mut matches: Vec<FlowId> = store
        .flow_versions()?
        .into_iter()
        .map(|(id, _)| id)
        .filter(|id| id.as_str().starts_with(&prefix))
        .collect();
    Ok(match matches.len() {
        0 => FlowRef::None,
        1 => matches.pop().map_or(FlowRef::None, FlowRef::One),
        total => {
            matches.sort();
            matches.truncate(MATCHES_SHOWN);
            FlowRef::Many {
                shown: matches,
                total,
            }
        }
    })
}

/// The message for a start that several flows share.
pub fn ambiguous(given: &str, shown: &[FlowId], total: usize) -> String {
    let listed: Vec<&str> = shown.iter().map(FlowId::as_str).collect();
    let more = total.saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "`{given}` is the start of {total} flows' ids ({}{more}); give more of the id",
        listed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::MemoryStore;

    #[test]
    fn text_too_short_or_not_hex_names_no_flow_without_reading() {
        let store = MemoryStore::new();
        for given in ["", "6e8", "zzzz", "6e85abb0/../x"] {
            assert_eq!(resolve(&store, given).unwrap(), FlowRef::None, "{given}");
        }
    }

    #[test]
    fn a_whole_id_is_taken_as_it_is() {
        let store = MemoryStore::new();
        let id = "6E85ABB0-0000-4000-8000-000000000001";
        assert_eq!(
            resolve(&store, id).unwrap(),
            FlowRef::One(FlowId::parse(id).unwrap())
        );
    }

    #[test]
    fn the_ambiguity_message_lists_the_matches() {
        let ids: Vec<FlowId> = [
            "6e85abb0-0000-4000-8000-000000000001",
            "6e85abb0-0000-4000-8000-000000000002",
        ]
        .iter()
        .map(|id| FlowId::parse(id).unwrap())
        .collect();
        assert_eq!(
            ambiguous("6e85", &ids, 12),
            "`6e85` is the start of 12 flows' ids (6e85abb0-0000-4000-8000-000000000001, \
             6e85abb0-0000-4000-8000-000000000002 and 10 more); give more of the id"
        );
    }
}
