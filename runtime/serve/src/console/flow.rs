//! `GET /flows/{id}`: one flow, whole: where it stands, its graph, the current dispatch, each
//! failed attempt's violations and the retries left, rounds and gate decisions, iterations
//! with their scores, the budget against its limits, child flows, checkpoints, the timeline,
//! and every step's details.
//!
//! Contract: `h1` holds the flow's name; `#flow-status[data-status]`; `dd#steps-done`;
//! `svg#dag` with `g.step[data-step-id][data-state]` (`done`, `current`, `gate`, `approved`,
//! `killed`, `failed`, `skipped`, `pending`); `section#dispatch`, `#attempts` (one `li.violation`
//! per violation), `#rounds`, `#iterations`, `#budget`, `#children`, `#checkpoints`,
//! `#timeline`, `#steps` (a row `#step-INDEX` per step). `main > div[data-live]` is swapped
//! by the script when the flow changes. An unknown id answers 404. A flow waiting at a gate
//! also has `section#gate`, the gate's `div.gate-context` (see [`super::gate_context`]).
//!
//! Bounded for any flow: names and texts cut, each list its newest
//! [`MAX_LIST_ENTRIES`](super::MAX_LIST_ENTRIES), and of a huge flow a window of
//! [`MAX_STEPS_SHOWN`] steps from just before the current one in the graph and the step
//! details (`p#steps-shown` says which, and how many are left out).

use std::fmt::Write;
use std::ops::Range;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;
use stratum_compiler::plan::Action;

use super::timeline::seconds;
use super::view::{FlowView, StepLook};
use super::{
    MAX_LIST_ENTRIES, MAX_NAME_CHARS, MAX_STEPS_SHOWN, MAX_VIOLATIONS_SHOWN, Section, dag,
    left_out_note, moment, newest, page, shown_name, shown_text, status_badge, status_words,
    timeline, unavailable,
};
use crate::http::App;
use crate::http::auth::Identity;
use crate::http::pages::{escape, thousands};
use crate::ids::FlowId;
use crate::response::Record;
use crate::state::{EventBody, FailedAttempt};

/// Characters of a JSON value shown before it is cut (the whole is in the audit).
const MAX_JSON_CHARS: usize = 20_000;

/// `GET /flows/{id}`.
pub async fn show(State(app): State<App>, identity: Identity, Path(id): Path<String>) -> Response {
    let Some(flow_id) = FlowId::parse(&id) else {
        return missing(&identity, &id);
    };
    let config = Arc::new(app.config().clone());
    let read = flow_id.clone();
    let view = app
        .blocking(move |store| FlowView::read(store, &read, &config, crate::now_ms()))
        .await;
    match view {
        Ok(Some(view)) => {
            let name: String = view.header.flow_name.chars().take(MAX_NAME_CHARS).collect();
            let title = format!("Flow {name}");
            let body = match render(&view, &identity) {
                Ok(body) => body,
                Err(error) => return unavailable(&identity, &error),
            };
            page(&identity, Section::Other, StatusCode::OK, &title, &body)
        }
        Ok(None) => missing(&identity, &id),
        Err(error) => unavailable(&identity, &error),
    }
}

fn missing(identity: &Identity, id: &str) -> Response {
    page(
        identity,
        Section::Other,
        StatusCode::NOT_FOUND,
        "No such flow",
        &format!(
            "<h1>No such flow</h1>\n<p role=\"alert\">The store has no flow <code>{}</code>: \
             it may have been pruned.</p>\n<p><a href=\"/\">All flows</a></p>",
            escape(id)
        ),
    )
}

