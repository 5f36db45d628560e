//! `stratum-driver`: the runtime drives flows itself. For each function or inline step it
//! launches the agent the step names through its connector, hands it the step's intent,
//! inputs and output contract (and, on a retry, the violations), and reports what came back
//! through exactly the path an agent's `stratum_step_done` takes: schema, contract, ensures,
//! retries, `on_fail`, budgets. It stops at a gate until a person decides.
//!
//! The modules, in the order a drive meets them:
//!
//! - `identity`: the host and the owner id a driver's lease and runs carry;
//! - `lease`: the lease renewed while driving, and what happens when it is lost;
//! - `drive`: one flow, from a claim to the point it parks, yields, finishes or hands off;
//! - `step`: what the agent is told, and which connector runs it;
//! - `agent_run`: one agent process, recorded as a row of the store;
//! - `worker`: threads that take flows from the store's queue;
//! - `git`: worktrees of fanned-out tasks, their diffs, the merge back and the checks before it.
//!
//! Invariants: a driver writes to a flow only while it holds the flow's lease, and the store
//! refuses its writes once another holds it (the fence); an agent run is recorded before it
//! starts and its end before its result is reported; a result is reported once, by
//! compare-and-set on the flow's version; no agent answer is ever turned into an empty result.

mod agent_run;
mod drive;
pub mod git;
mod identity;
mod lease;
mod step;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

pub use agent_run::{run_recorded, usage_json, violation};
pub use drive::{Ended, Progress, Turn, ended_json};
pub use identity::{host_name, owner_id};
pub use step::agent_named;
pub use worker::{StopSignal, Worker, WorkerTally};

use stratum_agents::{Agent, Connector};
use stratum_runtime::{Runtime, StoreError};

/// How long a lease lasts unless renewed: a driver killed with `kill -9` holds its flow this
/// long at most.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Why a drive could not go on (a flow's own failure is not one: it ends the drive).
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot start an agent: {0}")]
    Agent(#[from] stratum_agents::Error),
    #[error("cannot run the agent's event loop: {0}")]
    Runtime(String),
}

/// Everything a driver needs: the runtime (store and settings), the connectors, where agents
/// work, and the lease.
#[derive(Clone)]
pub struct Driver {
    pub runtime: Runtime,
    /// One connector per agent (its binary, model, extra arguments and environment names).
    pub connectors: BTreeMap<Agent, Connector>,
    /// The connector of steps that name no agent, when the drive names none either.
    pub default_agent: Agent,
    /// The project root every agent works in (canonical).
    pub root: PathBuf,
    /// Every agent run's deadline.
    pub step_deadline: Duration,
    pub lease: Duration,
    /// This machine, as runs record it.
    pub host: String,
}

impl Driver {
    /// A driver with the three connectors at their defaults (binaries found on `PATH`).
    pub fn new(runtime: Runtime, root: PathBuf) -> Driver {
        let connectors = [Agent::Claude, Agent::Codex, Agent::OpenCode]
            .into_iter()
            .map(|agent| (agent, Connector::new(agent)))
            .collect();
        Driver {
            runtime,
            connectors,
            default_agent: Agent::Claude,
            root,
            step_deadline: stratum_agents::DEFAULT_DEADLINE,
            lease: DEFAULT_LEASE,
            host: host_name(),
        }
    }

    /// A fresh owner id for one driving thread.
    pub fn new_owner(&self) -> String {
        owner_id(&self.host, stratum_runtime::fresh_seed())
    }

    fn lease_ms(&self) -> u64 {
        u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX)
    }
}
