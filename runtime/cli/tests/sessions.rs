//! The browser sessions of `stratum-mcp serve`, kept in the store: the store methods on every
//! store (memory, SQLite, PostgreSQL) with an explicit clock, the migrations that add them to
//! an existing database, and what they are for, with real processes: two `serve` processes on
//! one store (a SQLite file, a PostgreSQL schema) accept each other's sessions, and a session
//! outlives a restart of `serve`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod serve;
use stratum_test_support as support;

use std::time::Duration;

use reqwest::StatusCode;
use serve::{Serve, State, csrf_of, http, sign_in};
use stratum_runtime::MemoryStore;
use stratum_runtime::store::{Session, Store, Token};
use stratum_store_postgres::PostgresStore;
use stratum_store_sqlite::{SqliteOptions, SqliteStore};

fn token(name: &str, hash: &str) -> Token {
    Token {
        name: name.to_owned(),
        hash: hash.to_owned(),
        read_only: false,
        created_ms: 1_000,
        last_used_ms: None,
    }
}

fn session(token_hash: &str, csrf: &str, expires_ms: u64) -> Session {
    Session {
        token_hash: token_hash.to_owned(),
        csrf: csrf.to_owned(),
        expires_ms,
    }
}

/// A session id's hash: 64 hex digits, here all `digit`.
fn id(digit: char) -> String {
    digit.to_string().repeat(64)
}

/// What every store must do with sessions.
fn sessions_are_kept_bounded_expired_and_closed(label: &str, store: &dyn Store) {
    let (alice, bob) = ("a".repeat(64), "b".repeat(64));
    store.add_token(&token("alice", &alice)).unwrap();
    store.add_token(&token("bob", &bob)).unwrap();

    let one = session(&alice, "csrf-1", 10_000);
    store.open_session(&id('1'), &one, 1_000, 10).unwrap();
    assert_eq!(
        store.session(&id('1'), 2_000).unwrap(),
        Some(one.clone()),
        "{label}"
    );
    assert_eq!(store.session(&id('9'), 2_000).unwrap(), None, "{label}");
    assert_eq!(
        store.session(&id('1'), 10_000).unwrap(),
        None,
        "{label}: over at its expiry"
    );
    assert_eq!(
        store.session(&id('1'), 9_999).unwrap(),
        Some(one.clone()),
        "{label}: a lookup deletes nothing"
    );

    let two = session(&bob, "csrf-2", 20_000);
    store.open_session(&id('2'), &two, 1_000, 10).unwrap();
    assert!(store.close_session(&id('2')).unwrap(), "{label}");
    assert!(!store.close_session(&id('2')).unwrap(), "{label}: gone");
    assert_eq!(store.session(&id('2'), 2_000).unwrap(), None, "{label}");

    // Opening a session at 10,000 deletes the one that expired then.
    store
        .open_session(&id('3'), &session(&bob, "csrf-3", 50_000), 10_000, 10)
        .unwrap();
    assert_eq!(
        store.session(&id('1'), 0).unwrap(),
        None,
        "{label}: expired sessions go when another opens"
    );

    // At most `keep` per token: that token's sessions closest to expiry make room, never
    // another token's (a token cannot sign other people out by signing in again and again).
    store
        .open_session(&id('4'), &session(&alice, "csrf-4", 40_000), 10_000, 3)
        .unwrap();
    store
        .open_session(&id('5'), &session(&alice, "csrf-5", 30_000), 10_000, 3)
        .unwrap();
    store
        .open_session(&id('6'), &session(&bob, "csrf-6", 60_000), 10_000, 3)
        .unwrap();
    let kept = |digits: &[char]| -> Vec<char> {
        digits
            .iter()
            .copied()
            .filter(|digit| store.session(&id(*digit), 10_000).unwrap().is_some())
            .collect()
    };
    assert_eq!(
        kept(&['3', '4', '5', '6']),
        ['3', '4', '5', '6'],
        "{label}: two each, under the cap"
    );
    store
        .open_session(&id('7'), &session(&bob, "csrf-7", 70_000), 10_000, 2)
        .unwrap();
    assert_eq!(
        kept(&['3', '4', '5', '6', '7']),
        ['4', '5', '6', '7'],
        "{label}: bob's oldest went, alice's stayed"
    );
    for (digit, expires_ms) in [('8', 90_000), ('9', 95_000)] {
        store
            .open_session(&id(digit), &session(&bob, "csrf", expires_ms), 10_000, 1)
            .unwrap();
    }
    assert_eq!(
        kept(&['4', '5', '6', '7', '8', '9']),
        ['4', '5', '9'],
        "{label}: as many of bob's as it takes"
    );

    // Opening under a stored id replaces that session, and counts it once.
    let again = session(&alice, "csrf-7b", 80_000);
    store.open_session(&id('7'), &again, 10_000, 3).unwrap();
    assert_eq!(
        store.session(&id('7'), 10_000).unwrap(),
        Some(again),
        "{label}"
    );
    assert_eq!(kept(&['4', '5', '7', '9']), ['4', '5', '7', '9'], "{label}");
    store
        .open_session(&id('7'), &session(&alice, "csrf-7c", 80_000), 10_000, 2)
        .unwrap();
    assert_eq!(
        kept(&['4', '5', '7', '9']),
        ['4', '7', '9'],
        "{label}: alice's closest to expiry went"
    );

    // Revoking a token deletes its sessions, and no other.
    assert!(store.revoke_token("alice").unwrap(), "{label}");
    assert!(!store.close_session(&id('7')).unwrap(), "{label}: alice's");
    assert!(!store.close_session(&id('4')).unwrap(), "{label}: alice's");
    assert!(
        store.close_session(&id('9')).unwrap(),
        "{label}: bob's stays"
    );
    assert!(!store.revoke_token("alice").unwrap(), "{label}");
}