fn render(view: &FlowView, identity: &Identity) -> Result<String, crate::store::StoreError> {
    let flow = view.flow()?;
    let header = &view.header;
    let id = header.id.to_string();
    let mut html = format!(
        "<div data-live=\"flow\" data-flow-ids=\"{id}{children}\">",
        children = view
            .children
            .iter()
            .map(|child| format!(" {}", child.id))
            .collect::<String>()
    );
    let _ = write!(
        html,
        "<h1>Flow <span class=\"name\">{name}</span></h1>\n\
         <p id=\"flow-status\" data-status=\"{status}\">{badge} <code class=\"id\">{id}</code></p>\n\
         <dl class=\"facts\"><dt>Started</dt><dd>{started}{by}</dd><dt>Last change</dt><dd>{changed}</dd>\
         <dt>Round</dt><dd>{round}</dd><dt>Steps done</dt><dd id=\"steps-done\">{done}</dd>{parent}{ended}</dl>\n",
        name = shown_name(&header.flow_name),
        status = status_words(view.status()).0,
        badge = status_badge(view.status()),
        started = moment(header.started_ms),
        by = header
            .started_by
            .as_deref()
            .map_or_else(String::new, |who| format!(" by {}", shown_name(who))),
        changed = moment(header.updated_ms),
        round = header.round,
        done = steps_done(view),
        parent = header
            .parent
            .as_ref()
            .map_or_else(String::new, |parent| format!(
                "<dt>Parent</dt><dd><a href=\"/flows/{0}\">{0}</a></dd>",
                parent.flow
            )),
        ended = match (&header.error_type, header.finished_ms) {
            (Some(error), Some(at)) => format!(
                "<dt>Ended</dt><dd>{} ({})</dd>",
                moment(at),
                shown_name(error)
            ),
            (None, Some(at)) => format!("<dt>Ended</dt><dd>{}</dd>", moment(at)),
            _ => String::new(),
        },
    );
    html.push_str(
        "<section id=\"graph\" aria-labelledby=\"graph-h\"><h2 id=\"graph-h\">Steps</h2>\
         <p class=\"legend\"><span class=\"key state-done\">done</span>\
         <span class=\"key state-current\">current</span><span class=\"key state-gate\">gate waiting</span>\
         <span class=\"key state-approved\">approved</span><span class=\"key state-killed\">killed</span>\
         <span class=\"key state-failed\">failed</span><span class=\"key state-skipped\">skipped</span>\
         <span class=\"key state-pending\">not yet</span> \
         Solid arcs on the left: data dependencies; dashed on the right: routing.</p>\
         <div class=\"scroll\">",
    );
    let window = steps_shown(flow.steps.len(), crate::exec::current(header));
    html.push_str(&dag::draw(flow, |index| view.look(index), window.clone()));
    html.push_str("</div>");
    html.push_str(&window_note(&window, flow.steps.len(), &id));
    html.push_str("</section>\n");
    dispatch(&mut html, view, identity);
    if let Some(context) = &view.gate {
        section(
            &mut html,
            "gate",
            "The gate's context",
            &format!(
                "<p>What the person deciding gate <strong>{}</strong> is shown.</p>{}",
                shown_name(&context.step_id),
                super::gate_context::render(context)
            ),
        );
    }
    agent_runs(&mut html, view);
    fan_out_tasks(&mut html, view);
    attempts(&mut html, view);
    rounds(&mut html, view);
    iterations(&mut html, view);
    budget(&mut html, view);
    children(&mut html, view);
    checkpoints(&mut html, view);
    timeline_section(&mut html, view);
    steps(&mut html, view, &window)?;
    if let Some(output) = &header.output {
        let _ = write!(
            html,
            "<section id=\"output\" aria-labelledby=\"output-h\"><h2 id=\"output-h\">Output</h2>{}</section>",
            json_block(output)
        );
    }
    html.push_str("</div>");
    Ok(html)
}

/// "Steps done" in the flow's facts (`dd#steps-done`): the steps behind it (done, or a gate
/// approved) of all its steps, and how many were skipped or killed (a gate): `5 of 6, 1
/// skipped`.
fn steps_done(view: &FlowView) -> String {
    let total = view.summary.step_count;
    let looks: Vec<StepLook> = (0..total).map(|index| view.look(index)).collect();
    let mut text = format!(
        "{} of {total}",
        looks.iter().filter(|look| look.is_done()).count()
    );
    for (wanted, word) in [(StepLook::Skipped, "skipped"), (StepLook::Killed, "killed")] {
        let n = looks.iter().filter(|look| **look == wanted).count();
        if n > 0 {
            let _ = write!(text, ", {n} {word}");
        }
    }
    text
}

