//! The SQLite store under the scenario driver: flows driven to completion and read back after
//! a restart, the files' permissions, a newer schema and a hand-edited plan refused, a hostile
//! flow id, two handles on one file (no stale state), a differential run of the same
//! scripted commands against the memory store and SQLite, and concurrent calls in one process:
//! a call in progress holds up no other flow, and a call whose flow moved under it runs again.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use stratum_test_support as support;
use stratum_test_support::linear;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use stratum_runtime::store::Snapshot;
use stratum_runtime::{Command, Config, MemoryStore, Store, StoreError};
use stratum_store_sqlite::SqliteStore;
use support::Scenario;

const SENTIMENT: &str = include_str!("../../../examples/sentiment.stratum.yaml");
const REVIEWED_WORK: &str = include_str!("../../../examples/reviewed-work.stratum.yaml");
const TEST_FIX_LOOP: &str = include_str!("../../../examples/test-fix-loop.stratum.yaml");
const CODE_REVIEW: &str = include_str!("../../../examples/code-review.stratum.yaml");
const DEPLOY: &str = include_str!("../../../examples/deploy.stratum.yaml");

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state").join("stratum.db")
}

fn open(path: &Path) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(path).expect("the store opens"))
}

fn status(response: &Value) -> &str {
    response
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn error_type(response: &Value) -> &str {
    response
        .get("error_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("the file exists")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_flow_completes_and_its_audit_survives_a_restart() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut s = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    s.start(Some("reviewed_work"), json!({"text": "draft"}));
    let flow = s.flow(1);
    s.done(&flow, "work", json!({"result": "v1", "quality_score": 0.5}));
    s.done(&flow, "work", json!({"result": "v1", "quality_score": 0.9}));
    s.gate(&flow, "review", "revise", "tighten it", "human");
    s.done(
        &flow,
        "work",
        json!({"result": "v2", "quality_score": 0.95}),
    );
    let done = s.gate(&flow, "review", "approve", "good", "human");
    assert_eq!(status(&done), "complete", "{done:#}");
    let before = s.audit(&flow);
    let now = s.now_ms;
    drop(s);

    // A restart: a new store on the same file, in a new driver.
    let mut again = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    again.now_ms = now;
    let after = again.audit(&flow);
    assert_eq!(before, after);
    assert_eq!(status(&after), "complete");
    assert_eq!(after["round"], json!(1));
    let resumed = again.resume(&flow);
    assert_eq!(status(&resumed), "complete", "{resumed:#}");
}

#[test]
fn a_version_3_database_keeps_its_checkpoints_in_commit_order() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut s = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    s.start(Some("reviewed_work"), json!({"text": "draft"}));
    let flow = s.flow(1);
    s.commit(&flow, "zeta");
    s.commit(&flow, "alpha");
    drop(s);
    // As the program of schema version 3 left it: no position column, no drives, runs or task
    // diffs.
    let conn = rusqlite::Connection::open(&path).expect("the database opens");
    conn.execute_batch(
        "ALTER TABLE checkpoints DROP COLUMN position; DROP TABLE drives; \
         DROP TABLE agent_runs; DROP TABLE task_diffs; DROP TABLE secrets;
         PRAGMA user_version = 3;",
    )
    .expect("the schema is taken back to version 3");
    drop(conn);
    let mut again = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    let listed = again.revert(&flow, "omega");
    assert_eq!(
        listed["available"],
        json!(["zeta", "alpha"]),
        "the rows' insertion order is their commit order"
    );
    let third = again.commit(&flow, "beta");
    assert_eq!(third["checkpoints"], json!(["zeta", "alpha", "beta"]));
}

#[cfg(unix)]
#[test]
fn the_directory_is_private_and_the_files_are_the_users_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("home").join("nested").join("stratum.db");
    let mut s = Scenario::with(SENTIMENT, open(&path), Config::default());
    s.start(Some("run"), json!({"text": "fine"}));
    assert_eq!(mode(&dir.path().join("home")), 0o700);
    assert_eq!(mode(&dir.path().join("home").join("nested")), 0o700);
    assert_eq!(mode(&path), 0o600);
    for suffix in ["-wal", "-shm"] {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        let file = PathBuf::from(name);
        assert!(
            file.exists(),
            "{} exists while the store is open",
            file.display()
        );
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    // An existing database with a looser mode is tightened on open.
    drop(s);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod");
    let _store = open(&path);
    assert_eq!(mode(&path), 0o600);
}

/// Run in a child process with `STRATUM_HOME` set (a test may not change its own
/// environment): `open_default` puts the database in `$STRATUM_HOME`, made private.
#[test]
fn default_path_child() {
    let Some(home) = std::env::var_os("STRATUM_SQLITE_DEFAULT_CHILD") else {
        return;
    };
    let home = PathBuf::from(home);
    assert_eq!(
        std::env::var_os("STRATUM_HOME"),
        Some(home.clone().into_os_string())
    );
    assert_eq!(
        SqliteStore::default_path().expect("a default path"),
        home.join("stratum.db")
    );
    let store = SqliteStore::open_default().expect("the default store opens");
    assert_eq!(store.path(), home.join("stratum.db"));
    println!("default store opened");
}

#[cfg(unix)]
#[test]
fn open_default_uses_stratum_home() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let home = dir.path().join("stratum-home");
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "default_path_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STRATUM_SQLITE_DEFAULT_CHILD", &home)
        .env("STRATUM_HOME", &home)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("default store opened"), "{stdout}");
    assert_eq!(mode(&home), 0o700);
    assert_eq!(mode(&home.join("stratum.db")), 0o600);
}

