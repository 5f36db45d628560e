//! Browser sessions: a random id (the cookie's value) → the hash of the token signed in with,
//! a CSRF token for the session's forms, and an expiry. Kept in the store
//! ([`Store::open_session`](crate::store::Store::open_session) and its siblings), so every
//! `serve` process on one store knows every session, and a restart signs nobody out. The store
//! sees only the id's SHA-256: its table (a backup, a copy) holds no cookie that would let
//! anyone in, and a timing difference in the lookup says nothing about a real id.
//!
//! A session holds no rights of its own: every request looks its token up again, so a revoked
//! token ends its sessions at once (and revoking deletes them).
//!
//! Every call runs on the blocking pool ([`App::blocking`]); looking a session up only reads,
//! since it happens on every request a browser sends.

use super::{App, SESSION_LIFETIME};
use crate::cli::token::{hash, random_hex};
use crate::store::StoreError;

pub use crate::store::{MAX_SESSIONS_PER_TOKEN, Session};

/// Opens a session for the token with this hash: its id (the cookie's value) and the session.
/// Expired sessions go; beyond [`MAX_SESSIONS_PER_TOKEN`], that token's oldest.
pub async fn open(app: &App, token_hash: String) -> Result<(String, Session), StoreError> {
    let id = random_hex()?;
    let now_ms = crate::now_ms();
    let lifetime_ms = u64::try_from(SESSION_LIFETIME.as_millis()).unwrap_or(u64::MAX);
    let session = Session {
        token_hash,
        csrf: random_hex()?,
        expires_ms: now_ms.saturating_add(lifetime_ms),
    };
    let (id_hash, stored) = (hash(&id), session.clone());
    app.blocking(move |store| {
        store.open_session(&id_hash, &stored, now_ms, MAX_SESSIONS_PER_TOKEN)
    })
    .await?;
    Ok((id, session))
}

/// The session of this id, if it exists and has not expired.
pub async fn find(app: &App, id: &str) -> Result<Option<Session>, StoreError> {
    let (id_hash, now_ms) = (hash(id), crate::now_ms());
    app.blocking(move |store| store.session(&id_hash, now_ms))
        .await
}

/// Ends the session of this id (nothing if there is none).
pub async fn close(app: &App, id: &str) -> Result<(), StoreError> {
    let id_hash = hash(id);
    app.blocking(move |store| store.close_session(&id_hash).map(drop))
        .await
}