/// The steps a page shows of a flow of `total`: all of them, or a window of
/// [`MAX_STEPS_SHOWN`] that starts a tenth of that before the current step (so the steps
/// just done show too) and ends no later than the last.
fn steps_shown(total: usize, current: Option<u32>) -> Range<u32> {
    let total = u32::try_from(total).unwrap_or(u32::MAX);
    let most = u32::try_from(MAX_STEPS_SHOWN).unwrap_or(u32::MAX);
    if total <= most {
        return 0..total;
    }
    let first = current
        .map_or(0, |index| index.saturating_sub(most / 10))
        .min(total - most);
    first..first + most
}

/// What a page says under the graph of a flow whose steps are not all shown.
fn window_note(window: &Range<u32>, total: usize, id: &str) -> String {
    let shown = window.len();
    if shown >= total {
        return String::new();
    }
    format!(
        "<p class=\"more\" id=\"steps-shown\">Steps {} to {} of {} are drawn here and listed \
         in the step details, from just before the current one; {} more steps are left out \
         (<code>stratum-mcp query flow {id} --json</code> lists them all).</p>",
        thousands(window.start as usize + 1),
        thousands(window.end as usize),
        thousands(total),
        thousands(total - shown)
    )
}

fn section(html: &mut String, id: &str, title: &str, body: &str) {
    let _ = write!(
        html,
        "<section id=\"{id}\" aria-labelledby=\"{id}-h\"><h2 id=\"{id}-h\">{title}</h2>\n{body}</section>\n"
    );
}

fn dispatch(html: &mut String, view: &FlowView, identity: &Identity) {
    let body = match &view.dispatch {
        None => "<p>None: the flow has finished.</p>".to_owned(),
        Some(dispatch) => {
            let status = dispatch.get("status").and_then(Value::as_str).unwrap_or("");
            let step = dispatch
                .get("step_id")
                .or_else(|| dispatch.get("parent_step_id"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let what = match status {
                "execute_step" => format!(
                    "The agent is to run step <strong>{}</strong>.",
                    shown_name(step)
                ),
                "await_gate" => {
                    let resolve = if identity.read_only {
                        String::new()
                    } else {
                        format!(
                            " <a href=\"/gates#gate-{}-{}\">Decide it</a>.",
                            view.header.id,
                            shown_name(step)
                        )
                    };
                    format!(
                        "Gate <strong>{}</strong> waits for a decision.{resolve}",
                        shown_name(step)
                    )
                }
                "execute_flow" => format!(
                    "Step <strong>{}</strong> runs a sub-flow; its own dispatch is inside.",
                    shown_name(step)
                ),
                other => format!("The runtime answers <code>{}</code>.", shown_name(other)),
            };
            format!(
                "<p>{what} This is what <code>stratum_resume</code> answers now.</p>{}",
                json_block(dispatch)
            )
        }
    };
    section(html, "dispatch", "Current dispatch", &body);
}

fn attempts(html: &mut String, view: &FlowView) {
    let failed: Vec<(u32, &FailedAttempt)> = view
        .events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::Attempt(attempt) => Some((event.round, attempt)),
            _ => None,
        })
        .collect();
    let mut body = String::new();
    if let (Some(index), false) = (
        crate::exec::current(&view.header),
        view.header.status.is_finished(),
    ) && let (Some(left), Ok(flow)) = (view.retries_left(index), view.flow())
        && let Some(step) = flow.steps.get(index as usize)
        && !matches!(step.action, Action::Gate { .. })
    {
        let _ = write!(
            body,
            "<p class=\"retries\">The current step, <strong>{}</strong>, has {} left.</p>",
            shown_name(&step.id),
            plural(left, "attempt")
        );
    }
    if failed.is_empty() {
        body.push_str("<p>No result has failed its checks.</p>");
    } else {
        let (failed, left_out) = newest(&failed, MAX_LIST_ENTRIES);
        body.push_str(&left_out_note(left_out, "failed attempts"));
        body.push_str("<ol class=\"attempts\">");
        for &(round, attempt) in failed {
            let _ = write!(
                body,
                "<li class=\"attempt\" data-step-id=\"{step}\"><p><strong>{step}</strong>, attempt {n} \
                 (round {round}): <code>{status}</code> at {at}; {left} after it.</p><ul>",
                step = shown_name(&attempt.step_id),
                n = attempt.attempt,
                status = shown_name(&attempt.status),
                at = moment(attempt.at_ms),
                left = if attempt.retries_remaining == 0 {
                    "no retry left".to_owned()
                } else {
                    format!("{} left", plural(attempt.retries_remaining, "retry"))
                },
            );
            for violation in attempt.violations.iter().take(MAX_VIOLATIONS_SHOWN) {
                let _ = write!(
                    body,
                    "<li class=\"violation\">{}</li>",
                    shown_text(violation)
                );
            }
            let more = attempt
                .violations
                .len()
                .saturating_sub(MAX_VIOLATIONS_SHOWN);
            if more > 0 {
                let _ = write!(body, "<li class=\"more\">and {} more</li>", thousands(more));
            }
            body.push_str("</ul></li>");
        }
        body.push_str("</ol>");
    }
    section(html, "attempts", "Failed attempts", &body);
}

