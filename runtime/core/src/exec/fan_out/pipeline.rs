//! Pipelines: every item of `source` through the stages in order, one task per item and
//! stage (`item<i>.stage<j>`), a fan-out region's lanes one task per element of the split's
//! result (`item<i>.stage<j>.lane<k>`).
//!
//! Tasks appear as the ones before them settle: [`expand`] walks each item from its first
//! stage and creates the next task it needs, deciding the stage's `when` first (false: the
//! task is `skipped` and passes on what it was given, the item at the first stage). When a
//! task completes, [`settled`] checks what the VM decides after it: a split's result must be
//! a list of at most `fanout.max` elements, and `exit_when` ends the item (its later stages
//! are `skipped`). The join waits for every lane of its item, then counts its lane
//! `require` over the lanes the split filled; unmet, the join is `cancelled` and the item
//! fails. An item completes when every stage of it completed or was skipped; `require`
//! counts items.
//!
//! The reference's evaluation rules are kept where they are semantics rather than bugs: a
//! `when` that cannot be evaluated runs the stage (fail open); an `exit_when` that cannot be
//! evaluated fails the task, with the reason (fail closed, and said).

use serde_json::{Value, json};
use stratum_compiler::plan::{FanOut, Require, Stage};
use stratum_grammar::Bindings;

use super::render;
use super::tasks::{MAX_TASKS, type_name};
use crate::exec::Run;
use crate::state::{FanOutState, MergeState, Slot, TaskState, TaskStatus};

/// The id of a pipeline task.
pub(super) fn task_id(item: u32, stage: u32, lane: Option<u32>) -> String {
    match lane {
        Some(lane) => format!("item{item}.stage{stage}.lane{lane}"),
        None => format!("item{item}.stage{stage}"),
    }
}

/// The items of a pipeline's `source`, checked.
pub(super) fn read_items(source: &Value) -> Result<Vec<Value>, Vec<String>> {
    let Some(items) = source.as_array() else {
        return Err(vec![format!(
            "the step's source must be a list of items, got {}",
            type_name(source)
        )]);
    };
    if items.is_empty() {
        return Err(vec![
            "the step's source is an empty list: there is no item to run".to_owned(),
        ]);
    }
    if items.len() > MAX_TASKS {
        return Err(vec![format!(
            "the step's source has {} items, more than the {MAX_TASKS} one pipeline may run; split the work",
            items.len()
        )]);
    }
    Ok(items.clone())
}

/// The stage `index` of `stages` is a lane stage: between a split and its join.
fn region(stages: &[Stage]) -> Option<(usize, usize)> {
    let split = stages.iter().position(|stage| stage.fanout.is_some())?;
    let join = stages.iter().position(|stage| stage.join)?;
    (split < join).then_some((split, join))
}

/// What creating a task needs besides the plan.
pub(super) struct Maker<'a> {
    pub(super) run: &'a Run<'a>,
    pub(super) fan_out: &'a FanOut,
    pub(super) stages: &'a [Stage],
    pub(super) attempt: u32,
    pub(super) now_ms: u64,
    /// The violations of the previous attempt's tasks that run again, by id.
    pub(super) previous: Vec<(String, Vec<String>)>,
}