#[test]
fn a_database_from_a_newer_program_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stratum.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .expect("a future schema");
    }
    let error = match SqliteStore::open(&path) {
        Ok(_) => panic!("a newer database must be refused"),
        Err(error) => error,
    };
    assert!(
        matches!(
            error,
            StoreError::NewerSchema {
                found: 99,
                supported: stratum_store_sqlite::SCHEMA_VERSION
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the state database has schema version 99, newer than this program's {}; upgrade \
             stratum-mcp, or use another state database",
            stratum_store_sqlite::SCHEMA_VERSION
        )
    );
    let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("user_version");
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(
        (version, journal.as_str()),
        (99, "delete"),
        "the database is untouched"
    );
}

#[test]
fn processes_opening_a_new_database_at_once_all_succeed() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                SqliteStore::open(&path).map(|store| store.list_flows().map(|flows| flows.len()))
            })
        })
        .collect();
    for thread in threads {
        let opened = thread.join().expect("the thread ends");
        assert!(matches!(opened, Ok(Ok(0))), "{opened:?}");
    }
}

#[test]
fn reopening_an_up_to_date_database_migrates_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("stratum.db");
    drop(open(&path));
    drop(open(&path));
    let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("user_version");
    assert_eq!(version, stratum_store_sqlite::SCHEMA_VERSION);
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(journal, "wal");
}

#[test]
fn a_hand_edited_plan_is_refused_not_run() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut s = Scenario::with(SENTIMENT, open(&path), Config::default());
    s.start(Some("run"), json!({"text": "I love it"}));
    let flow = s.flow(1);
    drop(s);
    {
        let conn = rusqlite::Connection::open(&path).expect("sqlite opens");
        let changed = conn
            .execute(
                "UPDATE plans SET json = replace(json, 'Classify the sentiment', 'Classify the sentimenT')",
                [],
            )
            .expect("the plan is edited");
        assert_eq!(changed, 1);
    }
    let mut s = Scenario::with(SENTIMENT, open(&path), Config::default());
    let sent = Command::StepDone {
        flow_id: flow.clone(),
        step_id: "s1".to_owned(),
        result: json!({"label": "positive", "confidence": 0.9}),
        usage: None,
    };
    match s.raw(&sent) {
        Err(StoreError::Corrupt(message)) => {
            assert!(message.contains("checksum does not match"), "{message}");
        }
        other => panic!("an edited plan must be refused, got {other:?}"),
    }
    // Nothing moved: the flow's row is as it was.
    let header = read_header(s.store.as_ref(), &flow);
    assert_eq!(header.get("version"), Some(&json!(1)));
}

fn read_header(store: &dyn Store, flow: &str) -> Value {
    let id = stratum_runtime::FlowId::parse(flow).expect("a flow id");
    let mut found = None;
    store
        .read(&mut |snapshot: &mut dyn Snapshot| {
            found = snapshot.flow(&id)?;
            Ok(())
        })
        .expect("a read");
    serde_json::to_value(found.expect("the flow exists")).expect("json")
}