fn rounds(html: &mut String, view: &FlowView) {
    let decisions: Vec<&Record> = view
        .events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::Record(
                record @ (Record::Gate(_) | Record::Policy(_) | Record::Approval(_)),
            ) => Some(record),
            _ => None,
        })
        .collect();
    let mut body = format!(
        "<p>Round {}: each revise at a gate starts a new round{}.</p>",
        view.header.round,
        view.flow()
            .ok()
            .and_then(|flow| flow.max_rounds)
            .map_or_else(String::new, |max| format!(", at most {max}"))
    );
    if decisions.is_empty() {
        body.push_str("<p>No gate has been decided.</p>");
    } else {
        let (decisions, left_out) = newest(&decisions, MAX_LIST_ENTRIES);
        body.push_str(&left_out_note(left_out, "gate decisions"));
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Round</th><th scope=\"col\">Gate</th>\
             <th scope=\"col\">Decision</th><th scope=\"col\">By</th><th scope=\"col\">Rationale</th>\
             <th scope=\"col\">When</th></tr></thead><tbody>",
        );
        for &record in decisions {
            let (round, step, outcome, by, rationale, at) = match record {
                Record::Gate(gate) => (
                    gate.round,
                    &gate.step_id,
                    if gate.approvers.len() > 1 {
                        format!("{} ({})", gate.outcome, gate.approvers.join(", "))
                    } else {
                        gate.outcome.clone()
                    },
                    decided_by(&gate.resolved_by, gate.actor.as_deref()),
                    &gate.rationale,
                    gate.at_ms,
                ),
                Record::Approval(approval) => (
                    approval.round,
                    &approval.step_id,
                    format!(
                        "approval {} of {}",
                        approval.approvals, approval.min_approvals
                    ),
                    decided_by(&approval.resolved_by, Some(&approval.identity)),
                    &approval.rationale,
                    approval.at_ms,
                ),
                Record::Policy(policy) => (
                    policy.round,
                    &policy.step_id,
                    policy.resolved_outcome.clone(),
                    format!("policy {}", policy.effective_policy),
                    &policy.rationale,
                    policy.at_ms,
                ),
                Record::Step(_) | Record::Skip(_) => continue,
            };
            let _ = write!(
                body,
                "<tr><td>{round}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                shown_name(step),
                shown_name(&outcome),
                shown_name(&by),
                shown_text(rationale),
                moment(at)
            );
        }
        body.push_str("</tbody></table>");
    }
    section(html, "rounds", "Rounds and gate decisions", &body);
}

/// Who decided, as the Rounds table says it: the caller's claim, and beside it the identity
/// the server vouched for (an access token, or an operating-system user).
fn decided_by(resolved_by: &str, actor: Option<&str>) -> String {
    match actor {
        Some(actor) => match actor.strip_prefix(stratum_mcp::identity::OS_PREFIX) {
            Some(user) => format!("{resolved_by} (user {user})"),
            None => format!("{resolved_by} (token {actor})"),
        },
        None => resolved_by.to_owned(),
    }
}

