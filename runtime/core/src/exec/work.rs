//! The working copy of one command: reads go through to the [`Snapshot`] once and are kept,
//! writes stay here, and [`Work::into_changes`] hands the store exactly what changed.
//!
//! This is what keeps a `step_done` flat in the size of its flow: the core asks for the
//! header, the current step and the steps its bindings name, never for the whole flow.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;
use stratum_compiler::plan::Plan;

use crate::ids::FlowId;
use crate::state::{Checkpoint, Event, EventBody, FlowHeader, StepState};
use crate::store::{Changes, DiffKey, FlowChange, Snapshot, StoreError};

pub struct Work<'s> {
    snapshot: &'s mut dyn Snapshot,
    plans: HashMap<String, Arc<Plan>>,
    new_plans: Vec<Arc<Plan>>,
    flows: BTreeMap<FlowId, FlowWork>,
    cache: Vec<(String, Value)>,
    minted: u64,
    fence: Option<crate::store::Fence>,
}

struct FlowWork {
    header: FlowHeader,
    base_version: Option<u64>,
    dirty: bool,
    steps: HashMap<u32, StepState>,
    dirty_steps: BTreeSet<u32>,
    replace_steps: bool,
    events: Vec<Event>,
    revert_events_from: Option<u64>,
    checkpoints: Vec<Checkpoint>,
    diffs: BTreeMap<DiffKey, Option<String>>,
}

impl FlowWork {
    fn new(header: FlowHeader, base_version: Option<u64>) -> FlowWork {
        FlowWork {
            dirty: base_version.is_none(),
            header,
            base_version,
            steps: HashMap::new(),
            dirty_steps: BTreeSet::new(),
            replace_steps: false,
            events: Vec::new(),
            revert_events_from: None,
            checkpoints: Vec::new(),
            diffs: BTreeMap::new(),
        }
    }
}

