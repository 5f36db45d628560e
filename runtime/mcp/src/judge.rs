//! `stratum_judge`: the server decides a judge step's predicates, and its verdict binds.
//!
//! The order: the call is checked against the flow (its current step is this judge step; any
//! predicates, stakes or budget sent must equal the plan's); the artifacts and modified files
//! are staged in a turn directory the server owns (`<home>/judge/<flow>/<step>/turn-<n>/`:
//! `artifacts/<name>.txt`, `modified/<path>` copied from the project, `manifest.json` with
//! each file's SHA-256); the first tier evaluates every deterministic predicate in our VM,
//! its file built-ins rooted at the turn directory (no `eval`, no `..` or symbolic link out);
//! the second tier asks an agent CLI about each verified or judged predicate (unless the stakes
//! are `cheap`), in its read-only mode (the operator's own arguments for the CLI give way),
//! working in the turn directory, and checks that every citation (`path:line`)
//! exists there; a `met` below the predicate's `applied_gate` is `ambiguous`. Under `paranoid`
//! stakes a second-tier `met` goes to the third tier, a cold read: a fresh agent run told only
//! the predicate and the staged files' names (nothing of the second tier's answer), on another
//! CLI than the second tier's when one is installed (Codex after Claude, Claude after Codex),
//! else on the same CLI in a fresh session (`t3.mode` says which), read-only, in the same turn
//! directory, its citations checked the same way. Anything but a `met` from it makes the
//! predicate `ambiguous` with a `tier_disagreements` entry. Every agent tier run counts a turn
//! of the budget and gets what is left of its wall clock as its deadline; a tier the budget
//! has no room for leaves the predicate `ambiguous` with the reason, never skipped. The
//! verdict goes to the runtime (`Command::JudgeVerdict`), which completes the step, fails its
//! attempt, or waits for a person; the answer carries the verdict and what the flow does next.
//!
//! What the reference did and this does not: `eval` of deterministic statements (a
//! `__subclasses__` predicate ran `os.system`), reads escaping the staging directory, a
//! verdict that does not bind, wall time checked only between predicates. The reference ran
//! the cold read as Codex in a Docker container with `-e OPENAI_API_KEY=…` on docker's argv,
//! where any process of the machine could read it. We use no container: the cold read runs the
//! agent CLI in its own read-only mode (Codex's `--sandbox read-only`; Claude limited to its
//! Read, Grep and Glob tools) under the agents' environment allow-list, and a key reaches the
//! agent only through that environment, never an argv; `meta.t3_summary.all_jailed` is
//! therefore always false.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use stratum_agents::{Agent, Connector, Outcome, Prompt, Request};
use stratum_compiler::plan::{Action, JudgeBudget, JudgePredicate, PredicateKind, Stakes, Step};
use stratum_driver::Driver;
use stratum_grammar::Bindings;

use crate::args::JudgeArgs;
use crate::command::Command;
use crate::ids::FlowId;
use crate::outputs::ToolError;

/// The largest file staged from the project.
const MAX_STAGED_FILE: u64 = 4 * 1024 * 1024;
/// How long an agent tier run may take when the budget sets no wall clock.
const DEFAULT_TIER_DEADLINE: Duration = Duration::from_secs(600);

/// `stratum_judge`'s answer.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Judged {
    #[schemars(extend("const" = "judged"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    /// The verdict as recorded: `met`, each predicate's verdict, confidence, evidence and
    /// the tiers it went through, the findings, the budget consumed.
    pub verdict: Value,
    /// What the flow does now: the next dispatch, a retry of the judge step, a gate for a
    /// person (an ambiguous verdict), or the flow's end.
    pub next: Value,
}

/// A `stratum_judge` call checked against the flow and staged: its tiers are still to run.
pub struct Staged {
    flow: FlowId,
    step: Step,
    turn: PathBuf,
}

impl Staged {
    /// How many predicates the call decides.
    pub fn predicates(&self) -> usize {
        match &self.step.action {
            Action::Judge { predicates, .. } => predicates.len(),
            _ => 0,
        }
    }
}

/// `stratum_judge`, in one go: [`stage_call`], then [`run_tiers`].
pub fn judge(driver: &Driver, args: JudgeArgs) -> Result<Value, ToolError> {
    let staged = stage_call(driver, &args)?;
    run_tiers(driver, &staged, &mut |_, _| {})
}