fn iterations(html: &mut String, view: &FlowView) {
    let reports: Vec<(&String, &Value)> = view
        .events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::Iteration { step_id, report } => Some((step_id, report)),
            _ => None,
        })
        .collect();
    let mut body = String::new();
    if reports.is_empty() {
        body.push_str("<p>No iteration loop has run.</p>");
    } else {
        let (reports, left_out) = newest(&reports, MAX_LIST_ENTRIES);
        body.push_str(&left_out_note(left_out, "iteration reports"));
        body.push_str(
            "<table><thead><tr><th scope=\"col\">Step</th><th scope=\"col\">Iteration</th>\
             <th scope=\"col\">Score</th><th scope=\"col\">Outcome</th><th scope=\"col\">When</th>\
             </tr></thead><tbody>",
        );
        for &(step, report) in reports {
            let field = |name: &str| report.get(name).filter(|value| !value.is_null());
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                shown_name(step),
                field("iteration").map_or_else(String::new, Value::to_string),
                field("score").map_or_else(|| "—".to_owned(), Value::to_string),
                shown_name(field("outcome").and_then(Value::as_str).unwrap_or("")),
                field("timestamp_ms")
                    .and_then(Value::as_u64)
                    .map_or_else(String::new, moment),
            );
        }
        body.push_str("</tbody></table>");
    }
    let looping = view
        .steps
        .iter()
        .filter(|(_, state)| state.iteration.is_some());
    for (index, state) in looping.take(MAX_LIST_ENTRIES) {
        let Some(iteration) = &state.iteration else {
            continue;
        };
        let Some(step) = view
            .flow()
            .ok()
            .and_then(|flow| flow.steps.get(*index as usize))
        else {
            continue;
        };
        let _ = write!(
            body,
            "<p><strong>{}</strong>: {} so far{}{}.</p>",
            shown_name(&step.id),
            plural(iteration.count, "iteration"),
            iteration
                .best
                .as_ref()
                .map_or_else(String::new, |best| format!(
                    ", best score {} at iteration {}",
                    best.score, best.iteration
                )),
            if iteration.active { ", running" } else { "" }
        );
    }
    section(html, "iterations", "Iterations", &body);
}

fn budget(html: &mut String, view: &FlowView) {
    let Some(ledger) = &view.header.budget else {
        section(html, "budget", "Budget", "<p>The flow sets no budget.</p>");
        return;
    };
    let (caps, spent) = (&ledger.caps, &ledger.consumed);
    let mut body = String::from(
        "<table><thead><tr><th scope=\"col\">Measure</th><th scope=\"col\">Spent</th><th scope=\"col\">Limit</th><th scope=\"col\">Used</th></tr></thead><tbody>",
    );
    let mut row = |measure: &str, used: f64, shown: String, cap: Option<f64>, cap_shown: String| {
        let meter = cap.filter(|cap| *cap > 0.0).map_or_else(
            || "—".to_owned(),
            |cap| {
                format!(
                    "<meter min=\"0\" max=\"{cap}\" value=\"{}\" high=\"{}\">{:.0}%</meter>",
                    used.min(cap),
                    cap * 0.8,
                    used / cap * 100.0
                )
            },
        );
        let _ = write!(
            body,
            "<tr><td>{measure}</td><td>{}</td><td>{}</td><td>{meter}</td></tr>",
            escape(&shown),
            escape(&cap_shown)
        );
    };
    let none = || "none".to_owned();
    #[allow(clippy::cast_precision_loss)]
    let as_f64 = |value: u64| value as f64;
    row(
        "Wall time",
        spent.wall_s * 1000.0,
        format!("{:.1} s", spent.wall_s),
        caps.ms.map(as_f64),
        caps.ms.map_or_else(none, seconds),
    );
    row(
        "Agent dispatches",
        as_f64(spent.dispatches),
        spent.dispatches.to_string(),
        caps.max_agent_dispatches.map(as_f64),
        caps.max_agent_dispatches
            .map_or_else(none, |cap| cap.to_string()),
    );
    row(
        "Tokens",
        as_f64(spent.tokens),
        spent.tokens.to_string(),
        caps.max_tokens.map(as_f64),
        caps.max_tokens.map_or_else(none, |cap| cap.to_string()),
    );
    row(
        "Dollars",
        spent.dollars,
        format!("${:.4}", spent.dollars),
        caps.usd,
        caps.usd.map_or_else(none, |cap| format!("${cap:.2}")),
    );
    body.push_str("</tbody></table>");
    section(html, "budget", "Budget", &body);
}

