//! The access tokens of `stratum-mcp serve`: the store methods on every store (memory,
//! SQLite, PostgreSQL), the schema migration that adds them to an existing SQLite database,
//! and `stratum-mcp token create|list|revoke` with its exit statuses and JSON schemas.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use stratum_test_support as support;
use stratum_test_support::linear;

use std::path::Path;
use std::process::Command as Process;
use std::sync::Arc;

use serde_json::{Value, json};
use stratum_runtime::MemoryStore;
use stratum_runtime::store::{Store, StoreError, Token};
use stratum_store_postgres::PostgresStore;
use stratum_store_sqlite::SqliteStore;

fn token(name: &str, hash: &str, read_only: bool) -> Token {
    Token {
        name: name.to_owned(),
        hash: hash.to_owned(),
        read_only,
        created_ms: 1_000,
        last_used_ms: None,
    }
}

/// What every store must do with tokens.
fn tokens_are_kept_found_and_revoked(label: &str, store: &dyn Store) {
    assert_eq!(store.tokens().unwrap(), [], "{label}: none at first");
    store
        .add_token(&token("zed", &"b".repeat(64), true))
        .unwrap();
    store
        .add_token(&token("alice", &"a".repeat(64), false))
        .unwrap();
    let duplicate = store.add_token(&token("alice", &"c".repeat(64), true));
    assert!(
        matches!(&duplicate, Err(StoreError::TokenExists(name)) if name == "alice"),
        "{label}: {duplicate:?}"
    );
    let names: Vec<String> = store
        .tokens()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["alice", "zed"], "{label}: by name");
    assert_eq!(
        store.token_by_hash(&"b".repeat(64)).unwrap(),
        Some(token("zed", &"b".repeat(64), true)),
        "{label}"
    );
    assert_eq!(
        store.token_by_hash(&"c".repeat(64)).unwrap(),
        None,
        "{label}"
    );
    store.token_used(&"a".repeat(64), 5_000).unwrap();
    store.token_used(&"f".repeat(64), 5_000).unwrap();
    let alice = store.token_by_hash(&"a".repeat(64)).unwrap().unwrap();
    assert_eq!(alice.last_used_ms, Some(5_000), "{label}");
    assert!(store.revoke_token("alice").unwrap(), "{label}");
    assert!(!store.revoke_token("alice").unwrap(), "{label}: gone");
    assert_eq!(
        store.token_by_hash(&"a".repeat(64)).unwrap(),
        None,
        "{label}"
    );
    // The name is free again, for a new secret.
    store
        .add_token(&token("alice", &"d".repeat(64), false))
        .unwrap();
    assert_eq!(store.tokens().unwrap().len(), 2, "{label}");
}

#[test]
fn tokens_on_the_memory_store() {
    tokens_are_kept_found_and_revoked("memory", &MemoryStore::new());
}

#[test]
fn tokens_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    tokens_are_kept_found_and_revoked("SQLite", &store);
}

#[test]
fn tokens_on_postgres() {
    let store = PostgresStore::connect(&support::postgres::database_url()).unwrap();
    tokens_are_kept_found_and_revoked("PostgreSQL", &store);
}

#[test]
fn a_version_1_sqlite_database_gains_the_tokens_table_and_keeps_its_flows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let flow = {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
        let mut scenario =
            support::Scenario::with(&linear::linear_spec(2), store, Default::default());
        let started = scenario.start(None, linear::inputs());
        started["flow_id"].as_str().unwrap().to_owned()
    };
    // As the program of version 1 left it: no tokens table (nor the later sessions table).
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE sessions; DROP TABLE tokens; ALTER TABLE checkpoints DROP COLUMN position; \
         DROP TABLE drives; DROP TABLE agent_runs; DROP TABLE task_diffs; DROP TABLE secrets; \
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.tokens().unwrap(), []);
    store
        .add_token(&token("alice", &"a".repeat(64), false))
        .unwrap();
    assert_eq!(store.list_flows().unwrap()[0].id.as_str(), flow);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, stratum_store_sqlite::SCHEMA_VERSION);
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stratum-mcp")
}

fn run(db: &Path, args: &[&str]) -> (i32, Value, String) {
    let output = Process::new(binary())
        .arg("--db")
        .arg(db)
        .args(args)
        .arg("--json")
        .env_remove("STRATUM_DATABASE_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn assert_valid(value: &Value, file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(file);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let problems: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{file}: {problems:?}\n{value:#}");
}

#[test]
fn the_token_commands_create_list_and_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");

    let (code, created, _) = run(&db, &["token", "create", "--name", "ci-agent"]);
    assert_eq!(code, 0);
    assert_valid(&created, "token-create.schema.json");
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("stratum_"), "{created}");
    assert_eq!(created["read_only"], json!(false));

    let (code, created, _) = run(
        &db,
        &["token", "create", "--name", "dashboard", "--read-only"],
    );
    assert_eq!((code, &created["read_only"]), (0, &json!(true)));

    let (code, refused, _) = run(&db, &["token", "create", "--name", "ci-agent"]);
    assert_eq!(code, 2, "a duplicate name is a conflict");
    assert_valid(&refused, "token-create.schema.json");
    assert_eq!(refused["error"]["code"], "ALREADY_EXISTS");
    let (code, refused, _) = run(&db, &["token", "create", "--name", "two words"]);
    assert_eq!(
        (code, refused["error"]["code"].as_str()),
        (2, Some("INVALID_NAME"))
    );

    let (code, listed, _) = run(&db, &["token", "list"]);
    assert_eq!(code, 0);
    assert_valid(&listed, "token-list.schema.json");
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|token| token["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ci-agent", "dashboard"]);
    assert!(
        !listed.to_string().contains(&secret[8..]),
        "the list never shows a secret"
    );

    // The secret is stored only as its SHA-256.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut statement = conn.prepare("SELECT * FROM tokens").unwrap();
    let columns = statement.column_count();
    let cells: Vec<String> = statement
        .query_map([], |row| {
            Ok((0..columns)
                .map(|i| {
                    row.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
                .join("|"))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let table = cells.join("\n");
    assert!(!table.contains(&secret[8..]), "{table}");
    assert!(
        table.contains(&stratum_mcp::cli::token::hash(&secret)),
        "{table}"
    );

    let (code, revoked, _) = run(&db, &["token", "revoke", "ci-agent"]);
    assert_eq!(code, 0);
    assert_valid(&revoked, "token-revoke.schema.json");
    let (code, missing, _) = run(&db, &["token", "revoke", "ci-agent"]);
    assert_eq!(code, 1, "an unknown name");
    assert_valid(&missing, "token-revoke.schema.json");
    assert_eq!(missing["error"]["code"], "NOT_FOUND");
}

#[test]
fn an_unusable_store_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the database file should be.
    let db = dir.path().join("state.db");
    std::fs::create_dir(&db).unwrap();
    let (code, _, stderr) = run(&db, &["token", "create", "--name", "a"]);
    assert_eq!(code, 3, "{stderr}");
}