/// The checks of a call (the flow's current step is this judge step; what it sent matches
/// the plan), and its files staged in a new turn directory.
pub fn stage_call(driver: &Driver, args: &JudgeArgs) -> Result<Staged, ToolError> {
    let Some(flow) = FlowId::parse(&args.flow_id) else {
        return Err(ToolError::new(
            "flow_not_found",
            format!("No active flow with id '{}'", args.flow_id),
        ));
    };
    let step = current_step(driver, &flow)?;
    if step.id != args.step_id {
        return Err(ToolError::new(
            "step_mismatch",
            format!("Expected step '{}', got '{}'", step.id, args.step_id),
        ));
    }
    let Action::Judge {
        predicates,
        stakes,
        budget,
    } = &step.action
    else {
        return Err(ToolError::new(
            "not_a_judge_step",
            format!("Step '{}' is not a judge step", step.id),
        ));
    };
    check_matches(args, predicates, *stakes, budget)?;
    let turn = stage(driver, &flow, &step.id, args)?;
    Ok(Staged { flow, step, turn })
}

/// Decides each predicate through its tiers (`decided` hears of each: how many so far, and
/// the one just decided), and sends the verdict to the runtime; the answer is [`Judged`].
pub fn run_tiers(
    driver: &Driver,
    staged: &Staged,
    decided: &mut dyn FnMut(usize, &str),
) -> Result<Value, ToolError> {
    let Staged { flow, step, turn } = staged;
    let Action::Judge {
        predicates,
        stakes,
        budget,
    } = &step.action
    else {
        return Err(ToolError::new(
            "not_a_judge_step",
            format!("Step '{}' is not a judge step", step.id),
        ));
    };
    let started = Instant::now();
    let mut consumed = Consumed::default();
    let mut results = Vec::with_capacity(predicates.len());
    for predicate in predicates {
        results.push(decide(
            driver,
            predicate,
            *stakes,
            budget,
            turn,
            started,
            &mut consumed,
        ));
        decided(results.len(), &predicate.id);
    }
    let verdict = verdict_of(&results, *stakes, &consumed, started, turn);
    let next = driver
        .runtime
        .call(&Command::JudgeVerdict {
            flow_id: flow.to_string(),
            step_id: step.id.clone(),
            verdict: verdict.clone(),
        })
        .map_err(|error| ToolError::new("store_unavailable", error.to_string()))?
        .to_json();
    serde_json::to_value(Judged {
        status: "judged",
        flow_id: flow.to_string(),
        step_id: step.id.clone(),
        verdict,
        next,
    })
    .map_err(|error| ToolError::new("internal_error", error.to_string()))
}

/// `stratum_judge` / `stratum_judge_poll`'s answer while the tiers still run.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Judging {
    #[schemars(extend("const" = "judging"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    /// How many predicates are decided, of `total`.
    pub decided: usize,
    pub total: usize,
    pub message: String,
}

/// The flow's current step, from the store.
fn current_step(driver: &Driver, flow: &FlowId) -> Result<Step, ToolError> {
    let mut found = None;
    driver
        .runtime
        .store()
        .read(&mut |snapshot| {
            if let Some(header) = snapshot.flow(flow)?
                && let Some(plan) = snapshot.plan(&header.plan)?
                && let Some(index) = stratum_runtime::exec::current(&header)
                && !header.status.is_finished()
            {
                found = plan
                    .flows
                    .get(header.flow as usize)
                    .and_then(|plan_flow| plan_flow.steps.get(index as usize))
                    .cloned();
            }
            Ok(())
        })
        .map_err(|error| ToolError::new("store_unavailable", error.to_string()))?;
    found.ok_or_else(|| {
        ToolError::new(
            "flow_not_found",
            format!("No running flow with id '{flow}' at a step"),
        )
    })
}