impl<'s> Work<'s> {
    pub fn new(snapshot: &'s mut dyn Snapshot) -> Work<'s> {
        Work {
            snapshot,
            plans: HashMap::new(),
            new_plans: Vec::new(),
            flows: BTreeMap::new(),
            cache: Vec::new(),
            minted: 0,
            fence: None,
        }
    }

    /// Makes the changes conditional on the lease of `fence.root` (see
    /// [`crate::store::drives`]).
    pub fn fence(&mut self, fence: crate::store::Fence) {
        self.fence = Some(fence);
    }

    /// A new flow id, derived from the command's seed: the same command gives the same ids.
    pub fn mint(&mut self, seed: u128) -> FlowId {
        let id = FlowId::derive(seed, self.minted);
        self.minted += 1;
        id
    }

    /// The plan with this checksum.
    pub fn plan(&mut self, checksum: &str) -> Result<Arc<Plan>, StoreError> {
        if let Some(plan) = self.plans.get(checksum) {
            return Ok(plan.clone());
        }
        let plan = self
            .snapshot
            .plan(checksum)?
            .ok_or_else(|| StoreError::MissingPlan(checksum.to_owned()))?;
        self.plans.insert(checksum.to_owned(), plan.clone());
        Ok(plan)
    }

    /// Makes `plan` available, storing it unless the store has it.
    pub fn add_plan(&mut self, plan: Arc<Plan>) -> Result<(), StoreError> {
        if self.plans.contains_key(&plan.checksum) {
            return Ok(());
        }
        if self.snapshot.plan(&plan.checksum)?.is_none() {
            self.new_plans.push(plan.clone());
        }
        self.plans.insert(plan.checksum.clone(), plan);
        Ok(())
    }

    fn load(&mut self, id: &FlowId) -> Result<Option<&mut FlowWork>, StoreError> {
        if !self.flows.contains_key(id) {
            let Some(header) = self.snapshot.flow(id)? else {
                return Ok(None);
            };
            let version = header.version;
            self.flows
                .insert(id.clone(), FlowWork::new(header, Some(version)));
        }
        Ok(self.flows.get_mut(id))
    }

    fn loaded(&mut self, id: &FlowId) -> Result<&mut FlowWork, StoreError> {
        self.load(id)?
            .ok_or_else(|| StoreError::Corrupt(format!("flow {id} vanished during a command")))
    }

    /// The flow's header, if the flow exists.
    pub fn header(&mut self, id: &FlowId) -> Result<Option<FlowHeader>, StoreError> {
        Ok(self.load(id)?.map(|flow| flow.header.clone()))
    }

    /// The header of a flow this command has already read.
    pub fn get(&mut self, id: &FlowId) -> Result<FlowHeader, StoreError> {
        Ok(self.loaded(id)?.header.clone())
    }

    /// Changes a loaded flow's header.
    pub fn update<R>(
        &mut self,
        id: &FlowId,
        change: impl FnOnce(&mut FlowHeader) -> R,
    ) -> Result<R, StoreError> {
        let flow = self.loaded(id)?;
        flow.dirty = true;
        Ok(change(&mut flow.header))
    }

    pub fn create_flow(&mut self, header: FlowHeader) {
        self.flows
            .insert(header.id.clone(), FlowWork::new(header, None));
    }

    /// One step's state (the default when it has none).
    pub fn step(&mut self, id: &FlowId, step: u32) -> Result<StepState, StoreError> {
        Ok(self.step_entry(id, step)?.clone())
    }

    /// Whether a step has produced a (non-null) output, and that output.
    pub fn output(&mut self, id: &FlowId, step: u32) -> Result<Option<Value>, StoreError> {
        Ok(self.step_entry(id, step)?.output.clone())
    }

    fn step_entry(&mut self, id: &FlowId, step: u32) -> Result<&mut StepState, StoreError> {
        let flow = self.loaded(id)?;
        let stored = flow.base_version.is_some() && !flow.replace_steps;
        if stored && !flow.steps.contains_key(&step) {
            let state = self.snapshot.step(id, step)?.unwrap_or_default();
            self.loaded(id)?.steps.insert(step, state);
        }
        Ok(self.loaded(id)?.steps.entry(step).or_default())
    }

    /// Changes one step's state.
    pub fn update_step<R>(
        &mut self,
        id: &FlowId,
        step: u32,
        change: impl FnOnce(&mut StepState) -> R,
    ) -> Result<R, StoreError> {
        let result = change(self.step_entry(id, step)?);
        let flow = self.loaded(id)?;
        flow.dirty = true;
        flow.dirty_steps.insert(step);
        Ok(result)
    }

    /// The indices of the flow's steps with state at `from` or later.
    pub fn steps_from(&mut self, id: &FlowId, from: u32) -> Result<Vec<u32>, StoreError> {
        let flow = self.loaded(id)?;
        let mut found: BTreeSet<u32> = flow
            .steps
            .iter()
            .filter(|(index, state)| **index >= from && !state.is_empty())
            .map(|(index, _)| *index)
            .collect();
        let skip_store = flow.replace_steps || flow.base_version.is_none();
        if !skip_store {
            let stored = self.snapshot.steps_from(id, from)?;
            let flow = self.loaded(id)?;
            for (index, state) in stored {
                if let Some(current) = flow.steps.get(&index) {
                    if current.is_empty() {
                        found.remove(&index);
                    }
                    continue;
                }
                found.insert(index);
                flow.steps.insert(index, state);
            }
        }
        Ok(found.into_iter().collect())
    }

    /// Replaces every step's state (a revert).
    pub fn replace_steps(
        &mut self,
        id: &FlowId,
        steps: Vec<(u32, StepState)>,
    ) -> Result<(), StoreError> {
        let flow = self.loaded(id)?;
        flow.replace_steps = true;
        flow.dirty = true;
        flow.steps.clear();
        flow.dirty_steps.clear();
        for (index, state) in steps {
            flow.dirty_steps.insert(index);
            flow.steps.insert(index, state);
        }
        Ok(())
    }

    /// Appends an event in the flow's current round.
    pub fn push_event(&mut self, id: &FlowId, body: EventBody) -> Result<(), StoreError> {
        let flow = self.loaded(id)?;
        flow.dirty = true;
        let event = Event {
            seq: flow.header.events,
            round: flow.header.round,
            reverted: false,
            body,
        };
        flow.header.events += 1;
        flow.events.push(event);
        Ok(())
    }

    /// The flow's events, by number, reverted ones included.
    pub fn events(&mut self, id: &FlowId) -> Result<Vec<Event>, StoreError> {
        let created = self.loaded(id)?.base_version.is_none();
        let mut events = if created {
            Vec::new()
        } else {
            self.snapshot.events(id)?
        };
        let flow = self.loaded(id)?;
        if let Some(from) = flow.revert_events_from {
            for event in &mut events {
                if event.seq >= from {
                    event.reverted = true;
                }
            }
        }
        events.extend(flow.events.iter().cloned());
        Ok(events)
    }

    /// Marks the flow's events numbered `from` or later as reverted.
    pub fn revert_events(&mut self, id: &FlowId, from: u64) -> Result<(), StoreError> {
        let flow = self.loaded(id)?;
        flow.dirty = true;
        flow.revert_events_from = Some(from.min(flow.revert_events_from.unwrap_or(u64::MAX)));
        for event in &mut flow.events {
            if event.seq >= from {
                event.reverted = true;
            }
        }
        Ok(())
    }

    pub fn children(&mut self, id: &FlowId) -> Result<Vec<FlowId>, StoreError> {
        let mut children = match self.loaded(id)?.base_version {
            Some(_) => self.snapshot.children(id)?,
            None => Vec::new(),
        };
        for (child, flow) in &self.flows {
            let is_child = flow.base_version.is_none()
                && flow
                    .header
                    .parent
                    .as_ref()
                    .is_some_and(|link| link.flow == *id);
            if is_child && !children.contains(child) {
                children.push(child.clone());
            }
        }
        Ok(children)
    }

    pub fn checkpoint(
        &mut self,
        id: &FlowId,
        label: &str,
    ) -> Result<Option<Checkpoint>, StoreError> {
        if let Some(found) = self
            .loaded(id)?
            .checkpoints
            .iter()
            .rev()
            .find(|checkpoint| checkpoint.label == label)
        {
            return Ok(Some(found.clone()));
        }
        self.snapshot.checkpoint(id, label)
    }

    pub fn checkpoint_labels(&mut self, id: &FlowId) -> Result<Vec<String>, StoreError> {
        let mut labels = self.snapshot.checkpoint_labels(id)?;
        for checkpoint in &self.loaded(id)?.checkpoints {
            if !labels.contains(&checkpoint.label) {
                labels.push(checkpoint.label.clone());
            }
        }
        Ok(labels)
    }

    pub fn put_checkpoint(
        &mut self,
        id: &FlowId,
        checkpoint: Checkpoint,
    ) -> Result<(), StoreError> {
        let flow = self.loaded(id)?;
        flow.dirty = true;
        flow.checkpoints.push(checkpoint);
        Ok(())
    }

    /// The text of a fan-out task's diff: written by this command, or stored.
    pub fn task_diff(&mut self, id: &FlowId, key: &DiffKey) -> Result<Option<String>, StoreError> {
        let flow = self.loaded(id)?;
        if let Some(written) = flow.diffs.get(key) {
            return Ok(written.clone());
        }
        if flow.base_version.is_none() {
            return Ok(None);
        }
        self.snapshot.task_diff(id, key)
    }

    /// Stores a fan-out task's diff under `key` (`None`: deletes it).
    pub fn put_task_diff(
        &mut self,
        id: &FlowId,
        key: DiffKey,
        diff: Option<String>,
    ) -> Result<(), StoreError> {
        let flow = self.loaded(id)?;
        flow.dirty = true;
        flow.diffs.insert(key, diff);
        Ok(())
    }

    pub fn cached(&mut self, key: &str) -> Result<Option<Value>, StoreError> {
        if let Some((_, value)) = self.cache.iter().rev().find(|(stored, _)| stored == key) {
            return Ok(Some(value.clone()));
        }
        self.snapshot.cached(key)
    }

    pub fn put_cache(&mut self, key: String, value: Value) {
        self.cache.push((key, value));
    }

    /// Forgets every write (an error that must leave the store as it was).
    pub fn discard(&mut self) {
        self.flows.clear();
        self.cache.clear();
        self.new_plans.clear();
    }

    /// What the command changed.
    pub fn into_changes(self, now_ms: u64) -> Changes {
        let mut flows = BTreeMap::new();
        for (id, mut flow) in self.flows {
            if !flow.dirty {
                continue;
            }
            flow.header.version += 1;
            flow.header.updated_ms = now_ms;
            let steps = flow
                .dirty_steps
                .iter()
                .filter_map(|index| flow.steps.get(index).map(|state| (*index, state.clone())))
                .collect();
            flows.insert(
                id,
                FlowChange {
                    header: flow.header,
                    base_version: flow.base_version,
                    steps,
                    replace_steps: flow.replace_steps,
                    events: flow.events,
                    revert_events_from: flow.revert_events_from,
                    checkpoints: flow.checkpoints,
                    diffs: flow.diffs,
                },
            );
        }
        Changes {
            plans: self.new_plans,
            flows,
            cache: self.cache,
            fence: self.fence,
        }
    }
}
