//! `stratum-mcp token create|list|revoke`: the access tokens of `stratum-mcp serve`, kept in
//! the store beside the flows, so every `serve` process on one store (a SQLite file, or a
//! team's PostgreSQL) accepts the same tokens and a revoked one stops working on all of them
//! at its next request.
//!
//! A token is a name (what the audit records as the actor of what it did), a read-only flag,
//! and a secret: `stratum_` and 64 hex digits (256 bits from the operating system's random
//! source), printed once by `create` and stored only as its SHA-256 ([`hash`]).
//!
//! Answers in the operator's version-1 JSON style, with the exit statuses of the other operator
//! commands: 0 done, 1 unknown name ([`NotFound`]), 2 a usage error or a conflict (an invalid
//! or duplicate name, [`Refused`]).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::SchemaVersion;
use super::gate::{ErrorBody, NotFound};
use super::watch::utc;
use crate::store::{Store, StoreError, Token};

/// What every secret starts with, so that a leaked one is recognisable (secret scanners, logs).
pub const SECRET_PREFIX: &str = "stratum_";

/// The longest token name.
pub const MAX_NAME_BYTES: usize = 64;

/// A new secret: [`SECRET_PREFIX`] and 256 random bits in hex.
pub fn new_secret() -> Result<String, StoreError> {
    let mut bits = [0u8; 32];
    getrandom::fill(&mut bits).map_err(|error| {
        StoreError::Database(format!(
            "cannot draw random bits from the operating system: {error}"
        ))
    })?;
    Ok(format!("{SECRET_PREFIX}{}", hex(&bits)))
}

/// 32 random bytes in hex, for session ids and form tokens.
pub fn random_hex() -> Result<String, StoreError> {
    new_secret().map(|secret| secret.trim_start_matches(SECRET_PREFIX).to_owned())
}

/// What the store keeps of a secret: its SHA-256, 64 lower-case hex digits.
pub fn hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Why a name cannot be a token's: 1 to 64 ASCII letters, digits, `.`, `_`, `-`, `@`, so that
/// it reads the same in an audit, a log and a shell.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a token's name cannot be empty".to_owned());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a token's name is at most {MAX_NAME_BYTES} characters; `{name}` has {}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@')))
    {
        return Err(format!(
            "a token's name may hold ASCII letters, digits, `.`, `_`, `-` and `@`; `{name}` \
             has {bad:?}"
        ));
    }
    Ok(())
}

/// `token create`: the new token with its secret, shown this once.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CreatedToken {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    pub name: String,
    pub read_only: bool,
    /// Wall-clock milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The secret to send as `Authorization: Bearer SECRET` (or to sign in with). It is not
    /// stored and cannot be shown again.
    pub secret: String,
}

/// One line of `token list`: never the secret, nor its hash.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TokenSummary {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    pub name: String,
    pub read_only: bool,
    pub created_ms: u64,
    /// When a request to `serve` last carried it (to the minute), `null` if never.
    pub last_used_ms: Option<u64>,
}

/// `token revoke`: done.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RevokedToken {
    #[serde(rename = "_schema_version")]
    pub schema_version: SchemaVersion,
    /// Always true.
    pub revoked: bool,
    pub name: String,
}

/// A name refused: `{"error": {"code": "INVALID_NAME" | "ALREADY_EXISTS", "message": …}}`.
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Refused {
    pub error: ErrorBody,
}

/// What a `token` command answers.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenAnswer {
    Created(CreatedToken),
    Listed(Vec<TokenSummary>),
    Revoked(RevokedToken),
    NotFound(NotFound),
    Refused(Refused),
}

impl TokenAnswer {
    /// 0 done, 1 unknown name, 2 a refused name.
    pub fn exit_code(&self) -> u8 {
        match self {
            TokenAnswer::Created(_) | TokenAnswer::Listed(_) | TokenAnswer::Revoked(_) => 0,
            TokenAnswer::NotFound(_) => 1,
            TokenAnswer::Refused(_) => 2,
        }
    }