/// The flow's unattended drive and the agent runs launched for it; a running one shows its
/// live tail (the page refreshes it every two seconds while it runs).
fn agent_runs(html: &mut String, view: &FlowView) {
    use crate::store::{DriveState, RunStatus};
    if view.runs.is_empty() && view.drive.is_none() {
        return;
    }
    let mut body = String::new();
    if let Some(drive) = &view.drive {
        let state = match (drive.state, &drive.owner, &drive.parked) {
            (DriveState::Active, Some(owner), _) if drive.expires_ms > crate::now_ms() => {
                format!(
                    "Driven unattended by <code>{}</code> (lease until {}).",
                    escape(owner),
                    moment(drive.expires_ms)
                )
            }
            (DriveState::Active, _, Some(_)) => {
                "Driven unattended; waiting at a gate for a person.".to_owned()
            }
            (DriveState::Active, _, _) => "Driven unattended; waiting for a worker.".to_owned(),
            (state, _, _) => format!(
                "Unattended drive {}{}.",
                escape(state.as_str()),
                drive
                    .note
                    .as_deref()
                    .map(|note| format!(": {}", shown_text(note)))
                    .unwrap_or_default()
            ),
        };
        let _ = write!(body, "<p id=\"drive\">{state}</p>");
    }
    if !view.runs.is_empty() {
        body.push_str("<ul class=\"runs\">");
        for run in &view.runs {
            let running = run.status == RunStatus::Running;
            let _ = write!(
                body,
                "<li{live}><code class=\"id\">{id}</code> step {step} · attempt {attempt} · \
                 {agent}{model} · <strong>{status}</strong> · started {started}{pid}{reason}",
                live = if running { " data-running-agent" } else { "" },
                id = escape(&run.id),
                step = shown_name(run.step.as_deref().unwrap_or("?")),
                attempt = run.attempt.unwrap_or(0),
                agent = escape(&run.agent),
                model = run
                    .model
                    .as_deref()
                    .map(|model| format!(" ({})", escape(model)))
                    .unwrap_or_default(),
                status = escape(run.status.as_str()),
                started = moment(run.started_ms),
                pid = run
                    .pid
                    .map(|pid| format!(" · pid {pid} on {}", escape(&run.host)))
                    .unwrap_or_default(),
                reason = run
                    .reason
                    .as_deref()
                    .map(|reason| format!("<br>{}", shown_text(reason)))
                    .unwrap_or_default(),
            );
            if running && !run.events.is_empty() {
                let skip = run.events.len().saturating_sub(12);
                let tail: Vec<&str> = run.events.iter().skip(skip).map(String::as_str).collect();
                let _ = write!(
                    body,
                    "<pre class=\"tail\" aria-label=\"live output\">{}</pre>",
                    escape(&tail.join("\n"))
                );
            }
            body.push_str("</li>");
        }
        body.push_str("</ul>");
    }
    section(html, "agent-runs", "Agent runs", &body);
}

