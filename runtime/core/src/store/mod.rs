//! Where flow executions live: the [`Store`] trait, the [`Snapshot`] the core reads through
//! and the [`Changes`] it hands back, an in-memory store for tests, and SQLite.
//!
//! Every command is one transaction: the store opens it (a write transaction that excludes
//! every other writer, in every process), lets the core read what it needs through a
//! [`Snapshot`] inside it, writes the [`Changes`] the core returns and commits; only then does
//! the caller see the response. No process keeps flow state between commands, so two
//! processes on one store never act on a stale copy. Plans are immutable and named by their
//! checksum, so they alone may be cached across transactions.

pub mod drives;
pub mod dump;
pub mod memory;
pub mod rows;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use stratum_compiler::plan::Plan;
use thiserror::Error;

use crate::ids::FlowId;
use crate::state::{Checkpoint, Event, FlowHeader, StepState};

pub use drives::{AgentRun, Drive, DriveState, Enrolled, Fence, Parked, Release, RunStatus};
pub use dump::{Counts, Dump};
pub use memory::MemoryStore;

/// Why a store could not do what was asked.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("the state database could not be used: {0}")]
    Database(String),
    #[error(
        "the state database has schema version {found}, newer than this program's {supported}; \
         upgrade stratum-mcp, or use another state database"
    )]
    NewerSchema { found: i64, supported: i64 },
    #[error("cannot prepare the state directory {path}: {reason}")]
    Directory { path: String, reason: String },
    #[error("stored state is damaged: {0}")]
    Corrupt(String),
    #[error("another process changed flow {0} at the same time; retry the call")]
    Conflict(FlowId),
    #[error("the plan {0} this flow runs on is not in the store")]
    MissingPlan(String),
    #[error(
        "the target store already holds {flows} flows and {plans} plans; copy into an empty \
         store, so that two states are never mixed"
    )]
    NotEmpty { flows: i64, plans: i64 },
    #[error("{0} cannot be copied from or into")]
    NotCopyable(&'static str),
    #[error(
        "there is already an access token named `{0}`; revoke it first, or choose another name"
    )]
    TokenExists(String),
    /// A change to a flow another driver holds the lease of (see [`drives`]).
    #[error(
        "flow {flow} is being driven unattended by `{owner}`; its steps are that driver's to report"
    )]
    Leased {
        flow: FlowId,
        owner: String,
        expires_ms: u64,
    },
}

/// Reads inside the current transaction. Absent rows are `None` (or empty).
pub trait Snapshot {
    fn plan(&mut self, checksum: &str) -> Result<Option<Arc<Plan>>, StoreError>;
    fn flow(&mut self, id: &FlowId) -> Result<Option<FlowHeader>, StoreError>;
    fn step(&mut self, id: &FlowId, step: u32) -> Result<Option<StepState>, StoreError>;
    /// Every step of the flow with state, at index `from` or later, by index.
    fn steps_from(&mut self, id: &FlowId, from: u32) -> Result<Vec<(u32, StepState)>, StoreError>;
    /// The flow's events, by number.
    fn events(&mut self, id: &FlowId) -> Result<Vec<Event>, StoreError>;
    /// The child executions the flow started, oldest first.
    fn children(&mut self, id: &FlowId) -> Result<Vec<FlowId>, StoreError>;
    fn checkpoint(&mut self, id: &FlowId, label: &str) -> Result<Option<Checkpoint>, StoreError>;
    fn checkpoint_labels(&mut self, id: &FlowId) -> Result<Vec<String>, StoreError>;
    fn cached(&mut self, key: &str) -> Result<Option<Value>, StoreError>;
    /// The text of a fan-out task's diff, stored under `key` in flow `id`.
    fn task_diff(&mut self, id: &FlowId, key: &DiffKey) -> Result<Option<String>, StoreError>;
}