#[test]
fn sessions_on_the_memory_store() {
    sessions_are_kept_bounded_expired_and_closed("memory", &MemoryStore::new());
}

#[test]
fn sessions_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    sessions_are_kept_bounded_expired_and_closed("SQLite", &store);
}

#[test]
fn sessions_on_postgres() {
    let store = PostgresStore::connect(&support::postgres::database_url()).unwrap();
    sessions_are_kept_bounded_expired_and_closed("PostgreSQL", &store);
}

/// A lookup only reads: it answers while another process holds SQLite's write lock, which a
/// write would wait for (here 200 ms) and then fail on.
#[test]
fn a_session_lookup_on_sqlite_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(200),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    let kept = session(&"a".repeat(64), "csrf", 10_000);
    store.open_session(&id('1'), &kept, 1_000, 10).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(store.session(&id('1'), 2_000).unwrap(), Some(kept.clone()));
    assert_eq!(
        store.session(&id('1'), 10_000).unwrap(),
        None,
        "an expired one too"
    );
    assert!(
        store.close_session(&id('1')).is_err(),
        "a write does wait for the lock"
    );
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(store.session(&id('1'), 2_000).unwrap(), Some(kept));
}

#[test]
fn a_version_2_sqlite_database_gains_the_sessions_table_and_keeps_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    SqliteStore::open(&path)
        .unwrap()
        .add_token(&token("alice", &"a".repeat(64)))
        .unwrap();
    // As the program of schema version 2 left it: no sessions table, no checkpoint positions,
    // no drives or agent runs, no task diffs.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE sessions; ALTER TABLE checkpoints DROP COLUMN position; \
         DROP TABLE drives; DROP TABLE agent_runs; DROP TABLE task_diffs; DROP TABLE secrets; \
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.tokens().unwrap(), [token("alice", &"a".repeat(64))]);
    let kept = session(&"a".repeat(64), "csrf", 10_000);
    store.open_session(&id('1'), &kept, 1_000, 10).unwrap();
    assert_eq!(store.session(&id('1'), 2_000).unwrap(), Some(kept));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, stratum_store_sqlite::SCHEMA_VERSION);
}