/// The tasks of each parallel or pipeline step: state, attempt, merge, the pre-merge check
/// that bounced one, and the live tail of a running task's agent (refreshed while it runs).
fn fan_out_tasks(html: &mut String, view: &FlowView) {
    use crate::state::TaskStatus;
    let Some(flow) = view.plan.flows.get(view.header.flow as usize) else {
        return;
    };
    let mut body = String::new();
    for (index, state) in &view.steps {
        let Some(fan) = &state.fan_out else { continue };
        let step_id = flow
            .steps
            .get(*index as usize)
            .map_or("?", |step| step.id.as_str());
        let dispatch = match fan.mode {
            Some(crate::state::FanOutMode::Server) => "run by the server",
            Some(crate::state::FanOutMode::Consumer) => "run by the agent",
            None => "not yet taken",
        };
        let _ = write!(
            body,
            "<h3>Step {step} · attempt {attempt} · {dispatch}</h3><table class=\"tasks\"><thead><tr><th>Task</th><th>State</th><th>Attempt</th><th>Merge</th><th>Diff</th><th>Why</th></tr></thead><tbody>",
            step = shown_name(step_id),
            attempt = fan.attempt,
        );
        for task in fan.tasks.iter().take(MAX_LIST_ENTRIES) {
            let running = task.status == TaskStatus::Running;
            let merge = match task.merge {
                crate::state::MergeState::Unmerged => "",
                crate::state::MergeState::Merging => "merging",
                crate::state::MergeState::Merged => "merged",
                crate::state::MergeState::Conflict => "conflict",
            };
            let why = task
                .violations
                .iter()
                .map(|violation| shown_text(violation))
                .collect::<Vec<_>>()
                .join("<br>");
            // Its size only: the text is in the task's diff row, and may be megabytes.
            let diff = match (&task.diff_ref, &task.diff) {
                (Some(reference), _) => byte_size(reference.bytes),
                (None, Some(inline)) => byte_size(u64::try_from(inline.len()).unwrap_or(u64::MAX)),
                (None, None) => String::new(),
            };
            let _ = write!(
                body,
                "<tr{live}><td><code class=\"id\">{id}</code></td><td>{state}</td><td>{attempt}</td><td>{merge}</td><td>{diff}</td><td>{why}</td></tr>",
                live = if running { " data-running-agent" } else { "" },
                id = escape(&task.id),
                state = escape(task.status.as_str()),
                attempt = task.attempt,
            );
            let tail = task
                .run_id
                .as_ref()
                .filter(|_| running)
                .and_then(|run_id| view.runs.iter().find(|run| &run.id == run_id))
                .filter(|run| !run.events.is_empty());
            if let Some(run) = tail {
                let skip = run.events.len().saturating_sub(8);
                let lines: Vec<&str> = run.events.iter().skip(skip).map(String::as_str).collect();
                let _ = write!(
                    body,
                    "<tr><td colspan=\"6\"><pre class=\"tail\" aria-label=\"live output of {id}\">{}</pre></td></tr>",
                    escape(&lines.join("\n")),
                    id = escape(&task.id),
                );
            }
        }
        body.push_str("</tbody></table>");
        if fan.tasks.len() > MAX_LIST_ENTRIES {
            body.push_str(&left_out_note(fan.tasks.len() - MAX_LIST_ENTRIES, "tasks"));
        }
    }
    if !body.is_empty() {
        section(html, "tasks", "Tasks", &body);
    }
}

/// A size for people: bytes, KiB or MiB.
#[allow(clippy::cast_precision_loss)] // a tenth of a unit is all that is shown
pub(super) fn byte_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        0 => "empty".to_owned(),
        b if b < KIB => format!("{b} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB) as f64),
    }
}

fn children(html: &mut String, view: &FlowView) {
    let mut body = String::new();
    if view.children.is_empty() {
        body.push_str("<p>No sub-flow has been started.</p>");
    } else {
        let (children, left_out) = newest(&view.children, MAX_LIST_ENTRIES);
        body.push_str(&left_out_note(left_out, "sub-flows"));
        body.push_str("<ul>");
        for child in children {
            let _ = write!(
                body,
                "<li><a href=\"/flows/{id}\">{name}</a> <code class=\"id\">{id}</code> — {status}{step}</li>",
                id = child.id,
                name = shown_name(&child.name),
                status = escape(child.status.as_str()),
                step = child
                    .step_id
                    .as_ref()
                    .map_or_else(String::new, |step| format!(
                        ", for step {}",
                        shown_name(step)
                    )),
            );
        }
        body.push_str("</ul>");
    }
    section(html, "children", "Sub-flows", &body);
}

fn checkpoints(html: &mut String, view: &FlowView) {
    let mut body = String::new();
    if view.checkpoints.is_empty() {
        body.push_str("<p>No checkpoint has been committed.</p>");
    } else {
        let (checkpoints, left_out) = newest(&view.checkpoints, MAX_LIST_ENTRIES);
        body.push_str(&left_out_note(left_out, "checkpoints"));
        body.push_str("<ul>");
        let flow = view.flow().ok();
        for checkpoint in checkpoints {
            let at = match checkpoint.cursor {
                crate::state::Cursor::Step(index) => flow
                    .and_then(|flow| flow.steps.get(index as usize))
                    .map_or_else(|| format!("step {index}"), |step| step.id.clone()),
                crate::state::Cursor::End => "the end".to_owned(),
            };
            let _ = write!(
                body,
                "<li><strong>{}</strong>: at {}, round {}</li>",
                shown_name(&checkpoint.label),
                shown_name(&at),
                checkpoint.round
            );
        }
        body.push_str("</ul>");
    }
    section(html, "checkpoints", "Checkpoints", &body);
}