#[test]
fn a_hostile_flow_id_is_not_found_and_touches_no_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut s = Scenario::with(SENTIMENT, open(&path), Config::default());
    s.start(Some("run"), json!({"text": "I love it"}));
    let listing = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("a listing")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    let before = (listing(dir.path()), listing(&dir.path().join("state")));
    for hostile in [
        "../../etc/passwd",
        "/etc/passwd",
        "stratum.db",
        "x' OR '1'='1",
        "",
    ] {
        for command in [
            Command::Resume {
                flow_id: hostile.to_owned(),
            },
            Command::Audit {
                flow_id: hostile.to_owned(),
            },
            Command::StepDone {
                flow_id: hostile.to_owned(),
                step_id: "s1".to_owned(),
                result: json!({}),
                usage: None,
            },
        ] {
            let response = s.raw(&command).expect("an answer").to_json();
            assert_eq!(
                error_type(&response),
                "flow_not_found",
                "{hostile}: {response:#}"
            );
        }
    }
    assert_eq!(
        before,
        (listing(dir.path()), listing(&dir.path().join("state")))
    );
    assert_eq!(s.store.list_flows().expect("flows").len(), 1);
}

#[test]
fn a_gate_approved_through_another_handle_is_seen_at_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut a = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    let mut b = Scenario::with(REVIEWED_WORK, open(&path), Config::default());
    a.start(Some("reviewed_work"), json!({"text": "draft"}));
    let flow = a.flow(1);
    let gate = a.done(&flow, "work", json!({"result": "v1", "quality_score": 0.9}));
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    let approved = b.gate(&flow, "review", "approve", "ship it", "human");
    assert_eq!(status(&approved), "complete", "{approved:#}");
    // A's next calls read the flow again: no stale copy of it waits at the gate.
    let resumed = a.resume(&flow);
    assert_eq!(status(&resumed), "complete", "{resumed:#}");
    let again = a.gate(&flow, "review", "revise", "too late", "human");
    assert_eq!(error_type(&again), "flow_already_complete", "{again:#}");
}

#[test]
fn a_stale_handle_cannot_complete_a_step_twice() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let spec = linear::linear_spec(3);
    let mut a = Scenario::with(&spec, open(&path), Config::default());
    let mut b = Scenario::with(&spec, open(&path), Config::default());
    a.start(None, linear::inputs());
    let flow = a.flow(1);
    let next = b.done(&flow, "s0", linear::result(0));
    assert_eq!(next.get("step_id"), Some(&json!("s1")), "{next:#}");
    let stale = a.done(&flow, "s0", linear::result(0));
    assert_eq!(error_type(&stale), "wrong_step", "{stale:#}");
    assert_eq!(stale.get("step_id"), Some(&json!("s1")), "{stale:#}");
    let audit = a.audit(&flow);
    let steps: Vec<&Value> = audit["trace"]
        .as_array()
        .expect("a trace")
        .iter()
        .map(|r| &r["step_id"])
        .collect();
    assert_eq!(steps, [&json!("s0")]);
}

#[test]
fn every_flow_is_listed_newest_first() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut s = Scenario::with(SENTIMENT, open(&path), Config::default());
    for text in ["one", "two", "three"] {
        s.start(Some("run"), json!({"text": text}));
    }
    let listed: Vec<String> = s
        .store
        .list_flows()
        .expect("flows")
        .iter()
        .map(|header| header.id.to_string())
        .collect();
    assert_eq!(listed, [s.flow(3), s.flow(2), s.flow(1)]);
}