/// What the caller sent must be what the plan says, when it sends it.
fn check_matches(
    args: &JudgeArgs,
    predicates: &[JudgePredicate],
    stakes: Stakes,
    budget: &JudgeBudget,
) -> Result<(), ToolError> {
    if let Some(sent) = &args.predicates {
        let ids: Vec<&str> = sent
            .iter()
            .map(|predicate| predicate.get("id").and_then(Value::as_str).unwrap_or(""))
            .collect();
        let planned: Vec<&str> = predicates
            .iter()
            .map(|predicate| predicate.id.as_str())
            .collect();
        if ids != planned {
            return Err(ToolError::new(
                "predicates_mismatch",
                format!(
                    "the step's predicates are {planned:?}; leave `predicates` out, or send exactly those"
                ),
            ));
        }
    }
    if let Some(sent) = &args.stakes
        && serde_json::to_value(stakes)
            .ok()
            .as_ref()
            .and_then(Value::as_str)
            != Some(sent.as_str())
    {
        return Err(ToolError::new(
            "stakes_mismatch",
            "the stakes sent are not the step's; leave `stakes` out".to_owned(),
        ));
    }
    if let Some(sent) = &args.budget
        && serde_json::to_value(budget).ok().as_ref() != Some(sent)
    {
        return Err(ToolError::new(
            "budget_mismatch",
            "the budget sent is not the step's; leave `budget` out".to_owned(),
        ));
    }
    Ok(())
}

/// Whether `name` is a safe single path component.
fn safe_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Stages the artifacts and modified files of one turn; the turn directory.
fn stage(
    driver: &Driver,
    flow: &FlowId,
    step: &str,
    args: &JudgeArgs,
) -> Result<PathBuf, ToolError> {
    let io = |what: &str, error: std::io::Error| {
        ToolError::new("internal_error", format!("cannot {what}: {error}"))
    };
    if !safe_name(step) {
        return Err(ToolError::new(
            "invalid_argument",
            format!("step id `{step}` cannot name a directory"),
        ));
    }
    let home = driver
        .worktrees
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let base = home.join("judge").join(flow.as_str()).join(step);
    std::fs::create_dir_all(&base).map_err(|error| io("create the judge's directory", error))?;
    let turns = std::fs::read_dir(&base)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().starts_with("turn-"))
                .count()
        })
        .unwrap_or(0);
    let turn = base.join(format!("turn-{}", turns + 1));
    let artifacts = turn.join("artifacts");
    let modified = turn.join("modified");
    std::fs::create_dir_all(&artifacts)
        .map_err(|error| io("create the turn's directory", error))?;
    std::fs::create_dir_all(&modified).map_err(|error| io("create the turn's directory", error))?;
    let mut manifest = Map::new();
    for (name, text) in &args.artifacts {
        if !safe_name(name) {
            let mut error = ToolError::new(
                "invalid_argument",
                format!(
                    "artifact name `{}` must be 1 to 64 letters, digits, '_', '.' or '-'",
                    name.chars().take(64).collect::<String>()
                ),
            );
            error.argument = Some("artifacts".to_owned());
            return Err(error);
        }
        let Some(text) = text.as_str() else {
            let mut error = ToolError::new(
                "invalid_argument",
                format!("artifact `{name}` must be text"),
            );
            error.argument = Some("artifacts".to_owned());
            return Err(error);
        };
        let path = artifacts.join(format!("{name}.txt"));
        std::fs::write(&path, text).map_err(|error| io("write an artifact", error))?;
        manifest.insert(
            format!("artifacts/{name}.txt"),
            json!(sha256(text.as_bytes())),
        );
    }
    for relative in args.modified_files.iter().flatten() {
        let refuse = |why: &str| {
            let mut error = ToolError::new(
                "invalid_argument",
                format!(
                    "modified file `{}`: {why}",
                    relative.chars().take(200).collect::<String>()
                ),
            );
            error.argument = Some("modified_files".to_owned());
            error
        };
        let path = Path::new(relative);
        if path.is_absolute()
            || path
                .components()
                .any(|part| !matches!(part, std::path::Component::Normal(_)))
        {
            return Err(refuse("give a path relative to the project, without `..`"));
        }
        let source =
            stratum_authoring::confined::resolve_under(&driver.root.join(path), Some(&driver.root))
                .map_err(|error| refuse(&error.to_string()))?;
        let bytes = stratum_authoring::confined::read_regular(&source, MAX_STAGED_FILE)
            .map_err(|error| refuse(&error.to_string()))?;
        let target = modified.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|error| io("stage a modified file", error))?;
        }
        std::fs::write(&target, &bytes).map_err(|error| io("stage a modified file", error))?;
        manifest.insert(format!("modified/{relative}"), json!(sha256(&bytes)));
    }
    std::fs::write(
        turn.join("manifest.json"),
        serde_json::to_vec_pretty(&Value::Object(manifest)).unwrap_or_default(),
    )
    .map_err(|error| io("write the manifest", error))?;
    Ok(turn.canonicalize().unwrap_or(turn))
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[derive(Default)]
struct Consumed {
    turns: u32,
    dollars: f64,
}

