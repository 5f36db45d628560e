//! What only the PostgreSQL store has to show: its schema and migrations, bounded waits with
//! clear errors, `LISTEN/NOTIFY` for `watch`, the operator commands on it, and
//! `migrate-store` from SQLite. (Everything else, scenarios, properties, kill -9 and races, runs
//! on every store in the shared suite.)

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use stratum_test_support as support;
use stratum_test_support::linear;

use std::process::Command as Process;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stratum_runtime::store::{Store, StoreError};
use stratum_runtime::{Command, Config, Runtime};
use stratum_store_postgres::{PostgresOptions, PostgresStore};
use stratum_store_sqlite::SqliteStore;
use support::Scenario;

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stratum-mcp")
}

fn admin(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("the admin connection")
}

/// A flow of `steps` linear steps started in `store` (with a fresh random id, as a server
/// would: scenarios number theirs from one fixed seed); its id.
fn start(store: Arc<dyn Store>, steps: usize) -> String {
    let plan = Arc::new(support::plan(&linear::linear_spec(steps)));
    let started = Runtime::new(store, Config::default())
        .call(&Command::Start {
            plan,
            flow: None,
            inputs: linear::inputs(),
            started_by: None,
        })
        .unwrap()
        .to_json();
    started["flow_id"].as_str().unwrap().to_owned()
}

fn step_done(runtime: &Runtime, flow: &str, index: usize) -> Result<Value, StoreError> {
    runtime
        .call(&Command::StepDone {
            flow_id: flow.to_owned(),
            step_id: linear::step_id(index),
            result: linear::result(index),
            usage: None,
        })
        .map(|response| response.to_json())
}

#[test]
fn the_schema_is_created_once_and_a_newer_one_is_refused_untouched() {
    let url = support::postgres::database_url();
    // Four processes' worth of stores opening an empty schema at once migrate it once.
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PostgresStore::connect(&url).map(drop))
        })
        .collect();
    for handle in opened {
        handle.join().unwrap().expect("the store opens");
    }
    let mut db = admin(&url);
    let version: i64 = db
        .query_one("SELECT version FROM stratum_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, stratum_store_postgres::SCHEMA_VERSION);
    let rows = db.query("SELECT * FROM stratum_schema", &[]).unwrap();
    assert_eq!(rows.len(), 1);

    db.execute("UPDATE stratum_schema SET version = 99", &[])
        .unwrap();
    let error = PostgresStore::connect(&url).err().expect("refused");
    assert!(
        matches!(error, StoreError::NewerSchema { found: 99, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("upgrade stratum-mcp"), "{error}");
    let version: i64 = db
        .query_one("SELECT version FROM stratum_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 99, "the newer database is left as it was");
}

#[test]
fn a_wrong_url_or_a_server_that_is_not_there_is_a_clear_error_not_a_hang() {
    let refused = PostgresStore::connect("postgres://u@h:notaport/db")
        .err()
        .expect("refused");
    assert!(
        refused
            .to_string()
            .contains("the database URL is not valid"),
        "{refused}"
    );

    // A port nobody listens on: refused at once, named without the password.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let began = Instant::now();
    let options = PostgresOptions {
        connect_timeout: Duration::from_secs(2),
        pool_timeout: Duration::from_secs(2),
        ..PostgresOptions::default()
    };
    let error = PostgresStore::connect_with(
        &format!("postgres://ann:secret@127.0.0.1:{port}/stratum"),
        options,
    )
    .err()
    .expect("no server");
    let message = error.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{port}/stratum")),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");
    assert!(began.elapsed() < Duration::from_secs(30), "{message}");

    // The binary says the same and exits 3.
    let output = Process::new(binary())
        .args(["query", "flows", "--json"])
        .env(
            "STRATUM_DATABASE_URL",
            format!("postgres://ann:secret@127.0.0.1:{port}/stratum"),
        )
        .env_remove("STRATUM_DB")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect to PostgreSQL"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
}

#[test]
fn a_flow_held_by_another_process_ends_in_a_clear_error_after_the_lock_timeout() {
    let url = support::postgres::database_url();
    let options = PostgresOptions {
        lock_timeout: Duration::from_millis(500),
        ..PostgresOptions::default()
    };
    let store = Arc::new(PostgresStore::connect_with(&url, options).unwrap());
    let flow = start(store.clone(), 3);
    // Another process holds the flow's row in an open transaction.
    let mut holder = admin(&url);
    let mut held = holder.transaction().unwrap();
    held.query(
        "SELECT 1 FROM stratum_flows WHERE id = $1 FOR UPDATE",
        &[&flow],
    )
    .unwrap();
    let runtime = Runtime::new(store.clone(), Config::default());
    let error = step_done(&runtime, &flow, 0).expect_err("the lock wait ends");
    let message = error.to_string();
    assert!(
        message.contains("stayed locked by another process"),
        "{message}"
    );
    assert!(message.contains(&flow), "{message}");
    held.rollback().unwrap();
    // Released, the same call goes through.
    let answer = step_done(&runtime, &flow, 0).unwrap();
    assert_eq!(answer["step_id"], json!("s1"), "{answer:#}");
}

#[test]
fn a_commit_elsewhere_wakes_a_waiting_watch() {
    let url = support::postgres::database_url();
    let watching = Arc::new(PostgresStore::connect(&url).unwrap());
    let writing: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).unwrap());
    // Listening starts with the first wait; any notification before it is not needed.
    watching.wait_for_change(Duration::from_millis(1)).unwrap();
    let flow = start(writing.clone(), 2);
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let runtime = Runtime::new(writing, Config::default());
        step_done(&runtime, &flow, 0).unwrap();
    });
    // Drain the wake-up of the start, then wait for the step.
    watching.wait_for_change(Duration::from_secs(60)).unwrap();
    let began = Instant::now();
    watching.wait_for_change(Duration::from_secs(60)).unwrap();
    writer.join().unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "the wait ran to its timeout: no notification arrived"
    );
}