#[test]
fn a_version_2_postgres_schema_gains_the_sessions_table() {
    let url = support::postgres::database_url();
    PostgresStore::connect(&url)
        .unwrap()
        .add_token(&token("alice", &"a".repeat(64)))
        .unwrap();
    support::postgres::admin(&url, |client| {
        client.batch_execute(
            "DROP TABLE stratum_sessions; \
             ALTER TABLE stratum_checkpoints DROP COLUMN position; \
             DROP TABLE stratum_drives; DROP TABLE stratum_agent_runs; \
             DROP TABLE stratum_task_diffs; DROP TABLE stratum_secrets; \
             UPDATE stratum_schema SET version = 2",
        )
    })
    .unwrap();
    let store = PostgresStore::connect(&url).unwrap();
    assert_eq!(store.tokens().unwrap(), [token("alice", &"a".repeat(64))]);
    let kept = session(&"a".repeat(64), "csrf", 10_000);
    store.open_session(&id('1'), &kept, 1_000, 10).unwrap();
    assert_eq!(store.session(&id('1'), 2_000).unwrap(), Some(kept));
    let version = support::postgres::admin(&url, |client| {
        client
            .query_one("SELECT version FROM stratum_schema", &[])
            .map(|row| row.get::<_, i64>(0))
    })
    .unwrap();
    assert_eq!(version, stratum_store_postgres::SCHEMA_VERSION);
}

/// `migrate-store` copies flows, not who is signed in (as it copies no token).
#[test]
fn a_copied_store_has_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let source = SqliteStore::open(dir.path().join("source.db")).unwrap();
    source.add_token(&token("alice", &"a".repeat(64))).unwrap();
    let kept = session(&"a".repeat(64), "csrf", 10_000);
    source.open_session(&id('1'), &kept, 1_000, 10).unwrap();
    let target = SqliteStore::open(dir.path().join("target.db")).unwrap();
    target.import(&source.export().unwrap()).unwrap();
    assert_eq!(target.session(&id('1'), 2_000).unwrap(), None);
    assert_eq!(target.tokens().unwrap(), []);
}

/// Two `serve` processes on one store, as behind a proxy: a browser signed in through the
/// first is known to the second (its pages, its CSRF-checked sign-out), and to a process
/// started after the first was killed.
async fn serve_processes_share_sessions_and_keep_them_across_a_restart(state: State) {
    let secret = state.token("alice", false);
    let mut first = Serve::start(&state, &[]);
    let second = Serve::start(&state, &[]);
    let client = http();
    let cookie = sign_in(&first, &secret).await;

    let home = client
        .get(second.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK, "the second process knows it");
    let page = home.text().await.unwrap();
    assert!(page.contains("<span>alice</span>"), "{page}");
    let csrf = csrf_of(&page);

    first.signal("KILL");
    first.wait(Duration::from_secs(10));
    let restarted = Serve::start(&state, &[]);
    let home = client
        .get(restarted.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK, "a restart signs nobody out");
    assert_eq!(csrf_of(&home.text().await.unwrap()), csrf);

    let refused = client
        .post(second.url("/signout"))
        .header("cookie", &cookie)
        .form(&[("csrf", "0".repeat(64))])
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "another CSRF token"
    );
    let out = client
        .post(second.url("/signout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    for serve in [&second, &restarted] {
        let after = client
            .get(serve.url("/"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(
            after.status(),
            StatusCode::UNAUTHORIZED,
            "signed out everywhere"
        );
    }
}

#[tokio::test]
async fn serve_processes_on_one_sqlite_file_share_sessions() {
    serve_processes_share_sessions_and_keep_them_across_a_restart(State::new()).await;
}

#[tokio::test]
async fn serve_processes_on_one_postgres_schema_share_sessions() {
    let state = State::postgres(support::postgres::database_url());
    serve_processes_share_sessions_and_keep_them_across_a_restart(state).await;
}
