//! The store conformance suite: what every [`Store`] promises, written once and run by each
//! store's tests (the memory store's in this crate, SQLite's and PostgreSQL's in theirs), so that
//! a new store, or a new store method, cannot land without passing it. Behind the `testing`
//! feature: no store's normal build carries it.
//!
//! Each check takes a fresh, empty store from the caller and panics, naming itself, on the first
//! promise the store breaks. The interpreter's answers are compared store against store by the
//! scenario tests and the property tests (every command on memory, SQLite and PostgreSQL at
//! once); these checks hold the parts of the trait the interpreter never calls: listing,
//! pruning, tokens, sessions, copying, and the transaction rules themselves.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use stratum_compiler::plan::Plan;

use crate::command::{Command, Config, Context};
use crate::ids::FlowId;
use crate::state::FlowHeader;
use crate::store::{
    AgentRun, Changes, DiffKey, Drive, DriveState, Enrolled, FlowChange, Parked, Release,
    RunStatus, Session, Store, StoreError, Token,
};

/// What opens a fresh, empty store of the kind under test.
pub type OpenStore<'a> = dyn Fn() -> Arc<dyn Store> + 'a;

/// One check of the suite: panics on the first promise the store it opens breaks.
pub type Check = fn(&OpenStore<'_>);

/// Every check, by name, in the order [`run`] runs them.
pub const CHECKS: &[(&str, Check)] = &[
    ("commands_are_read_back", commands_are_read_back),
    (
        "a_failed_transaction_writes_nothing",
        a_failed_transaction_writes_nothing,
    ),
    (
        "a_stale_version_is_a_conflict",
        a_stale_version_is_a_conflict,
    ),
    (
        "flows_are_listed_newest_first",
        flows_are_listed_newest_first,
    ),
    (
        "prune_takes_whole_finished_trees",
        prune_takes_whole_finished_trees,
    ),
    (
        "task_diffs_are_rows_of_their_own",
        task_diffs_are_rows_of_their_own,
    ),
    ("tokens_are_kept_by_name", tokens_are_kept_by_name),
    (
        "sessions_expire_and_are_bounded_per_token",
        sessions_expire_and_are_bounded_per_token,
    ),
    ("a_copy_holds_every_row", a_copy_holds_every_row),
    (
        "drives_are_claimed_once_and_fence_others",
        drives_are_claimed_once_and_fence_others,
    ),
    (
        "a_parked_drive_wakes_when_its_flow_moves",
        a_parked_drive_wakes_when_its_flow_moves,
    ),
    (
        "agent_runs_are_kept_listed_and_pruned",
        agent_runs_are_kept_listed_and_pruned,
    ),
];

/// Runs every check, each on a store of its own from `open` (which must return an empty one).
pub fn run(open: &OpenStore<'_>) {
    for (name, check) in CHECKS {
        eprintln!("store conformance: {name}");
        check(open);
    }
}

/// The clock the checks start at: 2026-01-01T00:00:00Z.
const EPOCH_MS: u64 = 1_767_225_600_000;

/// One flow `main` of one inline step `s0`, its result an object with an integer `n`.
const SPEC: &str = "version: \"0.2\"
contracts:
  Part:
    n: {type: integer}
flows:
  main:
    input: {text: {type: string}}
    output: Part
    steps:
      - id: s0
        intent: \"Do the work\"
        inputs: {text: \"$.input.text\"}
        output_contract: Part
        ensure: [\"result.n >= 0\"]
";

fn plan() -> Arc<Plan> {
    Arc::new(
        crate::compile::plan_from_spec("conformance.stratum.yaml", SPEC)
            .expect("the conformance spec compiles"),
    )
}

fn call(store: &dyn Store, command: &Command, now_ms: u64) -> Value {
    let ctx = Context::new(now_ms, u128::from(now_ms), Arc::new(Config::default()));
    crate::execute(store, command, &ctx)
        .expect("the store runs the command")
        .to_json()
}

/// Starts a flow at `now_ms`; its id.
fn start(store: &dyn Store, plan: &Arc<Plan>, now_ms: u64) -> FlowId {
    let command = Command::Start {
        plan: plan.clone(),
        flow: Some("main".to_owned()),
        inputs: json!({"text": "the work"}),
        started_by: None,
    };
    let answer = call(store, &command, now_ms);
    answer
        .get("flow_id")
        .and_then(Value::as_str)
        .and_then(FlowId::parse)
        .unwrap_or_else(|| panic!("a start answers with a flow id: {answer}"))
}

/// Finishes the flow's only step at `now_ms`, which completes it.
fn finish(store: &dyn Store, id: &FlowId, now_ms: u64) {
    let command = Command::StepDone {
        flow_id: id.to_string(),
        step_id: "s0".to_owned(),
        result: json!({"n": 1}),
        usage: None,
    };
    let answer = call(store, &command, now_ms);
    assert_eq!(
        answer.get("status").and_then(Value::as_str),
        Some("complete"),
        "{answer}"
    );
}

fn header(store: &dyn Store, id: &FlowId) -> Option<FlowHeader> {
    let mut found = None;
    store
        .read(&mut |snapshot| {
            found = snapshot.flow(id)?;
            Ok(())
        })
        .expect("the store reads");
    found
}

fn ids(headers: &[FlowHeader]) -> Vec<FlowId> {
    headers.iter().map(|header| header.id.clone()).collect()
}

/// What a command wrote is what the next transaction reads: header, plan, step rows, events.
fn commands_are_read_back(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let id = start(store.as_ref(), &plan, EPOCH_MS);
    let started = header(store.as_ref(), &id).expect("the started flow is stored");
    assert!(!started.status.is_finished(), "{started:?}");
    finish(store.as_ref(), &id, EPOCH_MS + 1_000);
    store
        .read(&mut |snapshot| {
            let header = snapshot.flow(&id)?.expect("the flow is still stored");
            assert!(header.status.is_finished(), "{header:?}");
            assert_eq!(header.finished_ms, Some(EPOCH_MS + 1_000));
            assert!(header.version > started.version, "{header:?}");
            let stored = snapshot
                .plan(&header.plan)?
                .expect("the flow's plan is stored");
            assert_eq!(stored.checksum, plan.checksum);
            let step = snapshot.step(&id, 0)?.expect("the finished step is stored");
            assert_eq!(snapshot.steps_from(&id, 0)?, vec![(0, step)]);
            assert_eq!(snapshot.steps_from(&id, 1)?, vec![]);
            let events = snapshot.events(&id)?;
            assert!(!events.is_empty(), "a flow records its events");
            assert_eq!(u64::try_from(events.len()).ok(), Some(header.events));
            assert_eq!(snapshot.children(&id)?, vec![]);
            assert_eq!(snapshot.checkpoint_labels(&id)?, Vec::<String>::new());
            let unknown = FlowId::derive(7, 7);
            assert!(snapshot.flow(&unknown)?.is_none());
            assert!(snapshot.step(&unknown, 0)?.is_none());
            assert!(snapshot.plan("no-such-plan")?.is_none());
            assert!(snapshot.cached("no-such-key")?.is_none());
            Ok(())
        })
        .expect("the store reads");
}

/// An error from the work rolls the transaction back and comes back unchanged.
fn a_failed_transaction_writes_nothing(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let failed = store.transact(&mut |snapshot| {
        let mut work = crate::exec::Work::new(snapshot);
        let ctx = Context::new(EPOCH_MS, 1, Arc::new(Config::default()));
        let command = Command::Start {
            plan: plan.clone(),
            flow: Some("main".to_owned()),
            inputs: json!({"text": "the work"}),
            started_by: None,
        };
        crate::exec::run(&mut work, &command, &ctx)?;
        assert!(
            !work.into_changes(EPOCH_MS).is_empty(),
            "a start changes something"
        );
        Err(StoreError::Database("refused by the check".to_owned()))
    });
    assert!(
        matches!(&failed, Err(StoreError::Database(message)) if message == "refused by the check"),
        "{failed:?}"
    );
    assert_eq!(ids(&store.list_flows().expect("the store lists")), vec![]);
}

/// A change made on a version another command has since moved past is refused whole.
fn a_stale_version_is_a_conflict(open: &OpenStore<'_>) {
    let store = open();
    let id = start(store.as_ref(), &plan(), EPOCH_MS);
    let read = header(store.as_ref(), &id).expect("the flow is stored");
    let change = |base_version: u64, note: &str| {
        let mut changed = read.clone();
        changed.version = base_version + 1;
        changed.error_type = Some(note.to_owned());
        let mut changes = Changes::default();
        changes.flows.insert(
            id.clone(),
            FlowChange {
                header: changed,
                base_version: Some(base_version),
                steps: BTreeMap::new(),
                replace_steps: false,
                events: Vec::new(),
                revert_events_from: None,
                checkpoints: Vec::new(),
                diffs: BTreeMap::new(),
            },
        );
        changes
    };
    let stale = store.transact(&mut |_| Ok(change(read.version + 1, "stale")));
    assert!(
        matches!(stale, Err(StoreError::Conflict(ref flow)) if *flow == id),
        "{stale:?}"
    );
    assert_eq!(
        header(store.as_ref(), &id),
        Some(read.clone()),
        "a conflict writes nothing"
    );
    store
        .transact(&mut |_| Ok(change(read.version, "current")))
        .expect("a change on the current version is written");
    let written = header(store.as_ref(), &id).expect("the flow is stored");
    assert_eq!(written.version, read.version + 1);
    assert_eq!(written.error_type.as_deref(), Some("current"));
}

/// `list_flows` is newest first, and `flow_versions` agrees with it.
fn flows_are_listed_newest_first(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let first = start(store.as_ref(), &plan, EPOCH_MS);
    let second = start(store.as_ref(), &plan, EPOCH_MS + 1_000);
    finish(store.as_ref(), &first, EPOCH_MS + 2_000);
    let listed = store.list_flows().expect("the store lists");
    assert_eq!(ids(&listed), vec![second, first]);
    let mut versions = store.flow_versions().expect("the store lists versions");
    versions.sort();
    let mut expected: Vec<(FlowId, u64)> = listed
        .iter()
        .map(|header| (header.id.clone(), header.version))
        .collect();
    expected.sort();
    assert_eq!(versions, expected);
}

/// `prune` deletes the finished flows older than the cut-off, and then the plans no flow runs.
fn prune_takes_whole_finished_trees(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let done = start(store.as_ref(), &plan, EPOCH_MS);
    finish(store.as_ref(), &done, EPOCH_MS + 1_000);
    let running = start(store.as_ref(), &plan, EPOCH_MS + 2_000);

    let kept = store.prune(EPOCH_MS + 1_000).expect("the store prunes");
    assert_eq!(kept.flows, vec![], "a flow finished at the cut-off is kept");
    let pruned = store.prune(EPOCH_MS + 1_001).expect("the store prunes");
    assert_eq!(pruned.flows, vec![done.clone()]);
    assert_eq!(pruned.plans, 0, "the running flow still runs the plan");
    assert_eq!(
        ids(&store.list_flows().expect("the store lists")),
        vec![running.clone()]
    );
    assert!(header(store.as_ref(), &done).is_none());

    finish(store.as_ref(), &running, EPOCH_MS + 3_000);
    let last = store.prune(u64::MAX).expect("the store prunes");
    assert_eq!(last.flows, vec![running]);
    assert_eq!(last.plans, 1);
    assert_eq!(ids(&store.list_flows().expect("the store lists")), vec![]);
}

fn diff_key(attempt: u32, task: &str) -> DiffKey {
    DiffKey {
        step: "s0".to_owned(),
        attempt,
        task: task.to_owned(),
    }
}

/// Writes (`Some`) or deletes (`None`) task diffs of flow `id` in one command's transaction;
/// `fail`: the transaction then fails.
fn write_diffs(
    store: &dyn Store,
    id: &FlowId,
    diffs: &[(DiffKey, Option<&str>)],
    fail: bool,
) -> Result<(), StoreError> {
    store.transact(&mut |snapshot| {
        let mut work = crate::exec::Work::new(snapshot);
        for (key, diff) in diffs {
            work.put_task_diff(id, key.clone(), diff.map(str::to_owned))?;
        }
        if fail {
            return Err(StoreError::Database("refused by the check".to_owned()));
        }
        Ok(work.into_changes(EPOCH_MS))
    })
}

/// The stored diff under `key` of flow `id`.
fn stored_diff(store: &dyn Store, id: &FlowId, key: &DiffKey) -> Option<String> {
    let mut found = None;
    store
        .read(&mut |snapshot| {
            found = snapshot.task_diff(id, key)?;
            Ok(())
        })
        .expect("the store reads");
    found
}

/// A fan-out task's diff is a row keyed by flow, step, attempt and task: written, replaced
/// and deleted in a command's transaction (never by a failed one), read back by its key and
/// its reference, copied with the store, and pruned with its flow.
fn task_diffs_are_rows_of_their_own(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let id = start(store.as_ref(), &plan, EPOCH_MS);
    let other = start(store.as_ref(), &plan, EPOCH_MS + 1);
    let big = format!("diff --git a/big b/big\n{}", "+x\n".repeat(100_000));
    write_diffs(
        store.as_ref(),
        &id,
        &[
            (diff_key(1, "a"), Some("diff a")),
            (diff_key(1, "b"), Some("diff b")),
            (diff_key(2, "a"), Some(big.as_str())),
        ],
        false,
    )
    .expect("the diffs are written");
    let read = |key: &DiffKey| stored_diff(store.as_ref(), &id, key);
    assert_eq!(read(&diff_key(1, "a")).as_deref(), Some("diff a"));
    assert_eq!(read(&diff_key(1, "b")).as_deref(), Some("diff b"));
    assert_eq!(read(&diff_key(2, "a")), Some(big.clone()));
    assert_eq!(read(&diff_key(3, "a")), None, "another attempt's key");
    assert_eq!(
        stored_diff(store.as_ref(), &other, &diff_key(1, "a")),
        None,
        "another flow's key"
    );

    let failed = write_diffs(
        store.as_ref(),
        &id,
        &[(diff_key(1, "c"), Some("diff c")), (diff_key(1, "a"), None)],
        true,
    );
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(
        read(&diff_key(1, "c")),
        None,
        "a failed command writes nothing"
    );
    assert_eq!(read(&diff_key(1, "a")).as_deref(), Some("diff a"));

    write_diffs(
        store.as_ref(),
        &id,
        &[
            (diff_key(1, "a"), Some("diff a, again")),
            (diff_key(1, "b"), None),
        ],
        false,
    )
    .expect("the diffs are replaced and deleted");
    assert_eq!(read(&diff_key(1, "a")).as_deref(), Some("diff a, again"));
    assert_eq!(read(&diff_key(1, "b")), None);

    let reference = crate::state::DiffRef::of("diff a, again");
    let named = crate::store::read_task_diff(store.as_ref(), &id, &diff_key(1, "a"), &reference)
        .expect("the store reads");
    assert_eq!(named.as_deref(), Some("diff a, again"));
    let stale = crate::state::DiffRef::of("diff a");
    let replaced = crate::store::read_task_diff(store.as_ref(), &id, &diff_key(1, "a"), &stale)
        .expect("the store reads");
    assert_eq!(
        replaced, None,
        "a row that holds another text is not the diff named"
    );

    match store.export() {
        Ok(mut dump) => {
            dump.sort();
            assert_eq!(dump.counts().diffs, 2);
            let copy = open();
            copy.import(&dump).expect("an empty store imports");
            assert_eq!(
                stored_diff(copy.as_ref(), &id, &diff_key(2, "a")),
                Some(big.clone()),
                "the copy holds the diffs"
            );
            let mut again = copy.export().expect("the copy exports");
            again.sort();
            assert_eq!(again, dump);
        }
        Err(StoreError::NotCopyable(_)) => {}
        Err(error) => panic!("the store cannot export: {error}"),
    }

    finish(store.as_ref(), &id, EPOCH_MS + 2_000);
    let pruned = store.prune(EPOCH_MS + 3_000).expect("the store prunes");
    assert_eq!(pruned.flows, vec![id.clone()]);
    assert_eq!(read(&diff_key(1, "a")), None, "pruned with its flow");
    assert_eq!(read(&diff_key(2, "a")), None, "pruned with its flow");
    if let Ok(dump) = store.export() {
        assert_eq!(dump.counts().diffs, 0, "no diff row outlives its flow");
    }
}

fn token(name: &str, digit: char) -> Token {
    Token {
        name: name.to_owned(),
        hash: digit.to_string().repeat(64),
        read_only: name != "ann",
        created_ms: EPOCH_MS,
        last_used_ms: None,
    }
}

/// Tokens: unique by name, listed by name, found by hash, their use recorded, revoked once.
fn tokens_are_kept_by_name(open: &OpenStore<'_>) {
    let store = open();
    let ann = token("ann", 'a');
    let bob = token("bob", 'b');
    store.add_token(&bob).expect("a new token is stored");
    store.add_token(&ann).expect("a new token is stored");
    let again = store.add_token(&token("ann", 'c'));
    assert!(
        matches!(&again, Err(StoreError::TokenExists(name)) if name == "ann"),
        "{again:?}"
    );
    assert_eq!(
        store.tokens().expect("tokens"),
        vec![ann.clone(), bob.clone()]
    );
    assert_eq!(
        store.token_by_hash(&bob.hash).expect("a lookup"),
        Some(bob.clone())
    );
    assert_eq!(
        store.token_by_hash(&"c".repeat(64)).expect("a lookup"),
        None
    );

    store
        .token_used(&ann.hash, EPOCH_MS + 5)
        .expect("a use is recorded");
    store
        .token_used(&"c".repeat(64), EPOCH_MS + 5)
        .expect("an unknown hash is ignored");
    let used = store.token_by_hash(&ann.hash).expect("a lookup");
    assert_eq!(
        used.and_then(|token| token.last_used_ms),
        Some(EPOCH_MS + 5)
    );

    assert!(store.revoke_token("ann").expect("a revoke"));
    assert!(!store.revoke_token("ann").expect("a revoke"));
    assert_eq!(store.tokens().expect("tokens"), vec![bob]);
    assert_eq!(store.token_by_hash(&ann.hash).expect("a lookup"), None);
}

/// Sessions: read until they expire, at most `keep` per token (its oldest go), never another
/// token's, closed once, and gone with their token.
fn sessions_expire_and_are_bounded_per_token(open: &OpenStore<'_>) {
    let store = open();
    let ann = token("ann", 'a');
    let bob = token("bob", 'b');
    store.add_token(&ann).expect("a new token is stored");
    store.add_token(&bob).expect("a new token is stored");
    let session = |token: &Token, csrf: &str, expires_ms: u64| Session {
        token_hash: token.hash.clone(),
        csrf: csrf.to_owned(),
        expires_ms,
    };
    let open_session = |id_hash: &str, session: &Session, now_ms: u64, keep: usize| {
        store
            .open_session(id_hash, session, now_ms, keep)
            .expect("a session is stored");
    };
    let read = |id_hash: &str, now_ms: u64| store.session(id_hash, now_ms).expect("a session read");

    open_session("bob-1", &session(&bob, "b1", EPOCH_MS + 1_000), EPOCH_MS, 2);
    open_session("ann-1", &session(&ann, "a1", EPOCH_MS + 100), EPOCH_MS, 2);
    assert_eq!(
        read("ann-1", EPOCH_MS + 99),
        Some(session(&ann, "a1", EPOCH_MS + 100))
    );
    assert_eq!(
        read("ann-1", EPOCH_MS + 100),
        None,
        "a session has ended at its expiry"
    );

    open_session("ann-2", &session(&ann, "a2", EPOCH_MS + 200), EPOCH_MS, 2);
    open_session("ann-3", &session(&ann, "a3", EPOCH_MS + 300), EPOCH_MS, 2);
    assert_eq!(
        read("ann-1", EPOCH_MS),
        None,
        "the oldest of three goes when two are kept"
    );
    assert!(read("ann-2", EPOCH_MS).is_some());
    assert!(read("ann-3", EPOCH_MS).is_some());
    assert!(
        read("bob-1", EPOCH_MS).is_some(),
        "another token's session stays"
    );

    open_session(
        "ann-3",
        &session(&ann, "a3-again", EPOCH_MS + 300),
        EPOCH_MS,
        2,
    );
    assert_eq!(
        read("ann-3", EPOCH_MS).map(|kept| kept.csrf),
        Some("a3-again".to_owned())
    );
    assert!(
        read("ann-2", EPOCH_MS).is_some(),
        "replacing a session is not a new one"
    );

    open_session(
        "ann-4",
        &session(&ann, "a4", EPOCH_MS + 400),
        EPOCH_MS + 250,
        20,
    );
    assert_eq!(
        read("ann-2", EPOCH_MS),
        None,
        "an expired session is deleted by the next one"
    );
    assert!(read("bob-1", EPOCH_MS).is_some());

    assert!(store.close_session("ann-3").expect("a close"));
    assert!(!store.close_session("ann-3").expect("a close"));
    assert_eq!(read("ann-3", EPOCH_MS), None);

    assert!(store.revoke_token("ann").expect("a revoke"));
    assert_eq!(
        read("ann-4", EPOCH_MS),
        None,
        "a revoked token's sessions end with it"
    );
    assert!(read("bob-1", EPOCH_MS).is_some());
}

/// A store that can be copied exports every row and imports them into an empty store of its
/// kind, which then exports the same rows; it refuses to import into a store with flows.
fn a_copy_holds_every_row(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let done = start(store.as_ref(), &plan, EPOCH_MS);
    finish(store.as_ref(), &done, EPOCH_MS + 1_000);
    start(store.as_ref(), &plan, EPOCH_MS + 2_000);
    let mut dump = match store.export() {
        Ok(dump) => dump,
        Err(StoreError::NotCopyable(_)) => {
            let refused = store.import(&crate::store::Dump::default());
            assert!(
                matches!(refused, Err(StoreError::NotCopyable(_))),
                "{refused:?}"
            );
            return;
        }
        Err(error) => panic!("the store cannot export: {error}"),
    };
    dump.sort();
    let counts = dump.counts();
    assert_eq!(counts.flows, 2);
    assert_eq!(counts.plans, 1);

    let copy = open();
    copy.import(&dump).expect("an empty store imports");
    let mut again = copy.export().expect("the copy exports");
    again.sort();
    assert_eq!(again, dump);
    assert_eq!(
        copy.list_flows().expect("the copy lists"),
        store.list_flows().expect("lists")
    );

    let refused = copy.import(&dump);
    assert!(
        matches!(refused, Err(StoreError::NotEmpty { .. })),
        "{refused:?}"
    );
}

fn call_as(store: &dyn Store, command: &Command, now_ms: u64, driver: &str) -> Value {
    let ctx =
        Context::new(now_ms, u128::from(now_ms), Arc::new(Config::default())).driven_by(driver);
    crate::execute(store, command, &ctx)
        .expect("the store runs the command")
        .to_json()
}

fn status_of(answer: &Value) -> Option<&str> {
    answer
        .get("error_type")
        .or_else(|| answer.get("status"))
        .and_then(Value::as_str)
}

fn drives_are_claimed_once_and_fence_others(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let first = start(&*store, &plan, EPOCH_MS);
    let second = start(&*store, &plan, EPOCH_MS + 1);
    let enrolled = store
        .enroll(&Drive::new(first.clone(), EPOCH_MS + 2))
        .expect("enroll");
    assert!(matches!(enrolled, Enrolled::Enrolled(_)), "{enrolled:?}");
    store
        .enroll(&Drive::new(second.clone(), EPOCH_MS + 3))
        .expect("enroll");
    assert!(matches!(
        store.enroll(&Drive::new(first.clone(), EPOCH_MS + 4)),
        Ok(Enrolled::AlreadyActive(_))
    ));

    // The longest-waiting drive first, each to one worker only.
    let now = EPOCH_MS + 10;
    let a = store.claim("w1", now, 1_000, None).expect("claim");
    assert_eq!(a.as_ref().map(|drive| &drive.flow), Some(&first));
    let b = store.claim("w2", now, 1_000, None).expect("claim");
    assert_eq!(b.as_ref().map(|drive| &drive.flow), Some(&second));
    assert_eq!(store.claim("w3", now, 1_000, None).expect("claim"), None);

    // The lease fences out an agent and another driver; its owner gets through.
    let done = |n| Command::StepDone {
        flow_id: first.to_string(),
        step_id: "s0".to_owned(),
        result: json!({"n": n}),
        usage: None,
    };
    assert_eq!(
        status_of(&call(&*store, &done(1), now + 1)),
        Some("flow_leased")
    );
    assert_eq!(
        status_of(&call_as(&*store, &done(1), now + 1, "w2")),
        Some("flow_leased")
    );
    // A gate decision and a read are not fenced (the audit answers).
    let audit = Command::Audit {
        flow_id: first.to_string(),
    };
    assert_ne!(
        status_of(&call(&*store, &audit, now + 1)),
        Some("flow_leased")
    );
    assert!(store.renew(&first, "w1", now + 500, 1_000).expect("renew"));
    assert!(!store.renew(&first, "w2", now + 500, 1_000).expect("renew"));

    // Past its expiry, another worker takes the flow over, and the old owner is fenced.
    let later = now + 2_000;
    let taken = store
        .claim("w3", later, 1_000, Some(&first))
        .expect("claim");
    assert_eq!(taken.and_then(|drive| drive.owner), Some("w3".to_owned()));
    assert!(!store.renew(&first, "w1", later, 1_000).expect("renew"));
    assert_eq!(
        status_of(&call_as(&*store, &done(1), later + 1, "w1")),
        Some("flow_leased")
    );
    assert_eq!(
        status_of(&call_as(&*store, &done(1), later + 1, "w3")),
        Some("complete")
    );
    assert!(
        store
            .release(
                &first,
                "w3",
                &Release::End {
                    state: DriveState::Done,
                    note: "complete".to_owned()
                },
                later + 2
            )
            .expect("release")
    );
    let ended = store.drive(&first).expect("drive").expect("kept");
    assert_eq!((ended.state, ended.owner), (DriveState::Done, None));
    assert!(
        !store
            .release(&second, "w1", &Release::Requeue, later)
            .expect("release")
    );

    // A cancel ends the drive; its driver's next renewal says so.
    let before = store
        .cancel_drive(&second, "cancelled by test")
        .expect("cancel");
    assert_eq!(before.map(|drive| drive.state), Some(DriveState::Active));
    assert!(!store.renew(&second, "w2", now + 600, 1_000).expect("renew"));
    assert_eq!(store.drives().expect("drives").len(), 2);
}

fn a_parked_drive_wakes_when_its_flow_moves(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let flow = start(&*store, &plan, EPOCH_MS);
    let version = header(&*store, &flow).expect("flow").version;
    store
        .enroll(&Drive::new(flow.clone(), EPOCH_MS))
        .expect("enroll");
    let now = EPOCH_MS + 10;
    assert!(
        store
            .claim("w1", now, 1_000, None)
            .expect("claim")
            .is_some()
    );
    let parked = Parked {
        flow: flow.clone(),
        version,
        wake_ms: Some(now + 5_000),
    };
    assert!(
        store
            .release(&flow, "w1", &Release::Park(parked), now)
            .expect("release")
    );
    assert_eq!(
        store.claim("w2", now + 1, 1_000, None).expect("claim"),
        None
    );
    // Its wake time passes: claimable.
    assert!(
        store
            .claim("w2", now + 5_000, 1_000, None)
            .expect("claim")
            .is_some()
    );
    let parked = Parked {
        flow: flow.clone(),
        version,
        wake_ms: None,
    };
    assert!(
        store
            .release(&flow, "w2", &Release::Park(parked), now)
            .expect("release")
    );
    assert_eq!(
        store.claim("w1", now + 9_000, 1_000, None).expect("claim"),
        None
    );
    // The flow moves (here its step is done): claimable again.
    finish(&*store, &flow, now + 9_001);
    assert!(
        store
            .claim("w1", now + 9_002, 1_000, None)
            .expect("claim")
            .is_some()
    );
}

fn agent_run(id: &str, flow: Option<&FlowId>, started_ms: u64) -> AgentRun {
    let mut run = AgentRun::starting(id.to_owned(), "claude", "w1", "here", started_ms);
    run.flow = flow.cloned();
    run.step = flow.map(|_| "s0".to_owned());
    run.attempt = flow.map(|_| 1);
    run.model = Some("claude-sonnet-4-6".to_owned());
    run.pid = Some(4242);
    run.process_start = Some(99);
    run.deadline_ms = started_ms + 60_000;
    run.events = vec!["{\"type\":\"system\"}".to_owned()];
    run.events_seen = 1;
    run.bytes_seen = 17;
    run
}

fn agent_runs_are_kept_listed_and_pruned(open: &OpenStore<'_>) {
    let store = open();
    let plan = plan();
    let flow = start(&*store, &plan, EPOCH_MS);
    let mut first = agent_run("00000000000000a1", Some(&flow), EPOCH_MS + 1);
    store.put_run(&first).expect("put");
    store
        .put_run(&agent_run("00000000000000a2", None, EPOCH_MS + 2))
        .expect("put");
    first.status = RunStatus::Answered;
    first.finished_ms = Some(EPOCH_MS + 3);
    first.result = Some(json!({"n": 1}));
    store.put_run(&first).expect("update");
    assert_eq!(
        store.agent_run("00000000000000a1").expect("read"),
        Some(first.clone())
    );
    assert_eq!(store.agent_run("ffffffffffffffff").expect("read"), None);
    let all: Vec<String> = store
        .agent_runs(None, 10)
        .expect("list")
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(
        all,
        ["00000000000000a2", "00000000000000a1"],
        "newest first"
    );
    assert_eq!(store.agent_runs(Some(&flow), 10).expect("list"), [first]);
    assert_eq!(store.agent_runs(None, 1).expect("list").len(), 1);

    // A finished flow's runs go with it; a running run of no flow stays.
    finish(&*store, &flow, EPOCH_MS + 4);
    store
        .enroll(&Drive::new(flow.clone(), EPOCH_MS))
        .expect("enroll");
    let pruned = store.prune(EPOCH_MS + 10).expect("prune");
    assert_eq!(pruned.flows, std::slice::from_ref(&flow));
    assert_eq!(store.agent_run("00000000000000a1").expect("read"), None);
    assert_eq!(store.drive(&flow).expect("drive"), None);
    assert!(store.agent_run("00000000000000a2").expect("read").is_some());
}