#[test]
fn the_operator_commands_work_on_postgres() {
    let url = support::postgres::database_url();
    let gate_spec = r#"version: "0.2"
functions:
  approval:
    mode: gate
flows:
  main:
    input: {}
    steps:
      - id: draft
        intent: "Draft the release notes"
      - id: review
        function: approval
        on_approve: ~
        on_revise: draft
        on_kill: ~
"#;
    let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).unwrap());
    let mut s = Scenario::with(gate_spec, store, Config::default());
    s.start(None, json!({}));
    let flow = s.flow(1);
    let waiting = s.done(&flow, "draft", json!({"notes": "v1"}));
    assert_eq!(waiting["status"], json!("await_gate"), "{waiting:#}");
    let run = |args: &[&str]| {
        let output = Process::new(binary())
            .args(args)
            .env("STRATUM_DATABASE_URL", &url)
            .env_remove("STRATUM_DB")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(&["query", "gates", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let gates: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(gates[0]["flow_id"], json!(flow), "{gates:#}");

    // A watch of the flow, running while the gate is approved, follows it to its end.
    let watch = Process::new(binary())
        .args(["watch", &flow, "--json", "--interval", "60000"])
        .env("STRATUM_DATABASE_URL", &url)
        .env_remove("STRATUM_DB")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its first look shows the gate waiting; give it time to take it and start listening.
    std::thread::sleep(Duration::from_millis(1_000));

    let (code, out, err) = run(&["gate", "approve", &flow, "review", "--note", "ok", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let began = Instant::now();
    let watched = watch.wait_with_output().unwrap();
    // With a 60 s interval, only a notification can have woken it this soon.
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "watch was not woken"
    );
    assert_eq!(
        watched.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let kinds: Vec<String> = String::from_utf8_lossy(&watched.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["kind"].to_string())
        .collect();
    assert!(
        kinds.iter().any(|kind| kind.contains("gate_resolved")),
        "{kinds:?}"
    );
    assert!(
        kinds.iter().any(|kind| kind.contains("finished")),
        "{kinds:?}"
    );
    // Resolved once: a second approval is a conflict.
    let (code, _, _) = run(&["gate", "approve", &flow, "review", "--json"]);
    assert_eq!(code, Some(2));

    let (code, out, err) = run(&["query", "flow", &flow, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let state: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(state["status"], json!("complete"), "{state:#}");

    let (code, out, err) = run(&["prune", "--older-than", "0s", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let pruned: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pruned["removed_flows"], json!([flow]), "{pruned:#}");
    let (code, out, _) = run(&["query", "flows", "--json"]);
    assert_eq!((code, out.trim()), (Some(0), "[]"));

    // Both --db and --database-url: a usage error.
    let output = Process::new(binary())
        .args(["query", "flows", "--db", "/nonexistent/state.db"])
        .env("STRATUM_DATABASE_URL", &url)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn migrate_store_copies_a_sqlite_state_whole_and_verifies_it() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite_path = dir.path().join("stratum.db");
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&sqlite_path).unwrap());
    // Some state: a finished flow, one half-way, with audit records, and a checkpoint.
    let finished = start(sqlite.clone(), 2);
    let runtime = Runtime::new(sqlite.clone(), Config::default());
    step_done(&runtime, &finished, 0).unwrap();
    step_done(&runtime, &finished, 1).unwrap();
    let running = start(sqlite.clone(), 3);
    step_done(&runtime, &running, 0).unwrap();
    runtime
        .call(&Command::Commit {
            flow_id: running.clone(),
            label: "halfway".into(),
        })
        .unwrap();
    let before = sqlite.export().unwrap();
    drop((runtime, sqlite));

    let url = support::postgres::database_url();
    let migrate = |to: &str| {
        Process::new(binary())
            .args([
                "migrate-store",
                "--from",
                &format!("sqlite:{}", sqlite_path.display()),
                "--to",
                to,
                "--json",
            ])
            .env_remove("STRATUM_DATABASE_URL")
            .env_remove("STRATUM_DB")
            .output()
            .unwrap()
    };
    let output = migrate(&url);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["verified"], json!(true), "{report:#}");
    assert_eq!(report["source"], report["target"]);
    assert_eq!(report["source"]["flows"], json!(2));
    assert_eq!(report["source"]["checkpoints"], json!(1));
    assert!(
        report["source"]["events"].as_u64().unwrap() >= 3,
        "{report:#}"
    );
    assert_eq!(report["source_checksum"], json!(before.checksum()));

    // The copy is the state: PostgreSQL holds the same rows, and the flow goes on there.
    let postgres: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url).unwrap());
    assert_eq!(postgres.export().unwrap(), before);
    let runtime = Runtime::new(postgres.clone(), Config::default());
    let answer = step_done(&runtime, &running, 1).unwrap();
    assert_eq!(answer["step_id"], json!("s2"), "{answer:#}");
    // A flow started after the copy is numbered after the copied ones.
    let newer = start(postgres.clone(), 1);
    let listed: Vec<String> = postgres
        .list_flows()
        .unwrap()
        .iter()
        .map(|header| header.id.to_string())
        .collect();
    assert_eq!(listed, vec![newer, running, finished]);

    // Into a store that holds flows: refused, exit 2, nothing written.
    let output = migrate(&url);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already holds 3 flows"), "{stderr}");

    // From a file that is not there: refused, exit 2.
    let output = Process::new(binary())
        .args([
            "migrate-store",
            "--from",
            "sqlite:/nonexistent/stratum.db",
            "--to",
            &support::postgres::database_url(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));

    // And back: PostgreSQL into a new SQLite file gives the same rows again.
    let back = dir.path().join("back.db");
    let output = Process::new(binary())
        .args([
            "migrate-store",
            "--from",
            &url,
            "--to",
            &format!("sqlite:{}", back.display()),
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let copied = SqliteStore::open(&back).unwrap().export().unwrap();
    assert_eq!(copied, postgres.export().unwrap());
}

/// The test harness drops test schemas more than a day old, so a long-lived test server does
/// not pile them up, and leaves recent ones (another run's, maybe still going) alone.
#[test]
fn test_schemas_older_than_a_day_are_dropped_by_a_later_run() {
    let server = support::postgres::server_url();
    let old = format!("stratum_test_1000_{}_sweep", std::process::id());
    let schemas = |client: &mut postgres::Client| -> Result<Vec<String>, postgres::Error> {
        Ok(client
            .query(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stratum\\_test\\_%'",
                &[],
            )?
            .iter()
            .map(|row| row.get(0))
            .collect())
    };
    support::postgres::admin(server, |client| {
        client.batch_execute(&format!("CREATE SCHEMA {old}"))
    })
    .unwrap();
    let recent = support::postgres::database_url();
    let recent = recent.rsplit("search_path%3D").next().unwrap().to_owned();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    support::postgres::sweep_old_schemas(server, now);
    let left = support::postgres::admin(server, schemas).unwrap();
    assert!(!left.contains(&old), "the old schema was dropped");
    assert!(left.contains(&recent), "a recent schema stays: {recent}");
}

/// `flow_versions` (what the console's change feed reads instead of every header) says what
/// the headers say, on every store.
#[test]
fn every_store_lists_each_flows_version_as_its_header_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let stores: [(&str, Arc<dyn Store>); 3] = [
        ("memory", Arc::new(stratum_runtime::MemoryStore::new())),
        (
            "SQLite",
            Arc::new(SqliteStore::open(dir.path().join("state.db")).unwrap()),
        ),
        (
            "PostgreSQL",
            Arc::new(PostgresStore::connect(&support::postgres::database_url()).unwrap()),
        ),
    ];
    for (name, store) in stores {
        let mut scenario =
            Scenario::with(&linear::linear_spec(3), store.clone(), Config::default());
        for _ in 0..3 {
            scenario.start(None, linear::inputs());
        }
        let first = scenario.flow(1);
        scenario.done(&first, &linear::step_id(0), linear::result(0));
        let mut versions = store.flow_versions().unwrap();
        let mut headers: Vec<_> = store
            .list_flows()
            .unwrap()
            .into_iter()
            .map(|header| (header.id, header.version))
            .collect();
        versions.sort();
        headers.sort();
        assert_eq!(versions.len(), 3, "{name}");
        assert_eq!(versions, headers, "{name}");
        assert!(
            versions.iter().any(|(_, version)| *version > 1),
            "{name}: a flow moved"
        );
    }
}

/// `stratum-mcp doctor --json` on the database `url`: the `store` and `store_tls` checks and
/// the exit status.
fn doctor_of(url: &str) -> (i32, Value, Value) {
    let output = Process::new(binary())
        .args(["--database-url", url, "doctor", "--json"])
        .env_remove("STRATUM_DATABASE_URL")
        .env_remove("STRATUM_SERVE_URL")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|check| check["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    (
        output.status.code().unwrap_or(-1),
        check("store"),
        check("store_tls"),
    )
}

#[test]
fn doctor_reads_the_schema_without_migrating_and_says_what_tls_is_in_effect() {
    let url = support::postgres::database_url();
    // A database no stratum-mcp used: reachable, left untouched.
    let (status, store, tls) = doctor_of(&url);
    assert_eq!((status, &store["status"]), (0, &json!("ok")), "{store:#}");
    assert!(
        store["detail"]
            .as_str()
            .unwrap()
            .contains("no stratum-mcp has used it yet")
    );
    let mut db = admin(&url);
    let made: bool = db
        .query_one("SELECT to_regclass('stratum_schema') IS NOT NULL", &[])
        .unwrap()
        .get(0);
    assert!(!made, "doctor created the schema table");
    // The default sslmode checks no certificate: a warning with its fix, not a failure.
    assert_eq!(tls["status"], "warning", "{tls:#}");
    assert!(tls["fix"].as_str().unwrap().contains("sslmode=verify-full"));

    PostgresStore::connect(&url).map(drop).unwrap();
    let (status, store, _) = doctor_of(&url);
    assert_eq!(status, 0);
    assert!(
        store["detail"].as_str().unwrap().contains("(current)"),
        "{store:#}"
    );
    db.execute("UPDATE stratum_schema SET version = 99", &[])
        .unwrap();
    let (status, store, _) = doctor_of(&url);
    assert_eq!(
        (status, &store["status"]),
        (1, &json!("problem")),
        "{store:#}"
    );

    // A server that is not there: a problem, quickly.
    let (status, store, _) = doctor_of("postgres://nobody@127.0.0.1:9/nothing");
    assert_eq!(
        (status, &store["status"]),
        (1, &json!("problem")),
        "{store:#}"
    );
}
