//! A store in memory: the pure core's test bench and the reference the SQLite store is
//! compared with. One mutex makes every transaction exclusive.
//!
//! Browser sessions sit behind a second mutex, outside the data a transaction copies (up to
//! [`super::MAX_SESSIONS_PER_TOKEN`] per token would otherwise be copied by every flow command); whoever
//! takes both takes `data` first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use stratum_compiler::plan::Plan;

use super::drives::released;
use super::{
    AgentRun, Changes, DiffKey, Drive, DriveState, Enrolled, Pruned, Release, Session, Snapshot,
    Store, StoreError, Token,
};
use crate::ids::FlowId;
use crate::state::{Checkpoint, Event, FlowHeader, StepState};

#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
    /// Browser sessions by the SHA-256 of their id.
    sessions: Mutex<HashMap<String, Session>>,
    /// Agent runs by id, with the order they were first written (outside `data` for the same
    /// reason as sessions: their event logs would be copied by every command).
    runs: Mutex<Runs>,
}

/// Agent runs by id, and their ids in the order they were first written.
type Runs = (BTreeMap<String, AgentRun>, Vec<String>);

#[derive(Default, Clone)]
struct Data {
    plans: HashMap<String, Arc<Plan>>,
    flows: BTreeMap<FlowId, Rows>,
    /// Flow ids in creation order.
    order: Vec<FlowId>,
    cache: HashMap<String, Value>,
    /// Access tokens by name.
    tokens: BTreeMap<String, Token>,
    secrets: BTreeMap<String, String>,
    /// Unattended drives by flow.
    drives: BTreeMap<FlowId, Drive>,
}

#[derive(Default, Clone)]
struct Rows {
    header: Option<FlowHeader>,
    steps: BTreeMap<u32, StepState>,
    events: Vec<Event>,
    /// In the order their labels were first committed; a label committed again keeps its place.
    checkpoints: Vec<Checkpoint>,
    /// Fan-out task diffs, shared so that the copy every transaction makes does not copy them.
    diffs: BTreeMap<DiffKey, Arc<str>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Data>, StoreError> {
        self.data
            .lock()
            .map_err(|_| StoreError::Database("the memory store's lock is poisoned".to_owned()))
    }

    fn lock_runs(&self) -> Result<std::sync::MutexGuard<'_, Runs>, StoreError> {
        self.runs
            .lock()
            .map_err(|_| StoreError::Database("the memory store's run lock is poisoned".to_owned()))
    }

    fn lock_sessions(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, HashMap<String, Session>>, StoreError> {
        self.sessions.lock().map_err(|_| {
            StoreError::Database("the memory store's session lock is poisoned".to_owned())
        })
    }
}

impl Snapshot for Data {
    fn plan(&mut self, checksum: &str) -> Result<Option<Arc<Plan>>, StoreError> {
        Ok(self.plans.get(checksum).cloned())
    }

    fn flow(&mut self, id: &FlowId) -> Result<Option<FlowHeader>, StoreError> {
        Ok(self.flows.get(id).and_then(|rows| rows.header.clone()))
    }