impl Maker<'_> {
    /// Creates every task the items need next.
    pub(super) fn expand(&self, fan: &mut FanOutState) {
        for item in 0..fan.items.len() {
            let item = u32::try_from(item).unwrap_or(u32::MAX);
            // Bounded: each round adds a task or stops; an item has at most
            // stages × (lanes + 1) tasks.
            for _ in 0..10_000 {
                if !self.step_item(fan, item) {
                    break;
                }
            }
        }
    }

    /// Walks item `item` from its first stage; creates the first task it lacks. Whether one
    /// was created that settled at once (skipped), so the walk goes on.
    fn step_item(&self, fan: &mut FanOutState, item: u32) -> bool {
        let Some(value) = fan.items.get(item as usize).cloned() else {
            return false;
        };
        let region = region(self.stages);
        let mut prev: Option<Value> = None;
        let mut stage = 0usize;
        while stage < self.stages.len() {
            let at = u32::try_from(stage).unwrap_or(u32::MAX);
            let Some(task) = find(fan, item, at, None) else {
                return self.create(fan, item, at, None, &value, prev.as_ref(), None);
            };
            if !matches!(task.status, TaskStatus::Complete | TaskStatus::Skipped)
                || task.merge == MergeState::Conflict
            {
                return false;
            }
            if task.slot.is_some_and(|slot| slot.exited) {
                self.skip_rest(fan, item, stage + 1);
                return false;
            }
            let result = task.result.clone();
            match region {
                Some((split, join)) if stage == split => {
                    let split_result = result.clone().unwrap_or(Value::Null);
                    match self.lanes(fan, item, &value, &split_result, split, join) {
                        Lanes::Created => return true,
                        Lanes::Waiting => return false,
                        Lanes::Done => {
                            stage = join;
                            continue;
                        }
                    }
                }
                _ => {}
            }
            prev = Some(result.unwrap_or(Value::Null));
            stage += 1;
        }
        false
    }

    /// The lanes of item `item`'s fan-out region, then its join.
    fn lanes(
        &self,
        fan: &mut FanOutState,
        item: u32,
        source: &Value,
        split_result: &Value,
        split: usize,
        join: usize,
    ) -> Lanes {
        let elements = list_of(split_result).unwrap_or_default();
        let (mut created, mut waiting) = (false, false);
        let mut complete = Vec::new();
        let mut complete_ids = Vec::new();
        for (lane, element) in elements.iter().enumerate() {
            let lane = u32::try_from(lane).unwrap_or(u32::MAX);
            let mut prev = split_result.clone();
            let mut last = task_id(item, u32::try_from(split).unwrap_or(u32::MAX), None);
            let mut done = true;
            let mut open = false;
            for stage in split + 1..join {
                let at = u32::try_from(stage).unwrap_or(u32::MAX);
                match find(fan, item, at, Some(lane)) {
                    None => {
                        self.create(
                            fan,
                            item,
                            at,
                            Some(lane),
                            element,
                            Some(&prev),
                            Some(source),
                        );
                        created = true;
                        open = true;
                        break;
                    }
                    Some(task)
                        if matches!(task.status, TaskStatus::Complete | TaskStatus::Skipped) =>
                    {
                        prev = task.result.clone().unwrap_or(Value::Null);
                        last = task.id.clone();
                    }
                    Some(task) if task.status.is_terminal() => {
                        done = false;
                        break;
                    }
                    Some(_) => {
                        waiting = true;
                        open = true;
                        break;
                    }
                }
            }
            if done && !open {
                complete.push(prev);
                complete_ids.push(last);
            }
        }
        if created {
            return Lanes::Created;
        }
        if waiting {
            return Lanes::Waiting;
        }
        let join_at = u32::try_from(join).unwrap_or(u32::MAX);
        if find(fan, item, join_at, None).is_some() {
            return Lanes::Done;
        }
        let require = self
            .stages
            .get(split)
            .and_then(|stage| stage.fanout)
            .map_or(Require::All, |fanout| fanout.require);
        let met = match require {
            Require::All => complete.len() == elements.len(),
            Require::Any => !complete.is_empty(),
            Require::AtLeast(count) => complete.len() >= count as usize,
        };
        if !met {
            let id = task_id(item, join_at, None);
            let violation = format!(
                "task '{id}': {} of {} lanes completed, the fan-out's require {} is not met",
                complete.len(),
                elements.len(),
                super::require_text(require)
            );
            let mut join = self.task(
                item,
                join_at,
                None,
                source,
                String::new(),
                TaskStatus::Cancelled,
                vec![violation],
            );
            join.depends_on = complete_ids;
            fan.tasks.push(join);
            return Lanes::Created;
        }
        let prevs = Value::Array(complete);
        self.create_with(
            fan,
            item,
            join_at,
            source,
            None,
            Some(&prevs),
            &complete_ids,
        );
        Lanes::Created
    }

    /// Creates the task of (`item`, `stage`, `lane`): skipped when the stage's `when` says
    /// so (its result: what it was given), else pending with its prompt (failed when the
    /// prompt cannot be rendered). Whether the walk may go on at once.
    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        fan: &mut FanOutState,
        item: u32,
        stage: u32,
        lane: Option<u32>,
        value: &Value,
        prev: Option<&Value>,
        source: Option<&Value>,
    ) -> bool {
        let Some(plan_stage) = self.stages.get(stage as usize) else {
            return false;
        };
        let prev_text = prev.map(as_text);
        if let Some(when) = &plan_stage.when {
            let mut bindings = Bindings::new().name("item", value);
            if let (Some(prev), Some(text)) = (prev, prev_text.as_ref()) {
                bindings = bindings.name("prev", text).name("prev_raw", prev);
            }
            // A `when` that cannot be decided runs the stage (the reference's fail-open).
            let runs = when
                .program
                .evaluate_bool(&bindings, &self.run.ctx.config.limits)
                .unwrap_or(true);
            if !runs {
                let mut task = self.task(
                    item,
                    stage,
                    lane,
                    value,
                    String::new(),
                    TaskStatus::Skipped,
                    Vec::new(),
                );
                task.result = Some(prev.cloned().unwrap_or_else(|| value.clone()));
                fan.tasks.push(task);
                return true;
            }
        }
        let id = task_id(item, stage, lane);
        let bound = render::Bound {
            item: Some(value),
            source,
            task_id: &id,
            prev,
            prevs: None,
        };
        let (status, prompt, violations) =
            match render::render(&self.run.plan, &plan_stage.template, &bound) {
                Ok(prompt) => (
                    TaskStatus::Pending,
                    super::with_violations(
                        super::with_certificate(prompt, self.certificate(plan_stage)),
                        &self.carried(&id),
                    ),
                    Vec::new(),
                ),
                Err(problem) => (TaskStatus::Failed, String::new(), vec![problem]),
            };
        let mut task = self.task(item, stage, lane, value, prompt, status, violations);
        task.violations.extend(self.carried(&id));
        fan.tasks.push(task);
        false
    }

    /// A stage's certificate template: its own, else the step's.
    fn certificate<'s>(&'s self, stage: &'s Stage) -> Option<&'s Value> {
        stage
            .task_reasoning_template
            .as_ref()
            .or(self.fan_out.task_reasoning_template.as_ref())
    }

    /// The violations of the task of the same id in the previous attempt, for its prompt.
    fn carried(&self, id: &str) -> Vec<String> {
        self.previous
            .iter()
            .find(|(previous, _)| previous == id)
            .map(|(_, violations)| violations.clone())
            .unwrap_or_default()
    }

    /// Creates a join task: `{prevs}` the completed lanes' results.
    #[allow(clippy::too_many_arguments)]
    fn create_with(
        &self,
        fan: &mut FanOutState,
        item: u32,
        stage: u32,
        source: &Value,
        prev: Option<&Value>,
        prevs: Option<&Value>,
        lanes_done: &[String],
    ) {
        let Some(plan_stage) = self.stages.get(stage as usize) else {
            return;
        };
        let id = task_id(item, stage, None);
        let prevs_text = prevs.map(|value| Value::String(value.to_string()));
        let bound = render::Bound {
            item: Some(source),
            source: Some(source),
            task_id: &id,
            prev,
            prevs: prevs_text.as_ref().or(prevs),
        };
        let mut task = match render::render(&self.run.plan, &plan_stage.template, &bound) {
            Ok(prompt) => self.task(
                item,
                stage,
                None,
                source,
                super::with_violations(
                    super::with_certificate(prompt, self.certificate(plan_stage)),
                    &self.carried(&id),
                ),
                TaskStatus::Pending,
                Vec::new(),
            ),
            Err(problem) => self.task(
                item,
                stage,
                None,
                source,
                String::new(),
                TaskStatus::Failed,
                vec![problem],
            ),
        };
        task.depends_on = lanes_done.to_vec();
        fan.tasks.push(task);
    }

    /// The item's stages from `from` on are skipped: an `exit_when` ended it.
    fn skip_rest(&self, fan: &mut FanOutState, item: u32, from: usize) {
        let region = region(self.stages);
        for stage in from..self.stages.len() {
            if region.is_some_and(|(split, join)| stage > split && stage < join) {
                continue;
            }
            let at = u32::try_from(stage).unwrap_or(u32::MAX);
            if find(fan, item, at, None).is_none() {
                let value = fan.items.get(item as usize).cloned().unwrap_or(Value::Null);
                let mut task = self.task(
                    item,
                    at,
                    None,
                    &value,
                    String::new(),
                    TaskStatus::Skipped,
                    Vec::new(),
                );
                task.violations = vec!["an earlier stage's exit_when ended the item".to_owned()];
                fan.tasks.push(task);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn task(
        &self,
        item: u32,
        stage: u32,
        lane: Option<u32>,
        value: &Value,
        prompt: String,
        status: TaskStatus,
        violations: Vec<String>,
    ) -> TaskState {
        let plan_stage = self.stages.get(stage as usize);
        // What it follows: the item's previous stage; in a lane, the split, then the lane's
        // previous stage. (A join's are its completed lanes, set where it is made.)
        let first_lane = region(self.stages).is_some_and(|(split, _)| stage as usize == split + 1);
        let depends_on = match stage.checked_sub(1) {
            None => Vec::new(),
            Some(before) if first_lane => vec![task_id(item, before, None)],
            Some(before) => vec![task_id(item, before, lane)],
        };
        let settled = status.is_terminal();
        TaskState {
            id: task_id(item, stage, lane),
            element: value.clone(),
            prompt,
            depends_on,
            agent: plan_stage
                .and_then(|stage| stage.agent.clone())
                .or_else(|| self.fan_out.agent.clone()),
            timeout_s: plan_stage
                .and_then(|stage| stage.task_timeout)
                .unwrap_or(self.fan_out.task_timeout),
            attempt: self.attempt,
            status,
            violations,
            finished_ms: settled.then_some(self.now_ms),
            slot: Some(Slot {
                item,
                stage,
                lane,
                exited: false,
            }),
            ..TaskState::default()
        }
    }
}

enum Lanes {
    Created,
    Waiting,
    Done,
}

fn find(fan: &FanOutState, item: u32, stage: u32, lane: Option<u32>) -> Option<&TaskState> {
    fan.tasks.iter().find(|task| {
        task.slot
            .is_some_and(|slot| slot.item == item && slot.stage == stage && slot.lane == lane)
    })
}

/// A value as `{prev}` and `result` show it: a string as it is, anything else as JSON text.
fn as_text(value: &Value) -> Value {
    match value {
        Value::String(_) => value.clone(),
        other => Value::String(other.to_string()),
    }
}

/// A split's result as a list: a list, or text holding a JSON list.
fn list_of(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items.clone()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => Some(items),
            _ => None,
        },
        _ => None,
    }
}