/// Where a fan-out task's diff is stored: a row of its own per flow, step, attempt and task,
/// written once when the task settles. The step's row holds only a
/// [`crate::state::DiffRef`]: it is rewritten on every task event, and a diff may be
/// megabytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiffKey {
    /// The step's id.
    pub step: String,
    /// The step attempt that ran the task.
    pub attempt: u32,
    pub task: String,
}

/// The diff `reference` names, read from `store` (`None` when its row is gone, or holds
/// another text since the step was entered again).
pub fn read_task_diff(
    store: &dyn Store,
    flow: &FlowId,
    key: &DiffKey,
    reference: &crate::state::DiffRef,
) -> Result<Option<String>, StoreError> {
    if reference.bytes == 0 {
        return Ok(Some(String::new()));
    }
    let mut found = None;
    store.read(&mut |snapshot| {
        found = snapshot.task_diff(flow, key)?;
        Ok(())
    })?;
    Ok(found.filter(|text| reference.names(text)))
}

/// What one command changed: written in the command's transaction, nothing else.
#[derive(Debug, Default)]
pub struct Changes {
    /// Plans to store (by checksum; storing one that exists is a no-op).
    pub plans: Vec<Arc<Plan>>,
    pub flows: BTreeMap<FlowId, FlowChange>,
    /// Result-cache entries to store.
    pub cache: Vec<(String, Value)>,
    /// Written only if no other driver holds a live lease on this flow tree: checked by the
    /// store inside the write transaction ([`StoreError::Leased`] otherwise).
    pub fence: Option<Fence>,
}

impl Changes {
    /// Whether there is nothing to write (a fence alone writes nothing).
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty() && self.flows.is_empty() && self.cache.is_empty()
    }
}

/// What changed in one flow.
#[derive(Debug)]
pub struct FlowChange {
    /// The header as it is now (its `version` already bumped).
    pub header: FlowHeader,
    /// The version the command read; `None` for a flow the command created. A store that
    /// finds another version has lost a race and must fail with [`StoreError::Conflict`].
    pub base_version: Option<u64>,
    /// Step rows to write; a default [`StepState`] deletes the row.
    pub steps: BTreeMap<u32, StepState>,
    /// Delete every step row before writing `steps` (a revert).
    pub replace_steps: bool,
    pub events: Vec<Event>,
    /// Mark events numbered from this on as reverted.
    pub revert_events_from: Option<u64>,
    pub checkpoints: Vec<Checkpoint>,
    /// Fan-out task diffs to write (`Some`, replacing a row under the same key) or delete
    /// (`None`).
    pub diffs: BTreeMap<DiffKey, Option<String>>,
}

/// A durable home for flow executions.
pub trait Store: Send + Sync {
    /// Runs `work` inside one write transaction, writes the changes it returns, and commits
    /// before returning. An error from `work` rolls everything back.
    fn transact(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<Changes, StoreError>,
    ) -> Result<(), StoreError>;