/// A result nested deeper than `serde_json`'s default limit of 128 (but within the runtime's
/// 256) is stored, read back, and reported, as the memory store does.
#[test]
fn a_deeply_nested_result_reads_back() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let spec = linear::linear_spec(2);
    let mut deep = json!("bottom");
    for _ in 0..120 {
        deep = json!({"d": [deep]});
    }
    let mut result = linear::result(0);
    result["note"] = json!("deep");
    result["extra"] = deep;
    let mut outputs = Vec::new();
    for store in [open(&path) as Arc<dyn Store>, Arc::new(MemoryStore::new())] {
        let mut s = Scenario::with(&spec, store, Config::default());
        s.start(None, linear::inputs());
        let flow = s.flow(1);
        let next = s.done(&flow, "s0", result.clone());
        assert_eq!(next.get("step_id"), Some(&json!("s1")), "{next:#}");
        let done = s.done(&flow, "s1", result.clone());
        assert_eq!(status(&done), "complete", "{done:#}");
        outputs.push((next, done, s.audit(&flow)));
    }
    assert_eq!(outputs[0], outputs[1]);
    // And after a restart.
    let mut s = Scenario::with(&spec, open(&path), Config::default());
    let flow = outputs[0].0["flow_id"].as_str().expect("an id").to_owned();
    s.now_ms = support::EPOCH_MS;
    assert_eq!(s.audit(&flow), outputs[0].2);
}

// The differential check: one scripted agent, two stores, identical answers.

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[derive(Clone, Debug)]
enum Pending {
    Step {
        step: String,
        fields: BTreeMap<String, String>,
        iterative: bool,
    },
    Gate {
        step: String,
    },
}

/// An agent that answers what it is asked, often well, sometimes badly, and now and then
/// does something else entirely (commits, reverts, resumes, waits, starts another flow).
struct Agent {
    rng: Rng,
    start_flow: Option<String>,
    inputs: Value,
    flows: Vec<String>,
    pending: BTreeMap<String, Pending>,
}

