//! Browser sessions: a random id (the cookie) → the hash of the token signed in with, a CSRF
//! token for the session's forms, and an expiry. Kept in memory, bounded: a restart of
//! `serve` signs everyone out, and several `serve` processes behind one proxy each have their
//! own (bearer requests need no session). The map is keyed by the id's SHA-256, so a timing
//! difference in the lookup says nothing about a real id.
//!
//! A session holds no rights of its own: every request looks its token up again, so a revoked
//! token ends its sessions at once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::cli::token::{hash, random_hex};
use crate::store::StoreError;

/// The most sessions kept; beyond it the one closest to expiry goes first.
pub const MAX_SESSIONS: usize = 10_000;

/// One browser's sign-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The SHA-256 of the token signed in with.
    pub token_hash: String,
    /// The value every state-changing request of the session must carry.
    pub csrf: String,
    pub expires_ms: u64,
}

pub struct Sessions {
    lifetime_ms: u64,
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub fn new(lifetime: Duration) -> Sessions {
        Sessions {
            lifetime_ms: u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Opens a session for the token with this hash at `now_ms`: its id (the cookie's value)
    /// and the session.
    pub fn open(&self, token_hash: &str, now_ms: u64) -> Result<(String, Session), StoreError> {
        let id = random_hex()?;
        let session = Session {
            token_hash: token_hash.to_owned(),
            csrf: random_hex()?,
            expires_ms: now_ms.saturating_add(self.lifetime_ms),
        };
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, kept| kept.expires_ms > now_ms);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, kept)| kept.expires_ms)
                .map(|(key, _)| key.clone())
        {
            map.remove(&oldest);
        }
        map.insert(hash(&id), session.clone());
        Ok((id, session))
    }

    /// The session of this id, if it exists and has not expired.
    pub fn find(&self, id: &str, now_ms: u64) -> Option<Session> {
        let key = hash(id);
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&key) {
            Some(session) if session.expires_ms > now_ms => Some(session.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn close(&self, id: &str) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&hash(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_expire_and_close() {
        let sessions = Sessions::new(Duration::from_secs(10));
        let Ok((id, session)) = sessions.open("h", 1_000) else {
            panic!("a session opens");
        };
        assert_eq!(sessions.find(&id, 2_000), Some(session));
        assert_eq!(sessions.find("another", 2_000), None);
        assert_eq!(sessions.find(&id, 11_000), None, "expired");
        let Ok((id, _)) = sessions.open("h", 1_000) else {
            panic!("a session opens");
        };
        sessions.close(&id);
        assert_eq!(sessions.find(&id, 2_000), None, "closed");
    }
}