/// What the VM decides once a pipeline task completed with `result`: the violations that
/// fail it instead (a split that returned no list, or too long a one; an `exit_when` that
/// could not be evaluated), and whether its `exit_when` ends the item.
pub(super) fn settled(run: &Run<'_>, stages: &[Stage], task: &mut TaskState) {
    let Some(slot) = task.slot else { return };
    let Some(stage) = stages.get(slot.stage as usize) else {
        return;
    };
    let result = task.result.clone().unwrap_or(Value::Null);
    if let Some(fanout) = stage.fanout {
        match list_of(&result) {
            Some(elements) if elements.len() <= fanout.max as usize => {}
            Some(elements) => {
                task.status = TaskStatus::Failed;
                task.violations.push(format!(
                    "task '{}': the fan-out stage returned {} elements, more than its max of {}",
                    task.id,
                    elements.len(),
                    fanout.max
                ));
                return;
            }
            None => {
                task.status = TaskStatus::Failed;
                task.violations.push(format!(
                    "task '{}': a fan-out stage must answer a list (or text holding a JSON list), got {}",
                    task.id,
                    type_name(&result)
                ));
                return;
            }
        }
    }
    if let Some(exit) = &stage.exit_when {
        let text = as_text(&result);
        let bindings = Bindings::new()
            .name("item", &task.element)
            .name("result", &text)
            .name("result_raw", &result);
        match exit
            .program
            .evaluate_bool(&bindings, &run.ctx.config.limits)
        {
            Ok(true) => {
                if let Some(slot) = task.slot.as_mut() {
                    slot.exited = true;
                }
            }
            Ok(false) => {}
            Err(error) => {
                task.status = TaskStatus::Failed;
                task.violations.push(format!(
                    "task '{}': exit_when '{}' could not be evaluated: {}",
                    task.id,
                    exit.program.source(),
                    error.message
                ));
            }
        }
    }
}