    pub fn to_json(&self) -> Value {
        let value = match self {
            TokenAnswer::Created(created) => serde_json::to_value(created),
            TokenAnswer::Listed(tokens) => serde_json::to_value(tokens),
            TokenAnswer::Revoked(revoked) => serde_json::to_value(revoked),
            TokenAnswer::NotFound(missing) => serde_json::to_value(missing),
            TokenAnswer::Refused(refused) => serde_json::to_value(refused),
        };
        value.unwrap_or(Value::Null)
    }

    /// For a person at a terminal.
    pub fn to_text(&self) -> String {
        match self {
            TokenAnswer::Created(created) => format!(
                "created the {}token `{}`; its secret, shown only this once:\n\n  {}\n\nsend it \
                 as `Authorization: Bearer <secret>`, or sign in with it at /signin\n",
                if created.read_only { "read-only " } else { "" },
                created.name,
                created.secret
            ),
            TokenAnswer::Listed(tokens) if tokens.is_empty() => {
                "no access tokens; make one with: stratum-mcp token create --name NAME\n".to_owned()
            }
            TokenAnswer::Listed(tokens) => {
                let rows: Vec<Vec<String>> = tokens
                    .iter()
                    .map(|token| {
                        vec![
                            token.name.clone(),
                            if token.read_only {
                                "read-only"
                            } else {
                                "read-write"
                            }
                            .to_owned(),
                            utc(token.created_ms),
                            token.last_used_ms.map_or_else(|| "never".to_owned(), utc),
                        ]
                    })
                    .collect();
                super::table::render(&["NAME", "ACCESS", "CREATED", "LAST USED"], &rows)
            }
            TokenAnswer::Revoked(revoked) => format!(
                "revoked the token `{}`: requests carrying it, and its sessions, are refused\n",
                revoked.name
            ),
            TokenAnswer::NotFound(missing) => format!("error: {}\n", missing.error.message),
            TokenAnswer::Refused(refused) => format!("error: {}\n", refused.error.message),
        }
    }
}

fn refused(code: &str, message: String) -> TokenAnswer {
    TokenAnswer::Refused(Refused {
        error: ErrorBody {
            code: code.to_owned(),
            message,
        },
    })
}

/// `token create --name NAME [--read-only]` at `now_ms`.
pub fn create(
    store: &dyn Store,
    name: &str,
    read_only: bool,
    now_ms: u64,
) -> Result<TokenAnswer, StoreError> {
    if let Err(message) = check_name(name) {
        return Ok(refused("INVALID_NAME", message));
    }
    let secret = new_secret()?;
    let token = Token {
        name: name.to_owned(),
        hash: hash(&secret),
        read_only,
        created_ms: now_ms,
        last_used_ms: None,
    };
    match store.add_token(&token) {
        Ok(()) => Ok(TokenAnswer::Created(CreatedToken {
            schema_version: SchemaVersion,
            name: token.name,
            read_only,
            created_ms: now_ms,
            secret,
        })),
        Err(error @ StoreError::TokenExists(_)) => Ok(refused("ALREADY_EXISTS", error.to_string())),
        Err(error) => Err(error),
    }
}

/// `token list`.
pub fn list(store: &dyn Store) -> Result<TokenAnswer, StoreError> {
    Ok(TokenAnswer::Listed(
        store
            .tokens()?
            .into_iter()
            .map(|token| TokenSummary {
                schema_version: SchemaVersion,
                name: token.name,
                read_only: token.read_only,
                created_ms: token.created_ms,
                last_used_ms: token.last_used_ms,
            })
            .collect(),
    ))
}

/// `token revoke NAME`.
pub fn revoke(store: &dyn Store, name: &str) -> Result<TokenAnswer, StoreError> {
    Ok(if store.revoke_token(name)? {
        TokenAnswer::Revoked(RevokedToken {
            schema_version: SchemaVersion,
            revoked: true,
            name: name.to_owned(),
        })
    } else {
        TokenAnswer::NotFound(NotFound {
            error: ErrorBody {
                code: "NOT_FOUND".to_owned(),
                message: format!("no access token named `{name}`"),
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_hashed() {
        let (one, two) = (new_secret().ok(), new_secret().ok());
        assert_ne!(one, two);
        let one = one.unwrap_or_default();
        assert!(one.starts_with(SECRET_PREFIX) && one.len() == SECRET_PREFIX.len() + 64);
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_are_short_and_plain() {
        assert!(check_name("ci-bot@team.example").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
    }
}
