//! `stratum_judge`: the server decides a judge step's predicates, and its verdict binds.
//!
//! The order: the call is checked against the flow (its current step is this judge step; any
//! predicates, stakes or budget sent must equal the plan's); the artifacts and modified files
//! are staged in a turn directory the server owns (`<home>/judge/<flow>/<step>/turn-<n>/`:
//! `artifacts/<name>.txt`, `modified/<path>` copied from the project, `manifest.json` with
//! each file's SHA-256); the first tier evaluates every deterministic predicate in our VM,
//! its file built-ins rooted at the turn directory (no `eval`, no `..` or symbolic link out);
//! the agent tier asks an agent CLI about each verified or judged predicate (unless the stakes
//! are `cheap`), working in the turn directory, and checks that every citation (`path:line`)
//! exists there; a `met` below the predicate's `applied_gate` is `ambiguous`. The verdict goes
//! to the runtime (`Command::JudgeVerdict`), which completes the step, fails its attempt, or
//! waits for a person; the answer carries the verdict and what the flow does next.
//!
//! What the reference did and this does not: `eval` of deterministic statements (a
//! `__subclasses__` predicate ran `os.system`), reads escaping the staging directory, a
//! verdict that does not bind, wall time checked only between predicates. Not done yet: the
//! third tier (`paranoid`'s cold read in a container): paranoid stakes run the first two
//! tiers and say so in the verdict's `meta`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use stratum_agents::{Outcome, Prompt, Request};
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

/// `stratum_judge`.
pub fn judge(driver: &Driver, args: JudgeArgs) -> Result<Value, ToolError> {
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
    check_matches(&args, predicates, *stakes, budget)?;
    let turn = stage(driver, &flow, &step.id, &args)?;
    let started = Instant::now();
    let mut consumed = Consumed::default();
    let mut results = Vec::with_capacity(predicates.len());
    for predicate in predicates {
        results.push(decide(
            driver,
            predicate,
            *stakes,
            budget,
            &turn,
            started,
            &mut consumed,
        ));
    }
    let verdict = verdict_of(&results, *stakes, &consumed, started, &turn);
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

/// One predicate's outcome.
struct Decided {
    predicate: JudgePredicate,
    verdict: &'static str,
    confidence: u32,
    reason: String,
    evidence: Vec<Value>,
    tiers: Vec<Value>,
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
    if let Some(max) = budget.max_turns
        && consumed.turns + 1 > max
    {
        decided.reason = format!(
            "turn budget exceeded: next turn would be {}, max_turns={max}",
            consumed.turns + 1
        );
        return decided;
    }
    if let Some(max) = budget.max_dollars
        && consumed.dollars >= max
    {
        decided.reason = format!("dollar budget spent: {:.4} of {max}", consumed.dollars);
        return decided;
    }
    let left = budget
        .max_wall_clock_s
        .map(|seconds| Duration::from_secs_f64(seconds.max(0.0)).saturating_sub(started.elapsed()))
        .unwrap_or(DEFAULT_TIER_DEADLINE);
    if left.is_zero() {
        decided.reason = "wall-clock budget spent".to_owned();
        return decided;
    }
    consumed.turns += 1;
    let (verdict, confidence, reason, evidence) =
        agent_tier(driver, predicate, turn, left, consumed);
    decided.tiers.push(
        json!({"tier": "T2", "verdict": verdict, "confidence": confidence, "reason": reason}),
    );
    decided.verdict = if verdict == "met" && confidence < predicate.applied_gate {
        "ambiguous"
    } else {
        verdict
    };
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
    decided
}

/// Asks an agent about one predicate, in the turn directory; `(verdict, confidence, reason,
/// evidence)`. Citations that do not exist make it ambiguous.
fn agent_tier(
    driver: &Driver,
    predicate: &JudgePredicate,
    turn: &Path,
    deadline: Duration,
    consumed: &mut Consumed,
) -> (&'static str, u32, String, Vec<Value>) {
    let Some(connector) = driver.connectors.get(&driver.default_agent) else {
        return (
            "ambiguous",
            0,
            "no agent connector is configured".to_owned(),
            Vec::new(),
        );
    };
    let prompt = Prompt {
        intent: format!(
            "You judge one predicate about the work staged in this directory (artifacts/ and \
             modified/). Read the files; change nothing. Predicate '{}': {}\n\nAnswer whether it \
             holds: verdict met, not_met or ambiguous, your confidence from 1 to 10, the reason, \
             and evidence: each item citing a file of this directory as `artifacts/<file>:<line>` \
             or `modified/<path>:<line>` with the quoted line.",
            predicate.id, predicate.statement
        ),
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
            return (
                "ambiguous",
                0,
                format!("the agent tier could not run: {error}"),
                Vec::new(),
            );
        }
    };
    consumed.dollars += run.usage.cost_usd.unwrap_or(0.0);
    let Outcome::Answered { object } = &run.outcome else {
        return (
            "ambiguous",
            0,
            "the agent tier gave no JSON answer".to_owned(),
            Vec::new(),
        );
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
    if let Some(bad) = evidence.iter().find_map(|item| bad_citation(turn, item)) {
        return (
            "ambiguous",
            confidence,
            format!("{reason} (citation refused: {bad})"),
            evidence,
        );
    }
    if verdict == "met" && evidence.is_empty() {
        return (
            "ambiguous",
            confidence,
            format!("{reason} (no evidence cited)"),
            evidence,
        );
    }
    (verdict, confidence, reason, evidence)
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
            })
        })
        .collect();
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
        "summary": format!("judge: {count}/{} predicates met", results.len()),
        "stakes": stakes,
        "predicates": predicates,
        "findings": findings,
        "budget_consumed": {
            "turns": consumed.turns,
            "dollars": consumed.dollars,
            "wall_clock_s": started.elapsed().as_secs_f64(),
        },
        "meta": {
            "turn_dir": turn.display().to_string(),
            "t3": if stakes == Stakes::Paranoid { "not run: the cold-read tier is not implemented; paranoid stakes ran the first two" } else { "not asked" },
        },
        "judge_version": "stratum-1",
    })
}