    fn step(&mut self, id: &FlowId, step: u32) -> Result<Option<StepState>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .and_then(|rows| rows.steps.get(&step).cloned()))
    }

    fn steps_from(&mut self, id: &FlowId, from: u32) -> Result<Vec<(u32, StepState)>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .map(|rows| {
                rows.steps
                    .range(from..)
                    .map(|(index, state)| (*index, state.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    fn events(&mut self, id: &FlowId) -> Result<Vec<Event>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .map(|rows| rows.events.clone())
            .unwrap_or_default())
    }

    fn children(&mut self, id: &FlowId) -> Result<Vec<FlowId>, StoreError> {
        Ok(self
            .order
            .iter()
            .filter(|child| {
                self.flows
                    .get(*child)
                    .and_then(|rows| rows.header.as_ref())
                    .and_then(|header| header.parent.as_ref())
                    .is_some_and(|link| link.flow == *id)
            })
            .cloned()
            .collect())
    }

    fn checkpoint(&mut self, id: &FlowId, label: &str) -> Result<Option<Checkpoint>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .and_then(|rows| rows.checkpoints.iter().find(|c| c.label == label).cloned()))
    }

    fn checkpoint_labels(&mut self, id: &FlowId) -> Result<Vec<String>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .map(|rows| rows.checkpoints.iter().map(|c| c.label.clone()).collect())
            .unwrap_or_default())
    }

    fn cached(&mut self, key: &str) -> Result<Option<Value>, StoreError> {
        Ok(self.cache.get(key).cloned())
    }

    fn task_diff(&mut self, id: &FlowId, key: &DiffKey) -> Result<Option<String>, StoreError> {
        Ok(self
            .flows
            .get(id)
            .and_then(|rows| rows.diffs.get(key))
            .map(|text| text.to_string()))
    }
}

impl Data {
    fn apply(&mut self, changes: Changes) -> Result<(), StoreError> {
        if !changes.is_empty()
            && let Some(fence) = &changes.fence
            && let Some(drive) = self.drives.get(&fence.root)
            && drive.fences_out(fence.driver.as_deref(), fence.now_ms)
        {
            return Err(StoreError::Leased {
                flow: fence.root.clone(),
                owner: drive.owner.clone().unwrap_or_default(),
                expires_ms: drive.expires_ms,
            });
        }
        for plan in changes.plans {
            self.plans.entry(plan.checksum.clone()).or_insert(plan);
        }
        for (id, change) in changes.flows {
            let current = self
                .flows
                .get(&id)
                .and_then(|rows| rows.header.as_ref())
                .map(|h| h.version);
            if current != change.base_version {
                return Err(StoreError::Conflict(id));
            }
            if change.base_version.is_none() {
                self.order.push(id.clone());
            }
            let rows = self.flows.entry(id).or_default();
            rows.header = Some(change.header);
            if change.replace_steps {
                rows.steps.clear();
            }
            for (index, state) in change.steps {
                if state.is_empty() {
                    rows.steps.remove(&index);
                } else {
                    rows.steps.insert(index, state);
                }
            }
            if let Some(from) = change.revert_events_from {
                for event in &mut rows.events {
                    if event.seq >= from {
                        event.reverted = true;
                    }
                }
            }
            rows.events.extend(change.events);
            for (key, diff) in change.diffs {
                match diff {
                    Some(text) => rows.diffs.insert(key, Arc::from(text)),
                    None => rows.diffs.remove(&key),
                };
            }
            for checkpoint in change.checkpoints {
                match rows
                    .checkpoints
                    .iter_mut()
                    .find(|kept| kept.label == checkpoint.label)
                {
                    Some(kept) => *kept = checkpoint,
                    None => rows.checkpoints.push(checkpoint),
                }
            }
        }
        for (key, value) in changes.cache {
            self.cache.insert(key, value);
        }
        Ok(())
    }
}

impl Store for MemoryStore {
    fn transact(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<Changes, StoreError>,
    ) -> Result<(), StoreError> {
        let mut data = self.lock()?;
        // The core reads a copy, so that an error leaves the store as it was.
        let mut view = data.clone();
        let changes = work(&mut view)?;
        data.apply(changes)
    }

    fn read(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut data = self.lock()?;
        work(&mut *data)
    }

    fn list_flows(&self) -> Result<Vec<FlowHeader>, StoreError> {
        let data = self.lock()?;
        Ok(data
            .order
            .iter()
            .rev()
            .filter_map(|id| data.flows.get(id).and_then(|rows| rows.header.clone()))
            .collect())
    }