/// One item as the aggregate shows it.
pub(super) struct ItemView {
    pub(super) complete: bool,
    /// Neither complete nor failed yet: it may still complete.
    pub(super) open: bool,
    pub(super) value: Value,
}

/// Every item: complete when each of its stages (lanes aside: the join judged them) completed
/// or was skipped, `failed` when one failed or was cancelled, else `incomplete`; its result
/// is its last completed stage's.
pub(super) fn items(fan: &FanOutState, stages: &[Stage]) -> Vec<ItemView> {
    let region = region(stages);
    let mut views = Vec::with_capacity(fan.items.len());
    for (at, item) in fan.items.iter().enumerate() {
        let at = u32::try_from(at).unwrap_or(u32::MAX);
        let mut status = "complete";
        let mut result = Value::Null;
        let mut stage_views = Vec::new();
        for stage in 0..stages.len() {
            let index = u32::try_from(stage).unwrap_or(u32::MAX);
            let lanes = region.is_some_and(|(split, join)| stage > split && stage < join);
            let tasks: Vec<&TaskState> = fan
                .tasks
                .iter()
                .filter(|task| {
                    task.slot
                        .is_some_and(|slot| slot.item == at && slot.stage == index)
                })
                .collect();
            for task in &tasks {
                stage_views.push(json!({
                    "stage": index,
                    "lane": task.slot.and_then(|slot| slot.lane),
                    "task_id": task.id,
                    "status": task.status.as_str(),
                    "result": task.result.clone().unwrap_or(Value::Null),
                }));
            }
            if lanes {
                continue;
            }
            match tasks.first() {
                None => {
                    if status == "complete" {
                        status = "incomplete";
                    }
                }
                Some(task) => match task.status {
                    TaskStatus::Complete if task.merge != MergeState::Conflict => {
                        result = task.result.clone().unwrap_or(Value::Null);
                    }
                    TaskStatus::Skipped => {}
                    TaskStatus::Pending | TaskStatus::Running => {
                        if status == "complete" {
                            status = "incomplete";
                        }
                    }
                    _ => status = "failed",
                },
            }
        }
        views.push(ItemView {
            complete: status == "complete",
            open: status == "incomplete",
            value: json!({
                "item": item,
                "status": status,
                "result": result,
                "stages": stage_views,
            }),
        });
    }
    views
}