fn timeline_section(html: &mut String, view: &FlowView) {
    let records: Vec<&Record> = view
        .events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::Record(record) => Some(record),
            _ => None,
        })
        .collect();
    let body = if records.is_empty() {
        "<p>Nothing has been recorded yet.</p>".to_owned()
    } else {
        let end = view
            .header
            .finished_ms
            .unwrap_or(view.header.updated_ms)
            .max(view.header.started_ms);
        let left_out = records.len().saturating_sub(timeline::MAX_ROWS);
        let note = if left_out > 0 {
            format!("<p>The oldest {left_out} records are left out.</p>")
        } else {
            String::new()
        };
        format!(
            "{note}<div class=\"scroll\">{}</div>",
            timeline::draw(&records, view.header.started_ms, end)
        )
    };
    section(html, "timeline", "Timeline", &body);
}

fn steps(
    html: &mut String,
    view: &FlowView,
    window: &Range<u32>,
) -> Result<(), crate::store::StoreError> {
    let flow = view.flow()?;
    let mut body = String::from(
        "<table><thead><tr><th scope=\"col\">Step</th><th scope=\"col\">Kind</th>\
         <th scope=\"col\">State</th><th scope=\"col\">Attempts</th><th scope=\"col\">Retries left</th>\
         <th scope=\"col\">Output</th></tr></thead><tbody>",
    );
    let shown = (0u32..)
        .zip(&flow.steps)
        .skip(window.start as usize)
        .take(window.len());
    for (index, step) in shown {
        let state = view.steps.get(&index);
        let kind = match &step.action {
            Action::Function { function, .. } => format!("function {}", shown_name(function)),
            Action::Inline { .. } => "inline".to_owned(),
            Action::Flow { flow } => view.plan.flows.get(*flow as usize).map_or_else(
                || "flow".to_owned(),
                |child| format!("flow {}", shown_name(&child.name)),
            ),
            Action::Gate { function, .. } => format!("gate {}", shown_name(function)),
            Action::Judge { .. } => "judge".to_owned(),
            Action::Decompose { .. } => "decompose".to_owned(),
            Action::Parallel { .. } => "parallel_dispatch".to_owned(),
            Action::Pipeline { .. } => "pipeline".to_owned(),
        };
        let output =
            state
                .and_then(|state| state.output.as_ref())
                .map_or_else(String::new, |output| {
                    format!(
                        "<details><summary>show</summary>{}</details>",
                        json_block(output)
                    )
                });
        let _ = write!(
            body,
            "<tr id=\"step-{index}\"><td>{}</td><td>{kind}</td><td><span class=\"key state-{look}\">{look}</span></td>\
             <td>{}</td><td>{}</td><td>{output}</td></tr>",
            shown_name(&step.id),
            state.map_or(0, |state| state.attempts),
            // Only the step being attempted has retries that matter.
            match view.look(index) {
                StepLook::Current => view
                    .retries_left(index)
                    .map_or_else(String::new, |left| left.to_string()),
                _ => "—".to_owned(),
            },
            look = view.look(index).as_str(),
        );
    }
    body.push_str("</tbody></table>");
    section(html, "steps", "Step details", &body);
    Ok(())
}

/// A JSON value in a `<pre>`, pretty, cut at [`MAX_JSON_CHARS`].
fn json_block(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    let cut: String = text.chars().take(MAX_JSON_CHARS).collect();
    let more = if cut.len() < text.len() {
        "\n… (cut; the whole value is in the audit)"
    } else {
        ""
    };
    format!("<pre class=\"json\">{}{more}</pre>", escape(&cut))
}

fn plural(count: u32, word: &str) -> String {
    match (count, word) {
        (1, _) => format!("1 {word}"),
        (_, "retry") => format!("{count} retries"),
        _ => format!("{count} {word}s"),
    }
}