    fn prune(&self, finished_before_ms: u64) -> Result<Pruned, StoreError> {
        let mut data = self.lock()?;
        let headers: Vec<FlowHeader> = data
            .flows
            .values()
            .filter_map(|rows| rows.header.clone())
            .collect();
        let doomed = super::prunable(&headers, finished_before_ms);
        let Data {
            flows,
            order,
            plans,
            drives,
            ..
        } = &mut *data;
        for id in &doomed {
            flows.remove(id);
            drives.remove(id);
        }
        let mut runs = self.lock_runs()?;
        let (by_id, run_order) = &mut *runs;
        by_id.retain(|_, run| match &run.flow {
            Some(flow) => flows.contains_key(flow),
            None => run.finished_ms.is_none_or(|at| at >= finished_before_ms),
        });
        run_order.retain(|id| by_id.contains_key(id));
        order.retain(|id| flows.contains_key(id));
        let used: std::collections::HashSet<&str> = flows
            .values()
            .filter_map(|rows| rows.header.as_ref().map(|header| header.plan.as_str()))
            .collect();
        let before = plans.len();
        plans.retain(|checksum, _| used.contains(checksum.as_str()));
        Ok(Pruned {
            flows: doomed,
            plans: before - plans.len(),
        })
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
        let mut data = self.lock()?;
        Ok(data
            .secrets
            .entry(name.to_owned())
            .or_insert_with(|| fresh.to_owned())
            .clone())
    }

    fn add_token(&self, token: &Token) -> Result<(), StoreError> {
        let mut data = self.lock()?;
        if data.tokens.contains_key(&token.name) {
            return Err(StoreError::TokenExists(token.name.clone()));
        }
        data.tokens.insert(token.name.clone(), token.clone());
        Ok(())
    }

    fn tokens(&self) -> Result<Vec<Token>, StoreError> {
        Ok(self.lock()?.tokens.values().cloned().collect())
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<Token>, StoreError> {
        Ok(self
            .lock()?
            .tokens
            .values()
            .find(|token| token.hash == hash)
            .cloned())
    }

    fn revoke_token(&self, name: &str) -> Result<bool, StoreError> {
        let mut data = self.lock()?;
        let Some(token) = data.tokens.remove(name) else {
            return Ok(false);
        };
        self.lock_sessions()?
            .retain(|_, session| session.token_hash != token.hash);
        Ok(true)
    }

    fn token_used(&self, hash: &str, at_ms: u64) -> Result<(), StoreError> {
        let mut data = self.lock()?;
        if let Some(token) = data.tokens.values_mut().find(|token| token.hash == hash) {
            token.last_used_ms = Some(at_ms);
        }
        Ok(())
    }

    fn open_session(
        &self,
        id_hash: &str,
        session: &Session,
        now_ms: u64,
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut sessions = self.lock_sessions()?;
        sessions.retain(|kept_hash, kept| kept.expires_ms > now_ms && kept_hash != id_hash);
        let mut by_expiry: Vec<(u64, String)> = sessions
            .iter()
            .filter(|(_, kept)| kept.token_hash == session.token_hash)
            .map(|(kept_hash, kept)| (kept.expires_ms, kept_hash.clone()))
            .collect();
        let excess = (by_expiry.len() + 1).saturating_sub(keep.max(1));
        if excess > 0 {
            by_expiry.sort();
            for (_, doomed) in by_expiry.into_iter().take(excess) {
                sessions.remove(&doomed);
            }
        }
        sessions.insert(id_hash.to_owned(), session.clone());
        Ok(())
    }

    fn session(&self, id_hash: &str, now_ms: u64) -> Result<Option<Session>, StoreError> {
        Ok(self
            .lock_sessions()?
            .get(id_hash)
            .filter(|session| session.expires_ms > now_ms)
            .cloned())
    }

    fn close_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(self.lock_sessions()?.remove(id_hash).is_some())
    }

    fn enroll(&self, drive: &Drive) -> Result<Enrolled, StoreError> {
        let mut data = self.lock()?;
        if let Some(kept) = data.drives.get(&drive.flow)
            && kept.state == DriveState::Active
        {
            return Ok(Enrolled::AlreadyActive(kept.clone()));
        }
        data.drives.insert(drive.flow.clone(), drive.clone());
        Ok(Enrolled::Enrolled(drive.clone()))
    }