impl Agent {
    fn learn(&mut self, response: &Value) {
        for key in ["flow_id", "child_flow_id", "parent_flow_id"] {
            if let Some(id) = response.get(key).and_then(Value::as_str)
                && stratum_runtime::FlowId::parse(id).is_some()
                && !self.flows.iter().any(|known| known == id)
            {
                self.flows.push(id.to_owned());
            }
        }
        let flow = response
            .get("flow_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let step = response
            .get("step_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match status(response) {
            "execute_step" | "ensure_failed" | "schema_failed" | "guardrail_blocked" => {
                let fields = response
                    .get("output_fields")
                    .and_then(Value::as_object)
                    .map(|fields| {
                        fields
                            .iter()
                            .map(|(name, kind)| {
                                (name.clone(), kind.as_str().unwrap_or("string").to_owned())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let iterative = response
                    .get("max_iterations")
                    .is_some_and(|max| !max.is_null());
                self.pending.insert(
                    flow,
                    Pending::Step {
                        step,
                        fields,
                        iterative,
                    },
                );
            }
            "await_gate" => {
                self.pending.insert(flow, Pending::Gate { step });
            }
            "execute_flow" => {
                if let Some(parent) = response.get("parent_flow_id").and_then(Value::as_str) {
                    self.pending.remove(parent);
                }
                if let Some(child) = response.get("child_step") {
                    self.learn(child);
                }
            }
            "complete" | "killed" | "budget_exhausted" | "failed" => {
                self.pending.remove(&flow);
            }
            "error" => {
                let ended = response.get("flow_status").is_some()
                    || matches!(
                        error_type(response),
                        "retries_exhausted" | "output_contract_failed" | "routing_loop"
                    );
                if ended {
                    self.pending.remove(&flow);
                }
            }
            _ => {}
        }
    }

    fn value(&mut self, kind: &str) -> Value {
        match kind {
            "number" => self.rng.pick(&[json!(0.0), json!(0.5), json!(0.95), json!(1.0), json!(3)]).clone(),
            "integer" => json!(self.rng.below(3)),
            "boolean" => json!(self.rng.chance(70)),
            "array" => self
                .rng
                .pick(&[
                    json!([]),
                    json!([{"id": "a", "file": "f.rs", "line": 1, "severity": "low", "message": "m"}]),
                    json!(["x.rs"]),
                ])
                .clone(),
            "object" => json!({}),
            _ => self
                .rng
                .pick(&[json!("ok"), json!(""), json!("https://x"), json!("low"), json!("a.tar.gz"), json!("approve")])
                .clone(),
        }
    }

    fn result(&mut self, fields: &BTreeMap<String, String>) -> Value {
        if self.rng.chance(5) {
            return json!("not an object");
        }
        let mut result = serde_json::Map::new();
        for (name, kind) in fields {
            if self.rng.chance(95) {
                let value = self.value(kind);
                result.insert(name.clone(), value);
            }
        }
        if fields.is_empty() {
            result.insert("summary".to_owned(), json!("done"));
        }
        Value::Object(result)
    }

    /// The next command (and the clock's move before it, in ms).
    fn next(&mut self, plan: &stratum_compiler::plan::Plan) -> (u64, Command) {
        let mut wait = 0;
        if self.rng.chance(4) {
            wait = *self.rng.pick(&[1_000, 60_000, 4_000_000]);
        }
        let pending: Vec<(String, Pending)> = self
            .pending
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !pending.is_empty() && self.rng.chance(75) {
            let (flow_id, what) = self.rng.pick(&pending).clone();
            let command = match what {
                Pending::Gate { step } => {
                    let outcome = *self
                        .rng
                        .pick(&["approve", "approve", "approve", "revise", "kill"]);
                    Command::GateResolve {
                        flow_id,
                        step_id: step,
                        outcome: outcome.to_owned(),
                        rationale: "because".to_owned(),
                        resolved_by: self.rng.pick(&["human", "agent"]).to_string(),
                        actor: None,
                        via: None,
                        round: None,
                        value: None,
                    }
                }
                Pending::Step {
                    step,
                    fields,
                    iterative,
                } => {
                    let roll = self.rng.below(100);
                    if iterative && roll < 20 {
                        Command::IterationStart {
                            flow_id,
                            step_id: step,
                        }
                    } else if iterative && roll < 45 {
                        let result = self.result(&fields);
                        Command::IterationReport {
                            flow_id,
                            step_id: step,
                            result,
                        }
                    } else if iterative && roll < 48 {
                        Command::IterationAbort {
                            flow_id,
                            step_id: step,
                            reason: "stuck".to_owned(),
                        }
                    } else if roll > 94 {
                        Command::SkipStep {
                            flow_id,
                            step_id: step,
                            reason: "not needed".to_owned(),
                        }
                    } else {
                        let result = self.result(&fields);
                        let usage = self.rng.chance(20).then(|| {
                            json!({"input_tokens": 1000, "output_tokens": 500, "model": "claude-sonnet-4"})
                        });
                        Command::StepDone {
                            flow_id,
                            step_id: step,
                            result,
                            usage,
                        }
                    }
                }
            };
            return (wait, command);
        }
        if pending.is_empty() && self.rng.chance(60) {
            let command = Command::Start {
                plan: Arc::new(plan.clone()),
                flow: self.start_flow.clone(),
                inputs: self.inputs.clone(),
                started_by: None,
            };
            return (wait, command);
        }
        // Mostly flows that are still running: a finished one only says so.
        let running: Vec<String> = pending.iter().map(|(flow, _)| flow.clone()).collect();
        let flows = if !running.is_empty() && self.rng.chance(70) {
            running
        } else if self.flows.is_empty() {
            vec!["00000000-0000-4000-8000-000000000000".to_owned()]
        } else {
            self.flows.clone()
        };
        let flow_id = self.rng.pick(&flows).clone();
        let label = self.rng.pick(&["a", "b", "nope"]).to_string();
        let command = match self.rng.below(9) {
            0 => Command::Commit { flow_id, label },
            1 | 2 => Command::Revert { flow_id, label },
            3 => Command::Resume { flow_id },
            4 => Command::Audit { flow_id },
            5 => Command::CheckTimeouts { flow_id },
            6 => Command::Start {
                plan: Arc::new(plan.clone()),
                flow: self.start_flow.clone(),
                inputs: self.inputs.clone(),
                started_by: None,
            },
            7 => {
                let steps: Vec<String> = plan
                    .flows
                    .iter()
                    .flat_map(|flow| flow.steps.iter().map(|step| step.id.clone()))
                    .collect();
                Command::StepDone {
                    flow_id,
                    step_id: self.rng.pick(&steps).clone(),
                    result: json!({}),
                    usage: None,
                }
            }
            _ => Command::Resume {
                flow_id: "00000000-0000-4000-8000-000000000000".to_owned(),
            },
        };
        (wait, command)
    }
}

fn differential(spec: &str, start_flow: Option<&str>, inputs: Value, seed: u64, commands: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut memory = Scenario::with(spec, Arc::new(MemoryStore::new()), Config::default());
    let mut sqlite = Scenario::with(spec, open(&db_in(&dir)), Config::default());
    let mut agent = Agent {
        rng: Rng(seed | 1),
        start_flow: start_flow.map(str::to_owned),
        inputs: inputs.clone(),
        flows: Vec::new(),
        pending: BTreeMap::new(),
    };
    let first = memory.start(start_flow, inputs.clone());
    let second = sqlite.start(start_flow, inputs);
    assert_eq!(first, second);
    assert!(
        !status(&first).is_empty() && status(&first) != "error",
        "the flow starts: {first:#}"
    );
    agent.learn(&first);
    let plan = memory.plan.clone();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for number in 0..commands {
        let (wait, command) = agent.next(&plan);
        memory.now_ms += wait;
        sqlite.now_ms += wait;
        let label = match &command {
            Command::Start { .. } => "start".to_owned(),
            other => format!("{other:?}"),
        };
        let from_memory = memory.run(&label, command.clone());
        let from_sqlite = sqlite.run(&label, command);
        assert_eq!(
            from_memory, from_sqlite,
            "seed {seed}, command {number}: the stores disagree on {label}"
        );
        let key = match error_type(&from_memory) {
            "" => status(&from_memory).to_owned(),
            error => format!("error:{error}"),
        };
        *statuses.entry(key).or_default() += 1;
        agent.learn(&from_memory);
    }
    let listed = |store: &Arc<dyn Store>| {
        store
            .list_flows()
            .expect("flows")
            .into_iter()
            .map(|header| serde_json::to_value(header).expect("json"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        listed(&memory.store),
        listed(&sqlite.store),
        "seed {seed}: the flows differ"
    );
    for flow in agent.flows.clone() {
        let command = Command::Audit { flow_id: flow };
        assert_eq!(
            memory.run("audit", command.clone()),
            sqlite.run("audit", command),
            "seed {seed}: the audits differ"
        );
    }
    eprintln!("seed {seed}: {statuses:?}");
}

#[test]
fn the_memory_and_sqlite_stores_answer_alike() {
    let cases: [(&str, &str, Option<&str>, Value); 5] = [
        (
            "sentiment",
            SENTIMENT,
            Some("run"),
            json!({"text": "I love it"}),
        ),
        (
            "reviewed-work",
            REVIEWED_WORK,
            Some("reviewed_work"),
            json!({"text": "draft"}),
        ),
        (
            "test-fix-loop",
            TEST_FIX_LOOP,
            Some("test_fix_loop"),
            json!({"repo": ".", "command": "cargo test"}),
        ),
        (
            "code-review",
            CODE_REVIEW,
            None,
            json!({"files": ["a.rs"], "base_ref": "main", "depth": "standard"}),
        ),
        (
            "deploy",
            DEPLOY,
            None,
            json!({"project": "svc", "git_sha": "abc123", "environment": "staging"}),
        ),
    ];
    // A new seed each run (printed), or the one in STRATUM_DIFFERENTIAL_SEED to replay a failure.
    let base = std::env::var("STRATUM_DIFFERENTIAL_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |elapsed| elapsed.as_nanos() as u64)
        });
    eprintln!("differential base seed {base} (replay with STRATUM_DIFFERENTIAL_SEED={base})");
    for (number, (name, spec, flow, inputs)) in cases.into_iter().enumerate() {
        for round in 0..2u64 {
            let seed = base.wrapping_add(round * 7919 + number as u64 * 104_729);
            eprintln!("{name}: seed {seed}");
            differential(spec, flow, inputs.clone(), seed, 300);
        }
    }
}

/// Reference bugs 23 and 25: a running flow keeps the plan it started with, whatever happens
/// to its spec (edited and recompiled, a new flow started on the new plan, the process
/// restarted); and a start that fails leaves nothing behind.
#[test]
fn reference_bugs_23_and_25_a_flow_runs_on_the_plan_it_started_with() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = db_in(&dir);
    let mut before = Scenario::with(SENTIMENT, open(&path), Config::default());
    let refused = before.start(Some("run"), json!({"txt": "typo"}));
    assert_eq!(error_type(&refused), "invalid_inputs");
    assert!(
        before.store.list_flows().expect("flows").is_empty(),
        "a failed start keeps no flow"
    );
    before.start(Some("run"), json!({"text": "I love it"}));
    let old_flow = before.flow(1);
    drop(before);

    // The spec is edited (a stricter ensure) and a flow is started on the new plan.
    let stricter = SENTIMENT.replace("result.confidence > 0.7", "result.confidence > 0.99");
    assert_ne!(stricter, SENTIMENT, "the edit applies");
    let mut after = Scenario::with(&stricter, open(&path), Config::default());
    after.start(Some("run"), json!({"text": "meh"}));
    let new_flow = after.flow(1);
    let result = json!({"label": "positive", "confidence": 0.9});
    let old = after.done(&old_flow, "s1", result.clone());
    assert_eq!(
        status(&old),
        "complete",
        "the old flow keeps its own ensure: {old:#}"
    );
    let new = after.done(&new_flow, "s1", result);
    assert_eq!(
        status(&new),
        "ensure_failed",
        "the new flow runs the new ensure: {new:#}"
    );
    let plans: i64 = rusqlite::Connection::open(&path)
        .expect("sqlite opens")
        .query_row("SELECT count(*) FROM plans", [], |row| row.get(0))
        .expect("plans are counted");
    assert_eq!(plans, 2, "each plan is stored once, by checksum");
}

/// Runs `command` through the store like `execute`, but calls `pause` between the command's
/// read and its write (on the first run only), so that a test can interleave another call.
fn execute_pausing(
    store: &dyn Store,
    command: &Command,
    pause: &mut dyn FnMut(),
) -> stratum_runtime::Response {
    let ctx = stratum_runtime::Context::new(
        stratum_runtime::now_ms(),
        stratum_runtime::fresh_seed(),
        Arc::new(Config::default()),
    );
    let mut response = None;
    let mut first = true;
    store
        .transact(&mut |snapshot| {
            let mut work = stratum_runtime::exec::Work::new(snapshot);
            response = Some(stratum_runtime::exec::run(&mut work, command, &ctx)?);
            if std::mem::take(&mut first) {
                pause();
            }
            Ok(work.into_changes(ctx.now_ms))
        })
        .expect("the command commits");
    response.expect("the command ran")
}

fn started(store: &Arc<SqliteStore>, spec: &str, flow: &str, inputs: Value) -> String {
    let response = stratum_runtime::Runtime::new(store.clone(), Config::default())
        .call(&Command::Start {
            plan: Arc::new(support::plan(spec)),
            flow: Some(flow.to_owned()),
            inputs,
            started_by: None,
        })
        .expect("the flow starts")
        .to_json();
    response["flow_id"].as_str().unwrap().to_owned()
}

#[test]
fn a_call_in_progress_holds_up_no_call_on_another_flow() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = open(&db_in(&dir));
    let slow_flow = started(&store, SENTIMENT, "run", json!({"text": "a"}));
    let (entered, wait_for_entered) = std::sync::mpsc::channel();
    let (release, wait_for_release) = std::sync::mpsc::channel::<()>();
    let slow = {
        let store = store.clone();
        std::thread::spawn(move || {
            let command = Command::StepDone {
                flow_id: slow_flow,
                step_id: "s1".to_owned(),
                result: json!({"label": "positive", "confidence": 0.9}),
                usage: None,
            };
            execute_pausing(store.as_ref(), &command, &mut || {
                entered.send(()).unwrap();
                // Stands for a slow evaluation: it lasts until the other call has committed.
                wait_for_release
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .expect("the other call finished while this one was in progress");
            })
        })
    };
    wait_for_entered.recv().unwrap();
    let other = started(&store, SENTIMENT, "run", json!({"text": "b"}));
    let runtime = stratum_runtime::Runtime::new(store.clone(), Config::default());
    let done = runtime
        .call(&Command::StepDone {
            flow_id: other,
            step_id: "s1".to_owned(),
            result: json!({"label": "negative", "confidence": 0.8}),
            usage: None,
        })
        .unwrap()
        .to_json();
    assert_eq!(status(&done), "complete");
    release.send(()).unwrap();
    assert_eq!(status(&slow.join().unwrap().to_json()), "complete");
}

#[test]
fn a_call_whose_flow_moved_under_it_runs_again_on_fresh_state() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = open(&db_in(&dir));
    let flow = started(&store, REVIEWED_WORK, "reviewed_work", json!({"text": "t"}));
    let done = |quality: f64| Command::StepDone {
        flow_id: flow.clone(),
        step_id: "work".to_owned(),
        result: json!({"result": format!("r{quality}"), "quality_score": quality}),
        usage: None,
    };
    let runtime = stratum_runtime::Runtime::new(store.clone(), Config::default());
    // The first call reads the flow at `work`; before it writes, a second call completes
    // `work`. The first must not complete it again: it runs again and finds the flow at the
    // gate.
    let late = execute_pausing(store.as_ref(), &done(0.9), &mut || {
        let first = runtime.call(&done(0.95)).unwrap().to_json();
        assert_eq!(status(&first), "await_gate");
    })
    .to_json();
    assert_eq!(
        error_type(&late),
        "gate_step_requires_gate_resolve",
        "{late:#}"
    );
    let audit = runtime
        .call(&Command::Audit {
            flow_id: flow.clone(),
        })
        .unwrap()
        .to_json();
    let records: Vec<&Value> = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["step_id"] == "work")
        .collect();
    assert_eq!(records.len(), 1, "one completion of `work`: {audit:#}");
}

/// `stratum-mcp --db DB ARGS…`: its exit status and standard error. `unprivileged`: as a user
/// whom file modes stop: this one, or `nobody` when the tests run as root (whom they do not).
#[cfg(unix)]
fn stratum_mcp(db: &Path, args: &[&str], unprivileged: bool) -> (i32, String) {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_stratum-mcp"));
    command.arg("--db").arg(db).args(args);
    let probe = tempfile::NamedTempFile::new().unwrap();
    if unprivileged && probe.as_file().metadata().unwrap().uid() == 0 {
        command.uid(65534).gid(65534);
    }
    let output = command.output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A database made by the test, in a directory anyone may enter; the store closed (its `-wal`
/// file checkpointed into it and removed).
#[cfg(unix)]
fn closed_database(dir: &tempfile::TempDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.path().join("stratum.db");
    drop(open(&path));
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    path
}

#[cfg(unix)]
#[test]
fn a_database_file_that_cannot_be_written_is_named_as_such() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = closed_database(&dir);
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o444)).unwrap();
    let (code, stderr) = stratum_mcp(&path, &["query", "flows"], true);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("cannot open") && stderr.contains("for writing"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot create"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_directory_that_cannot_be_written_is_named_as_such() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = closed_database(&dir);
    // The file itself may be written by anyone; only its directory refuses.
    std::fs::set_permissions(&path, PermissionsExt::from_mode(0o666)).unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o555)).unwrap();
    let (code, stderr) = stratum_mcp(&path, &["query", "flows"], true);
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(code, 3, "{stderr}");
    let shown = format!("its directory {} is not writable", dir.path().display());
    assert!(stderr.contains(&shown), "{stderr}");
    assert!(stderr.contains("-wal"), "{stderr}");
}