/// How the cold read was done, as `t3.mode` and `meta.t3_summary.by_mode` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColdMode {
    /// A different agent CLI than the second tier's: the independent read paranoid stakes ask for.
    OtherCli,
    /// The second tier's own CLI in a fresh session, because no other one with a read-only mode
    /// is installed: independent of the second tier's reasoning, not of its model.
    SameCliFreshSession,
}

impl ColdMode {
    fn name(self) -> &'static str {
        match self {
            ColdMode::OtherCli => "other_cli",
            ColdMode::SameCliFreshSession => "same_cli_fresh_session",
        }
    }
}

/// What the cold read did for one predicate: `t3` in the verdict.
struct ColdRead {
    /// `None` when it could not start (the budget was spent, no CLI could read read-only).
    agent: Option<Agent>,
    mode: Option<ColdMode>,
    answer: TierAnswer,
}

/// One agent tier's answer about one predicate.
struct TierAnswer {
    verdict: &'static str,
    confidence: u32,
    reason: String,
    evidence: Vec<Value>,
}

impl TierAnswer {
    fn ambiguous(reason: String) -> TierAnswer {
        TierAnswer {
            verdict: "ambiguous",
            confidence: 0,
            reason,
            evidence: Vec::new(),
        }
    }
}

/// One predicate's outcome.
struct Decided {
    predicate: JudgePredicate,
    verdict: &'static str,
    confidence: u32,
    reason: String,
    evidence: Vec<Value>,
    tiers: Vec<Value>,
    /// The cold read, when paranoid stakes asked for one (after a second-tier `met`).
    cold: Option<ColdRead>,
    /// The tiers that disagreed, in the reference's `tier_disagreements` shape.
    disagreement: Option<Value>,
}

fn decide(
    driver: &Driver,
    predicate: &JudgePredicate,
    stakes: Stakes,
    budget: &JudgeBudget,
    turn: &Path,
    started: Instant,
    consumed: &mut Consumed,
) -> Decided {
    let mut decided = Decided {
        predicate: predicate.clone(),
        verdict: "ambiguous",
        confidence: 0,
        reason: String::new(),
        evidence: Vec::new(),
        tiers: Vec::new(),
        cold: None,
        disagreement: None,
    };
    if predicate.kind == PredicateKind::Deterministic {
        consumed.turns += 1;
        let limits = driver.runtime.config().limits.clone().with_root(turn);
        let (verdict, reason) = match &predicate.check {
            Some(check) => match check.program.evaluate_bool(&Bindings::new(), &limits) {
                Ok(true) => ("met", "deterministic check held".to_owned()),
                Ok(false) => ("not_met", "deterministic check did not hold".to_owned()),
                Err(error) => (
                    "not_met",
                    format!("deterministic check failed: {}", error.message),
                ),
            },
            None => ("not_met", "the statement was not compiled".to_owned()),
        };
        decided.verdict = verdict;
        decided.confidence = 10;
        decided.reason = reason.clone();
        decided
            .tiers
            .push(json!({"tier": "T1", "verdict": verdict, "confidence": 10, "reason": reason}));
        return decided;
    }
    if stakes == Stakes::Cheap {
        decided.reason = "cheap stakes run the deterministic tier only".to_owned();
        return decided;
    }
    let left = match time_left(budget, consumed, started) {
        Ok(left) => left,
        Err(reason) => {
            decided.reason = reason;
            return decided;
        }
    };
    consumed.turns += 1;
    let answer = match driver.connectors.get(&driver.default_agent) {
        // The tier reads and never changes anything: the operator's own arguments for the CLI
        // (which may allow edits, for unattended steps) give way to its read-only ones.
        Some(connector) if connector.agent != Agent::OpenCode => {
            let mut read_only = connector.clone();
            read_only.extra_args = read_only_args(connector.agent);
            agent_tier(&read_only, &second_prompt(predicate), turn, left, consumed)
        }
        Some(_) => TierAnswer::ambiguous(
            "opencode has no read-only mode; the agent tier runs claude or codex (--agent)"
                .to_owned(),
        ),
        None => TierAnswer::ambiguous("no agent connector is configured".to_owned()),
    };
    let TierAnswer {
        verdict,
        confidence,
        reason,
        evidence,
    } = answer;
    decided.tiers.push(
        json!({"tier": "T2", "verdict": verdict, "confidence": confidence, "reason": reason}),
    );
    decided.verdict = gated(verdict, confidence, predicate);
    decided.confidence = confidence;
    decided.reason = if decided.verdict == "ambiguous" && verdict == "met" {
        format!(
            "{reason} (confidence {confidence} is below the applied gate {})",
            predicate.applied_gate
        )
    } else {
        reason
    };
    decided.evidence = evidence;
    if stakes == Stakes::Paranoid && decided.verdict == "met" {
        cold_read(driver, budget, turn, started, consumed, &mut decided);
    }
    decided
}

