//! What the unattended tests and benchmarks share: a chain of inline steps, flows started and
//! enrolled for drivers, and whether a process is gone.

use std::sync::Arc;

use stratum_runtime::ids::FlowId;
use stratum_runtime::store::Drive;
use stratum_runtime::{Command, Runtime};

/// A spec of one flow `main` of `steps` inline steps `s0`, `s1`, … in a chain, each answering
/// the contract `Part` (`n`, an integer) under the ensure `result.n >= 0`.
pub fn chain_spec(steps: usize) -> String {
    let mut text = String::from(
        "version: \"0.2\"\ncontracts:\n  Part:\n    n: {type: integer}\nflows:\n  main:\n    input: {}\n    output: Part\n    steps:\n",
    );
    for at in 0..steps {
        text.push_str(&format!(
            "      - id: s{at}\n        intent: \"Step {at}\"\n        output_contract: Part\n        ensure: [\"result.n >= 0\"]\n"
        ));
        if at > 0 {
            text.push_str(&format!("        depends_on: [s{}]\n", at - 1));
        }
    }
    text
}

/// Starts `count` flows of `spec` (its flow `flow`, or its entry flow) with `inputs`, and
/// enrolls each for unattended driving.
pub fn start_enrolled(
    runtime: &Runtime,
    spec: &str,
    flow: Option<&str>,
    inputs: &serde_json::Value,
    count: usize,
) -> Vec<FlowId> {
    let plan = Arc::new(
        stratum_runtime::compile::plan_from_spec("unattended.stratum.yaml", spec)
            .expect("the spec compiles"),
    );
    (0..count)
        .map(|_| {
            let answer = runtime
                .call(&Command::Start {
                    plan: plan.clone(),
                    flow: flow.map(str::to_owned),
                    inputs: inputs.clone(),
                    started_by: None,
                })
                .expect("the flow starts")
                .to_json();
            let id = answer
                .get("flow_id")
                .and_then(|id| id.as_str())
                .and_then(FlowId::parse)
                .unwrap_or_else(|| panic!("a start answers with a flow id: {answer}"));
            runtime
                .store()
                .enroll(&Drive::new(id.clone(), stratum_runtime::now_ms()))
                .expect("the flow is enrolled");
            id
        })
        .collect()
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped by whoever adopted it).
pub fn process_gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A store opener for tests that run on each database in turn.
pub type Open = fn() -> Arc<dyn stratum_runtime::Store>;

/// A fresh SQLite store in a directory of its own (kept: a test may reopen it).
pub fn sqlite() -> Arc<dyn stratum_runtime::Store> {
    let dir = tempfile::tempdir().expect("a temporary directory").keep();
    Arc::new(stratum_store_sqlite::SqliteStore::open(dir.join("stratum.db")).expect("SQLite opens"))
}

/// A PostgreSQL store on a fresh schema of the test server.
pub fn postgres() -> Arc<dyn stratum_runtime::Store> {
    let url = crate::postgres::database_url();
    Arc::new(stratum_store_postgres::PostgresStore::connect(&url).expect("PostgreSQL connects"))
}

/// Both database stores, by name.
pub const STORES: [(&str, Open); 2] = [("sqlite", sqlite), ("postgres", postgres)];