    fn claim(
        &self,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
        only: Option<&FlowId>,
    ) -> Result<Option<Drive>, StoreError> {
        let mut data = self.lock()?;
        let version_of = |data: &Data, flow: &FlowId| {
            data.flows
                .get(flow)
                .and_then(|rows| rows.header.as_ref())
                .map(|header| header.version)
        };
        let chosen = data
            .drives
            .values()
            .filter(|drive| only.is_none_or(|flow| drive.flow == *flow))
            .filter(|drive| {
                let parked = drive
                    .parked
                    .as_ref()
                    .and_then(|parked| version_of(&data, &parked.flow));
                drive.claimable(now_ms, parked)
            })
            .min_by_key(|drive| (drive.turn_ms, drive.flow.clone()))
            .map(|drive| drive.flow.clone());
        let Some(flow) = chosen else {
            return Ok(None);
        };
        let Some(drive) = data.drives.get_mut(&flow) else {
            return Ok(None);
        };
        drive.owner = Some(owner.to_owned());
        drive.expires_ms = now_ms.saturating_add(lease_ms);
        drive.parked = None;
        drive.turn_ms = now_ms;
        Ok(Some(drive.clone()))
    }

    fn renew(
        &self,
        flow: &FlowId,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut data = self.lock()?;
        match data.drives.get_mut(flow) {
            Some(drive)
                if drive.state == DriveState::Active && drive.owner.as_deref() == Some(owner) =>
            {
                drive.expires_ms = now_ms.saturating_add(lease_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release(
        &self,
        flow: &FlowId,
        owner: &str,
        release: &Release,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut data = self.lock()?;
        let Some(drive) = data.drives.get_mut(flow) else {
            return Ok(false);
        };
        if drive.owner.as_deref() != Some(owner) {
            return Ok(false);
        }
        *drive = released(drive.clone(), release, now_ms);
        Ok(true)
    }

    fn cancel_drive(&self, flow: &FlowId, note: &str) -> Result<Option<Drive>, StoreError> {
        let mut data = self.lock()?;
        let Some(drive) = data.drives.get_mut(flow) else {
            return Ok(None);
        };
        let before = drive.clone();
        if drive.state == DriveState::Active {
            drive.state = DriveState::Cancelled;
            drive.note = Some(note.to_owned());
            drive.parked = None;
        }
        Ok(Some(before))
    }

    fn drive(&self, flow: &FlowId) -> Result<Option<Drive>, StoreError> {
        Ok(self.lock()?.drives.get(flow).cloned())
    }

    fn drives(&self) -> Result<Vec<Drive>, StoreError> {
        let mut drives: Vec<Drive> = self.lock()?.drives.values().cloned().collect();
        drives.sort_by_key(|drive| (drive.created_ms, drive.flow.clone()));
        Ok(drives)
    }

    fn put_run(&self, run: &AgentRun) -> Result<(), StoreError> {
        let mut runs = self.lock_runs()?;
        let (by_id, order) = &mut *runs;
        if by_id.insert(run.id.clone(), run.clone()).is_none() {
            order.push(run.id.clone());
        }
        Ok(())
    }

    fn agent_run(&self, id: &str) -> Result<Option<AgentRun>, StoreError> {
        Ok(self.lock_runs()?.0.get(id).cloned())
    }

    fn agent_runs(&self, flow: Option<&FlowId>, limit: usize) -> Result<Vec<AgentRun>, StoreError> {
        let runs = self.lock_runs()?;
        let (by_id, order) = &*runs;
        Ok(order
            .iter()
            .rev()
            .filter_map(|id| by_id.get(id))
            .filter(|run| flow.is_none_or(|flow| run.flow.as_ref() == Some(flow)))
            .take(limit)
            .cloned()
            .collect())
    }
}
