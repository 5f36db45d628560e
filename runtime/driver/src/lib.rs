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
//! - `fan_out`: a parallel_dispatch step's tasks run by the server, merged, then evaluated;
//! - `git`: worktrees of fanned-out tasks, their diffs, the merge back and the checks before it.
//!
//! Invariants: a driver writes to a flow only while it holds the flow's lease, and the store
//! refuses its writes once another holds it (the fence); an agent run is recorded before it
//! starts and its end before its result is reported; a result is reported once, by
//! compare-and-set on the flow's version; no agent answer is ever turned into an empty result.

mod agent_run;
mod drive;
mod fan_out;
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
pub use fan_out::{FanOutEnd, FanOutProgress, MAX_DIFF_BYTES, diff_bytes, diff_text};
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
    /// Where fan-out tasks get their git worktrees (`$STRATUM_HOME/worktrees`): a directory
    /// the server owns, outside the project.
    pub worktrees: PathBuf,
    /// Keep task worktrees after the merge (for debugging) instead of removing them.
    pub keep_worktrees: bool,
    /// How git is run (binary, deadline).
    pub git: git::Git,
    /// Programs a `pre_merge_verify` read from the flow's data (not written in the spec) may
    /// run; empty: none.
    pub verify_allow: Vec<String>,
    /// Each pre-merge command's deadline.
    pub verify_deadline: Duration,
    /// Environment names pre-merge commands get beyond the base allow-list (`PATH`, `HOME`,
    /// `LANG`, `TMPDIR`, `LC_*`).
    pub verify_env: Vec<String>,
}

/// The default for [`Driver::worktrees`]: `$STRATUM_HOME/worktrees`, else
/// `~/.stratum/worktrees`, else under the temporary directory.
pub fn default_worktrees() -> PathBuf {
    if let Some(home) = std::env::var_os("STRATUM_HOME").filter(|home| !home.is_empty()) {
        return PathBuf::from(home).join("worktrees");
    }
    match std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        Some(home) => PathBuf::from(home).join(".stratum").join("worktrees"),
        None => std::env::temp_dir().join("stratum-worktrees"),
    }
}

/// The default deadline of one pre-merge command.
pub const DEFAULT_VERIFY_DEADLINE: Duration = Duration::from_secs(600);

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
            worktrees: default_worktrees(),
            keep_worktrees: false,
            git: git::Git::default(),
            verify_allow: Vec::new(),
            verify_deadline: DEFAULT_VERIFY_DEADLINE,
            verify_env: Vec::new(),
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