    /// Runs `work` inside one read transaction (a consistent view; writes nothing).
    fn read(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Every flow's header, newest first (for operators).
    fn list_flows(&self) -> Result<Vec<FlowHeader>, StoreError>;

    /// Every flow's id and version, in no particular order: what a watcher compares to know
    /// which flows changed, without reading (and decoding) every header.
    fn flow_versions(&self) -> Result<Vec<(FlowId, u64)>, StoreError> {
        Ok(self
            .list_flows()?
            .into_iter()
            .map(|header| (header.id, header.version))
            .collect())
    }

    /// Deletes, in one write transaction, every flow tree (a top-level flow with all its
    /// sub-flows) whose flows have all finished, the last of them before
    /// `finished_before_ms`, then the plans no remaining flow runs on. A tree with a running
    /// flow is kept whole, so an audit never meets a half-deleted tree. The pruned flows'
    /// drives and agent runs go with them, and so do runs of no flow that ended before the
    /// cut-off. Their task diffs go with them.
    fn prune(&self, finished_before_ms: u64) -> Result<Pruned, StoreError>;

    /// Waits until a flow may have changed, or `timeout` passed: either way the caller looks
    /// again. A store that hears of changes (PostgreSQL's `LISTEN`) returns early; the others
    /// wait the whole `timeout`.
    fn wait_for_change(&self, timeout: Duration) -> Result<(), StoreError> {
        std::thread::sleep(timeout);
        Ok(())
    }

    /// Every row, as stored, in one consistent read.
    fn export(&self) -> Result<Dump, StoreError> {
        Err(StoreError::NotCopyable("this store"))
    }

    /// Writes every row of `dump` into this store, which must hold no flow and no plan, in
    /// one transaction.
    fn import(&self, _dump: &Dump) -> Result<(), StoreError> {
        Err(StoreError::NotCopyable("this store"))
    }

    /// What kind of store it is (`memory`, `sqlite`, `postgres`), as metrics label it.
    fn kind(&self) -> &'static str;

    /// The store's secret called `name`: `fresh` when the store has none of that name yet (it
    /// is stored then), else the one stored first. Every process on the store reads the same
    /// value, so what one `serve` seals another opens. Secrets are never exported.
    fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError>;

    /// Stores a new access token of `stratum-mcp serve`; [`StoreError::TokenExists`] when one
    /// of that name exists.
    fn add_token(&self, token: &Token) -> Result<(), StoreError>;

    /// Every access token, by name.
    fn tokens(&self) -> Result<Vec<Token>, StoreError>;

    /// The token whose secret has this SHA-256 (lower-case hex), if it exists.
    fn token_by_hash(&self, hash: &str) -> Result<Option<Token>, StoreError>;

    /// Deletes the token of that name, and the browser sessions opened with it, in one
    /// transaction; whether there was one.
    fn revoke_token(&self, name: &str) -> Result<bool, StoreError>;

    /// Records that the token with this hash was used at `at_ms` (nothing when it is gone).
    fn token_used(&self, hash: &str, at_ms: u64) -> Result<(), StoreError>;

    /// Stores a browser session of `serve` under the SHA-256 of its id (`id_hash`), replacing
    /// one stored under that hash. In the same transaction it deletes every session expired at
    /// `now_ms`, then as many of the same token's sessions closest to expiry (its oldest) as it
    /// takes to keep at most `keep` of that token's (at least 1), this one included (`serve`
    /// keeps [`MAX_SESSIONS_PER_TOKEN`]). Never another token's: signing in again and again
    /// signs nobody else out.
    fn open_session(
        &self,
        id_hash: &str,
        session: &Session,
        now_ms: u64,
        keep: usize,
    ) -> Result<(), StoreError>;

    /// The session stored under `id_hash`, if it has not expired at `now_ms`. Only reads: it
    /// runs on every request a browser sends.
    fn session(&self, id_hash: &str, now_ms: u64) -> Result<Option<Session>, StoreError>;

    /// Deletes the session stored under `id_hash`; whether there was one.
    fn close_session(&self, id_hash: &str) -> Result<bool, StoreError>;

    /// Enrolls `drive.flow` for unattended driving, or starts an ended drive of it again
    /// (with `drive`'s agent and model); an active one is left as it is.
    fn enroll(&self, drive: &Drive) -> Result<Enrolled, StoreError>;

    /// Claims, for `owner`, a claimable drive ([`Drive::claimable`]) until `now_ms +
    /// lease_ms`: `only` that flow's, else the one that waited longest. PostgreSQL skips rows
    /// another transaction is claiming, so workers never queue behind one another.
    fn claim(
        &self,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
        only: Option<&FlowId>,
    ) -> Result<Option<Drive>, StoreError>;

    /// Extends `owner`'s lease on `flow` to `now_ms + lease_ms`; `false` when the lease is no
    /// longer `owner`'s, or the drive is no longer active (cancelled): the driver must stop.
    fn renew(
        &self,
        flow: &FlowId,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError>;

    /// Lets go of `owner`'s lease on `flow` as `release` says; `false` (and nothing written)
    /// when the lease is not `owner`'s.
    fn release(
        &self,
        flow: &FlowId,
        owner: &str,
        release: &Release,
        now_ms: u64,
    ) -> Result<bool, StoreError>;

    /// Ends an active drive as cancelled (its driver sees it at its next renewal and stops);
    /// the drive as it was, if there was one.
    fn cancel_drive(&self, flow: &FlowId, note: &str) -> Result<Option<Drive>, StoreError>;

    /// The drive of `flow`, if it was ever enrolled.
    fn drive(&self, flow: &FlowId) -> Result<Option<Drive>, StoreError>;

    /// Every drive, oldest first.
    fn drives(&self) -> Result<Vec<Drive>, StoreError>;

    /// Writes an agent run (a new one, or a newer state of it).
    fn put_run(&self, run: &AgentRun) -> Result<(), StoreError>;

    /// The agent run with this id.
    fn agent_run(&self, id: &str) -> Result<Option<AgentRun>, StoreError>;

    /// The agent runs of `flow` (of every flow, and none, when `None`), newest first, at most
    /// `limit`.
    fn agent_runs(&self, flow: Option<&FlowId>, limit: usize) -> Result<Vec<AgentRun>, StoreError>;
}

/// An access token of `stratum-mcp serve`, as stored: never its secret, only the secret's
/// SHA-256, which is all a request is checked against. (The secret is 256 random bits, so a
/// fast hash without salt is enough: there is nothing to guess.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// Unique; what the audit records as the actor of what the token did.
    pub name: String,
    /// The secret's SHA-256, 64 lower-case hex digits.
    pub hash: String,
    /// May read but change nothing: read-only MCP tools, console pages, no form that acts.
    pub read_only: bool,
    /// Wall-clock milliseconds.
    pub created_ms: u64,
    /// When a request last carried it (recorded at most once a minute per token).
    pub last_used_ms: Option<u64>,
}

/// The most browser sessions `serve` keeps for one token; beyond it, a sign-in with that token
/// ends its oldest session. So a store holds at most this many per token (tokens are made by
/// an operator), and no token can crowd out another's sessions.
pub const MAX_SESSIONS_PER_TOKEN: usize = 20;

/// A browser session of `stratum-mcp serve`, as stored under the SHA-256 of its id (the
/// cookie's value, which the store never sees, so a copy of the table opens no session). It
/// holds no rights of its own: every request looks its token up again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The SHA-256 of the token signed in with.
    pub token_hash: String,
    /// The value every state-changing request of the session must carry.
    pub csrf: String,
    /// Wall-clock milliseconds; the session has ended from then on.
    pub expires_ms: u64,
}