/// Flips the high bit of the third byte of every copy of `needle` in the file: a bit flip in
/// the pages that hold a value (its table row and its index entry).
fn flip_bits_of(path: &Path, needle: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    let mut flipped = 0;
    let mut from = 0;
    while let Some(at) = bytes[from..]
        .windows(needle.len())
        .position(|window| window == needle)
    {
        bytes[from + at + 2] ^= 0x80;
        from += at + 1;
        flipped += 1;
    }
    assert!(flipped > 0, "the value is in the file");
    std::fs::write(path, bytes).unwrap();
}

#[cfg(unix)]
#[test]
fn a_damaged_database_is_called_damaged_with_how_to_check_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_database(&dir);
    let (code, stderr) = stratum_mcp(&path, &["token", "create", "--name", "tokenname"], false);
    assert_eq!(code, 0, "{stderr}");
    flip_bits_of(&path, b"tokenname");
    let (code, stderr) = stratum_mcp(&path, &["token", "list"], false);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert!(stderr.contains("PRAGMA integrity_check"), "{stderr}");

    // The whole page that holds the name scrambled: SQLite's own "malformed".
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 4096;
    // `tokenname` with its third byte flipped above.
    let at = bytes
        .windows(6)
        .position(|window| window == b"enname")
        .unwrap();
    for byte in bytes.iter_mut().skip(at / page * page).take(page) {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, bytes).unwrap();
    let (code, stderr) = stratum_mcp(&path, &["token", "list"], false);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert!(stderr.contains("PRAGMA integrity_check"), "{stderr}");
}