/// A `met` below the predicate's `applied_gate` is `ambiguous`.
fn gated(verdict: &'static str, confidence: u32, predicate: &JudgePredicate) -> &'static str {
    if verdict == "met" && confidence < predicate.applied_gate {
        "ambiguous"
    } else {
        verdict
    }
}

/// What is left of the budget for one more tier run: its deadline, or why there is none. Every
/// agent tier run counts a turn, so the caller counts it once this allows it.
fn time_left(
    budget: &JudgeBudget,
    consumed: &Consumed,
    started: Instant,
) -> Result<Duration, String> {
    if let Some(max) = budget.max_turns
        && consumed.turns + 1 > max
    {
        return Err(format!(
            "turn budget exceeded: next turn would be {}, max_turns={max}",
            consumed.turns + 1
        ));
    }
    if let Some(max) = budget.max_dollars
        && consumed.dollars >= max
    {
        return Err(format!(
            "dollar budget spent: {:.4} of {max}",
            consumed.dollars
        ));
    }
    let left = budget
        .max_wall_clock_s
        .map(|seconds| Duration::from_secs_f64(seconds.max(0.0)).saturating_sub(started.elapsed()))
        .unwrap_or(DEFAULT_TIER_DEADLINE);
    if left.is_zero() {
        return Err("wall-clock budget spent".to_owned());
    }
    Ok(left)
}

/// The third tier, after a second-tier `met` under paranoid stakes: a fresh agent run told only
/// the predicate and the staged files' names, preferably on another CLI, read-only, in the same
/// turn directory. Anything but a `met` at the applied gate makes the predicate `ambiguous`
/// and records the disagreement; a cold read that cannot run makes it `ambiguous` too.
fn cold_read(
    driver: &Driver,
    budget: &JudgeBudget,
    turn: &Path,
    started: Instant,
    consumed: &mut Consumed,
    decided: &mut Decided,
) {
    let started_read = time_left(budget, consumed, started)
        .and_then(|left| cold_reader(driver).map(|(connector, mode)| (left, connector, mode)));
    let cold = match started_read {
        Err(why) => ColdRead {
            agent: None,
            mode: None,
            answer: TierAnswer::ambiguous(format!("the cold read did not run: {why}")),
        },
        Ok((left, connector, mode)) => {
            consumed.turns += 1;
            let prompt = cold_prompt(&decided.predicate, turn);
            let answer = agent_tier(&connector, &prompt, turn, left, consumed);
            ColdRead {
                agent: Some(connector.agent),
                mode: Some(mode),
                answer,
            }
        }
    };
    let answer = &cold.answer;
    let verdict = gated(answer.verdict, answer.confidence, &decided.predicate);
    let reason = if verdict == "ambiguous" && answer.verdict == "met" {
        format!(
            "{} (confidence {} is below the applied gate {})",
            answer.reason, answer.confidence, decided.predicate.applied_gate
        )
    } else {
        answer.reason.clone()
    };
    decided.tiers.push(json!({
        "tier": "T3",
        "verdict": verdict,
        "confidence": answer.confidence,
        "reason": reason,
    }));
    if verdict == "met" {
        decided.confidence = decided.confidence.min(answer.confidence);
    } else if cold.agent.is_none() {
        decided.verdict = "ambiguous";
        decided.reason = format!("the second tier said met, but {reason}");
    } else {
        decided.disagreement = Some(json!({
            "predicate_id": decided.predicate.id,
            "tiers": ["T2", "T3"],
            "verdicts": ["met", verdict],
            "reasons": [decided.reason, reason],
        }));
        decided.verdict = "ambiguous";
        decided.reason =
            format!("the second tier said met; the cold read said {verdict}: {reason}");
    }
    decided.cold = Some(cold);
}

/// The cold read's connector: another installed CLI with a read-only mode than the second
/// tier's (Codex after Claude, Claude after Codex or OpenCode), else the second tier's own when
/// it has one; with its operator arguments replaced by the read-only ones, since those may
/// grant writes (Codex's `--sandbox workspace-write`).
fn cold_reader(driver: &Driver) -> Result<(Connector, ColdMode), String> {
    let second = driver.default_agent;
    let others: &[Agent] = match second {
        Agent::Claude => &[Agent::Codex],
        Agent::Codex => &[Agent::Claude],
        Agent::OpenCode => &[Agent::Codex, Agent::Claude],
    };
    let installed = |agent: &Agent| {
        driver
            .connectors
            .get(agent)
            .filter(|connector| connector.resolve().is_ok())
    };
    let (connector, mode) = match others.iter().find_map(installed) {
        Some(connector) => (connector, ColdMode::OtherCli),
        None if second != Agent::OpenCode => match installed(&second) {
            Some(connector) => (connector, ColdMode::SameCliFreshSession),
            None => {
                return Err(format!(
                    "neither {} nor {} is installed",
                    second.name(),
                    others
                        .iter()
                        .map(|agent| agent.name())
                        .collect::<Vec<_>>()
                        .join(" nor ")
                ));
            }
        },
        None => {
            return Err(
                "no agent CLI with a read-only mode (claude or codex) is installed".to_owned(),
            );
        }
    };
    let mut connector = connector.clone();
    connector.extra_args = read_only_args(connector.agent);
    Ok((connector, mode))
}

/// The arguments that keep an agent CLI from changing anything: Codex's read-only sandbox;
/// Claude's file-reading tools only (the reference's second tier's lists).
fn read_only_args(agent: Agent) -> Vec<String> {
    let args: &[&str] = match agent {
        Agent::Codex => &["--sandbox", "read-only"],
        Agent::Claude => &[
            "--allowedTools",
            "Read,Grep,Glob",
            "--disallowedTools",
            "Edit,Write,NotebookEdit,Task,Bash,WebFetch,WebSearch",
        ],
        // No read-only mode: `cold_reader` never picks it.
        Agent::OpenCode => &[],
    };
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

/// What the second tier is asked.
fn second_prompt(predicate: &JudgePredicate) -> String {
    format!(
        "You judge one predicate about the work staged in this directory (artifacts/ and \
         modified/). Read the files; change nothing. Predicate '{}': {}\n\nAnswer whether it \
         holds: verdict met, not_met or ambiguous, your confidence from 1 to 10, the reason, \
         and evidence: each item citing a file of this directory as `artifacts/<file>:<line>` \
         or `modified/<path>:<line>` with the quoted line.",
        predicate.id, predicate.statement
    )
}

/// What the cold read is asked: the predicate and the staged files' names, nothing of what the
/// second tier answered, so that its read is its own.
fn cold_prompt(predicate: &JudgePredicate, turn: &Path) -> String {
    let staged: Vec<String> = std::fs::read(turn.join("manifest.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Map<String, Value>>(&bytes).ok())
        .map(|manifest| manifest.keys().map(|path| format!("- {path}")).collect())
        .unwrap_or_default();
    let staged = if staged.is_empty() {
        "(no files were staged)".to_owned()
    } else {
        staged.join("\n")
    };
    format!(
        "You are an independent reviewer. Decide, from the files staged in this directory \
         alone, whether one predicate holds. Read the files; change nothing. Nobody's earlier \
         opinion is given to you: form your own.\n\nPredicate '{}': {}\n\nStaged files:\n\
         {staged}\n\nAnswer: verdict met, not_met or ambiguous, your confidence from 1 to 10, \
         the reason, and evidence: each item citing a file of this directory as \
         `artifacts/<file>:<line>` or `modified/<path>:<line>` with the quoted line.",
        predicate.id, predicate.statement
    )
}

/// Asks an agent about one predicate, in the turn directory. Citations that do not exist, and
/// a `met` with none, make it ambiguous.
fn agent_tier(
    connector: &Connector,
    intent: &str,
    turn: &Path,
    deadline: Duration,
    consumed: &mut Consumed,
) -> TierAnswer {
    let prompt = Prompt {
        intent: intent.to_owned(),
        inputs: Value::Null,
        schema: Some(json!({
            "type": "object",
            "required": ["predicate_id", "verdict", "confidence", "reason", "evidence"],
            "properties": {
                "predicate_id": {"type": "string"},
                "verdict": {"enum": ["met", "not_met", "ambiguous"]},
                "confidence": {"type": "integer", "minimum": 1, "maximum": 10},
                "reason": {"type": "string"},
                "evidence": {"type": "array", "items": {"type": "object", "required": ["source", "quote"],
                    "properties": {"source": {"type": "string"}, "quote": {"type": "string"}}}}
            }
        })),
        violations: Vec::new(),
    };
    let mut request = Request::new(prompt, turn, turn);
    request.deadline = deadline;
    let cancel = tokio_util::sync::CancellationToken::new();
    let run = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())
        .and_then(|runtime| {
            runtime
                .block_on(connector.run(&request, &cancel))
                .map_err(|error| error.to_string())
        });
    let run = match run {
        Ok(run) => run,
        Err(error) => {
            return TierAnswer::ambiguous(format!(
                "{} could not run: {error}",
                connector.agent.name()
            ));
        }
    };
    consumed.dollars += run.usage.cost_usd.unwrap_or(0.0);
    let object = match &run.outcome {
        Outcome::Answered { object } => object,
        Outcome::TimedOut => {
            return TierAnswer::ambiguous(format!(
                "{} did not answer within its deadline of {:.0} s",
                connector.agent.name(),
                deadline.as_secs_f64()
            ));
        }
        _ => {
            return TierAnswer::ambiguous(format!(
                "{} gave no JSON answer",
                connector.agent.name()
            ));
        }
    };
    let verdict = match object.get("verdict").and_then(Value::as_str) {
        Some("met") => "met",
        Some("not_met") => "not_met",
        _ => "ambiguous",
    };
    let confidence = object
        .get("confidence")
        .and_then(Value::as_u64)
        .map_or(0, |value| u32::try_from(value.min(10)).unwrap_or(0));
    let reason = object
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(2000)
        .collect::<String>();
    let evidence: Vec<Value> = object
        .get("evidence")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let refused = |reason: String| TierAnswer {
        verdict: "ambiguous",
        confidence,
        reason,
        evidence: evidence.clone(),
    };
    if let Some(bad) = evidence.iter().find_map(|item| bad_citation(turn, item)) {
        return refused(format!("{reason} (citation refused: {bad})"));
    }
    if verdict == "met" && evidence.is_empty() {
        return refused(format!("{reason} (no evidence cited)"));
    }
    TierAnswer {
        verdict,
        confidence,
        reason,
        evidence,
    }
}

/// Why a citation does not point at a line of a staged file, if it does not.
fn bad_citation(turn: &Path, item: &Value) -> Option<String> {
    let source = item.get("source").and_then(Value::as_str).unwrap_or("");
    let Some((path, line)) = source.rsplit_once(':') else {
        return Some(format!("`{source}` is not `path:line`"));
    };
    let Ok(line) = line.parse::<usize>() else {
        return Some(format!("`{source}` has no line number"));
    };
    let relative = Path::new(path);
    let in_bucket = matches!(
        relative.components().next(),
        Some(std::path::Component::Normal(first)) if first == "artifacts" || first == "modified"
    );
    if !in_bucket
        || relative
            .components()
            .any(|part| !matches!(part, std::path::Component::Normal(_)))
    {
        return Some(format!("`{source}` is not under artifacts/ or modified/"));
    }
    // A path that does not resolve (no such file, a link out of the turn) is no staged file:
    // `?` here once let a citation of a file that was never staged pass.
    let text = stratum_authoring::confined::resolve_under(&turn.join(relative), Some(turn))
        .ok()
        .and_then(|resolved| {
            stratum_authoring::confined::read_regular(&resolved, MAX_STAGED_FILE).ok()
        });
    match text {
        None => Some(format!("`{path}` is not a staged file")),
        Some(bytes) if line == 0 || String::from_utf8_lossy(&bytes).lines().count() < line => {
            Some(format!("`{path}` has no line {line}"))
        }
        Some(_) => None,
    }
}

/// The verdict in the reference's shape.
fn verdict_of(
    results: &[Decided],
    stakes: Stakes,
    consumed: &Consumed,
    started: Instant,
    turn: &Path,
) -> Value {
    let met = !results.is_empty() && results.iter().all(|decided| decided.verdict == "met");
    let predicates: Vec<Value> = results
        .iter()
        .map(|decided| {
            json!({
                "id": decided.predicate.id,
                "type": decided.predicate.kind,
                "statement": decided.predicate.statement,
                "verdict": decided.verdict,
                "confidence": decided.confidence,
                "applied_gate": decided.predicate.applied_gate,
                "reason": decided.reason,
                "evidence": decided.evidence,
                "tier_history": decided.tiers,
                "t3": decided.cold.as_ref().map(cold_json),
            })
        })
        .collect();
    let disagreements: Vec<&Value> = results
        .iter()
        .filter_map(|decided| decided.disagreement.as_ref())
        .collect();
    let reads: Vec<&ColdRead> = results
        .iter()
        .filter_map(|decided| decided.cold.as_ref())
        .filter(|cold| cold.mode.is_some())
        .collect();
    let mut by_mode = Map::new();
    for cold in &reads {
        if let Some(mode) = cold.mode {
            let count = by_mode
                .get(mode.name())
                .and_then(Value::as_u64)
                .unwrap_or(0);
            by_mode.insert(mode.name().to_owned(), json!(count + 1));
        }
    }
    let findings: Vec<Value> = results
        .iter()
        .filter(|decided| decided.verdict != "met")
        .map(|decided| {
            json!({
                "lens": "judge",
                "severity": if decided.verdict == "not_met" { "must-fix" } else { "should-fix" },
                "finding": format!("{} — {}", decided.predicate.statement, decided.reason),
                "confidence": decided.confidence,
                "applied_gate": decided.predicate.applied_gate,
            })
        })
        .collect();
    let count = results
        .iter()
        .filter(|decided| decided.verdict == "met")
        .count();
    json!({
        "met": met,
        "clean": met,
        "summary": if stakes == Stakes::Paranoid {
            format!(
                "judge: {count}/{} predicates met; {} cold read(s), {} tier disagreement(s)",
                results.len(),
                reads.len(),
                disagreements.len()
            )
        } else {
            format!("judge: {count}/{} predicates met", results.len())
        },
        "stakes": stakes,
        "predicates": predicates,
        "findings": findings,
        "budget_consumed": {
            "turns": consumed.turns,
            "dollars": consumed.dollars,
            "wall_clock_s": started.elapsed().as_secs_f64(),
        },
        "tier_disagreements": disagreements,
        "meta": {
            "turn_dir": turn.display().to_string(),
            // Never jailed: the cold read runs the CLI in its own read-only mode, not in a
            // container. Degraded: it ran on the second tier's own CLI.
            "t3_summary": {
                "reached": reads.len(),
                "by_mode": by_mode,
                "all_jailed": false,
                "any_degraded": reads.iter().any(|cold| cold.mode == Some(ColdMode::SameCliFreshSession)),
            },
        },
        "judge_version": "stratum-1",
    })
}

/// A predicate's `t3`: who read cold, how, and what it said.
fn cold_json(cold: &ColdRead) -> Value {
    json!({
        "ran": cold.agent.is_some(),
        "agent": cold.agent.map(Agent::name),
        "mode": cold.mode.map(ColdMode::name),
        "jailed": false,
        "read_only": cold.agent.map(read_only_args),
        "verdict": cold.answer.verdict,
        "confidence": cold.answer.confidence,
        "reason": cold.answer.reason,
        "evidence": cold.answer.evidence,
    })
}