/// What [`Store::prune`] deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The flows deleted, sub-flows included.
    pub flows: Vec<FlowId>,
    /// How many stored plans went with them.
    pub plans: usize,
}

/// The flows [`Store::prune`] deletes among `headers`: whole trees, finished before the
/// cut-off. Shared by every store so that they agree on what a prune takes.
pub fn prunable(headers: &[FlowHeader], finished_before_ms: u64) -> Vec<FlowId> {
    use std::collections::{BTreeSet, HashMap};
    let parents: HashMap<&str, Option<&str>> = headers
        .iter()
        .map(|header| {
            let parent = header.parent.as_ref().map(|link| link.flow.as_str());
            (header.id.as_str(), parent)
        })
        .collect();
    // A tree is named by its top-level flow; a flow whose parent is gone counts as one.
    let root_of = |id: &FlowId| -> String {
        let mut at = id.as_str();
        for _ in 0..=headers.len() {
            match parents.get(at) {
                Some(Some(parent)) if parents.contains_key(parent) => at = parent,
                _ => break,
            }
        }
        at.to_owned()
    };
    let mut kept = BTreeSet::new();
    for header in headers {
        let old_enough = header.finished_ms.unwrap_or(header.updated_ms) < finished_before_ms;
        if !header.status.is_finished() || !old_enough {
            kept.insert(root_of(&header.id));
        }
    }
    headers
        .iter()
        .filter(|header| !kept.contains(&root_of(&header.id)))
        .map(|header| header.id.clone())
        .collect()
}
