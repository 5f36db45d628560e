//! `GET /gates`: every gate a running flow waits at, across flows, each with its decision form;
//! `POST /gates/{flow}/{step}`: a decision, through the operator CLI's own command
//! ([`gate::resolve_as`]): one store transaction, `resolved_by: human`, the token's name as the
//! actor, and the CLI's conflict answers, so a gate decided elsewhere meanwhile is never
//! decided twice and the person is told what happened instead.
//!
//! Contract: `article.gate[data-flow-id][data-step-id][data-round]` per gate (id
//! `gate-FLOW-STEP`), `p#no-gates` when none waits; in each, the gate's
//! `div.gate-context` (see [`super::gate_context`]: the flow's input, the work before the
//! gate, earlier decisions, merged changes) and, for a token that may write, `form` posting to
//! `/gates/FLOW/STEP` with `textarea[name=rationale][required]` and `button[name=decision]`
//! valued `approve` (with `formnovalidate`: an approval may go without a reason), `revise`,
//! `kill`; a read-only token sees `p.read-only` instead. After a decision: 303 to
//! `/gates?done=…`, which shows `p[role=status]`; a revise or kill without a rationale: 422
//! with `p[role=alert]`, the gate still waiting; a conflict: 409 with `p[role=alert]`. The gate list is `data-live` and keyed
//! (by flow, step, round and arrival), so the script adds and drops gates without touching a
//! form being filled, and a gate reached again comes with its new context.

use std::fmt::Write;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::flows::encode;
use super::{Section, moment, shown_name, unavailable};
use crate::cli::gate::{self, Decision, GateAnswer, ResolvedBy};
use crate::cli::query::{self, PendingGate};
use crate::http::App;
use crate::http::auth::Identity;
use crate::http::pages::{escape, form};
use crate::store::StoreError;

/// The longest rationale kept (characters); the form says so.
pub const MAX_RATIONALE_CHARS: usize = 4_000;

/// What the redirect after a decision says: the outcome, the gate, where the flow is now.
#[derive(Deserialize, Default)]
pub struct GatesQuery {
    decided: Option<String>,
    flow: Option<String>,
    step: Option<String>,
    now: Option<String>,
}

impl GatesQuery {
    /// The sentence that tells what was just decided (the outcome from a fixed list, so a
    /// crafted link cannot make the page say something else).
    fn notice(&self) -> Option<String> {
        let done = match self.decided.as_deref()? {
            "approve" => "Approved",
            "kill" => "Killed",
            "revise" => "Sent back for revision",
            _ => return None,
        };
        let now = match self.now.as_deref().unwrap_or("") {
            "execute_step" | "execute_flow" => "the flow moves on".to_owned(),
            "await_gate" => "the flow waits at its next gate".to_owned(),
            "complete" => "the flow is complete".to_owned(),
            "killed" => "the flow was killed".to_owned(),
            // The gate's rule wants more approvers than this one (`min_approvals`).
            "approval_recorded" => {
                "your approval is counted, and the gate waits for other approvers".to_owned()
            }
            other => format!("the flow is now {}", other.replace('_', " ")),
        };
        Some(format!(
            "<p role=\"status\" class=\"notice\">{done} the gate {} of flow {}; {}.</p>\n",
            escape(self.step.as_deref().unwrap_or("")),
            escape(self.flow.as_deref().unwrap_or("")),
            escape(&now)
        ))
    }
}

/// `GET /gates`.
pub async fn list(
    State(app): State<App>,
    identity: Identity,
    Query(query): Query<GatesQuery>,
) -> Response {
    let notice = query.notice().unwrap_or_default();
    gates_page(&app, &identity, StatusCode::OK, notice).await
}

async fn gates_page(
    app: &App,
    identity: &Identity,
    status: StatusCode,
    notice: String,
) -> Response {
    let waiting = app.blocking(waiting).await;
    let waiting = match waiting {
        Ok(waiting) => waiting,
        Err(error) => return unavailable(identity, &error),
    };
    let mut body = format!("<h1>Gates</h1>\n{notice}");
    if identity.read_only {
        body.push_str(
            "<p class=\"read-only\">You are signed in with a read-only token: you can see the \
             gates, not decide them.</p>\n",
        );
    }
    body.push_str("<div data-live=\"gates\" data-live-keyed>");
    if waiting.is_empty() {
        body.push_str("<p id=\"no-gates\" data-key=\"none\">No gate is waiting.</p>");
    }
    for waiting in &waiting {
        article(&mut body, identity, waiting);
    }
    body.push_str("</div>");
    super::page(identity, Section::Gates, status, "Gates", &body)
}

/// Every waiting gate, newest flow first, with its context.
fn waiting(store: &dyn crate::store::Store) -> Result<Vec<PendingGate>, StoreError> {
    query::gates(store)
}

fn article(body: &mut String, identity: &Identity, gate: &PendingGate) {
    let flow = escape(&gate.flow_id);
    let step = shown_name(&gate.step_id);
    let key = format!("{flow}-{step}");
    // The script keeps a card whose key is unchanged (a rationale being typed stays): the
    // gate reached again, in a new round or by a new route, is a new card with its context.
    let live_key = format!(
        "{key}-{}-{}",
        gate.context.round,
        gate.context.waiting_since_ms.unwrap_or_default()
    );
    let routes = [
        ("approve", &gate.on_approve),
        ("revise", &gate.on_revise),
        ("kill", &gate.on_kill),
    ]
    .iter()
    .filter_map(|(outcome, target)| {
        target
            .as_ref()
            .map(|target| format!("{outcome} → <code>{}</code>", shown_name(target)))
    })
    .collect::<Vec<_>>()
    .join(", ");
    let _ = write!(
        body,
        "<article class=\"gate\" id=\"gate-{key}\" data-key=\"{live_key}\" data-flow-id=\"{flow}\" \
         data-step-id=\"{step}\" data-round=\"{round}\" aria-labelledby=\"gate-{key}-h\">\
         <h2 id=\"gate-{key}-h\">{step} <span class=\"of\">in <a href=\"/flows/{flow}\">{name}</a> \
         <code class=\"id\">{short}</code></span></h2>\
         <p>Function <code>{function}</code>, round {round}{since}{timeout}.{routes}</p>{context}",
        name = shown_name(&gate.flow_name),
        short = escape(gate.flow_id.get(..8).unwrap_or(&gate.flow_id)),
        function = shown_name(&gate.function),
        round = gate.context.round,
        since = gate
            .context
            .waiting_since_ms
            .map_or_else(String::new, |at| format!(", waiting since {}", moment(at))),
        timeout = gate.timeout.map_or_else(String::new, |seconds| format!(
            ", killed after {} without a decision",
            super::timeline::seconds(seconds.saturating_mul(1000))
        )),
        routes = if routes.is_empty() {
            String::new()
        } else {
            format!(" Routes: {routes}.")
        },
        context = super::gate_context::render(&gate.context),
    );
    if !identity.read_only {
        let fields = format!(
            "<label for=\"rationale-{key}\">Rationale <span class=\"sub\">(needed to revise or \
             kill; optional to approve)</span></label>\
             <textarea id=\"rationale-{key}\" name=\"rationale\" rows=\"2\" maxlength=\"{MAX_RATIONALE_CHARS}\" \
             required placeholder=\"Why (kept in the audit; the agent reads it)\"></textarea>\
             <div class=\"decisions\">\
             <button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\" formnovalidate>Approve</button>\
             <button type=\"submit\" name=\"decision\" value=\"revise\" class=\"revise\">Revise</button>\
             <button type=\"submit\" name=\"decision\" value=\"kill\" class=\"kill\">Kill</button></div>"
        );
        body.push_str(&form(
            identity,
            &format!("/gates/{}/{}", encode(&gate.flow_id), encode(&gate.step_id)),
            &fields,
        ));
    }
    body.push_str("</article>");
}

#[derive(Deserialize)]
pub struct DecisionForm {
    decision: String,
    #[serde(default)]
    rationale: String,
}

/// `POST /gates/{flow}/{step}`.
pub async fn decide(
    State(app): State<App>,
    identity: Identity,
    Path((flow_id, step_id)): Path<(String, String)>,
    Form(posted): Form<DecisionForm>,
) -> Response {
    let decision = match posted.decision.as_str() {
        "approve" => Decision::Approve,
        "revise" => Decision::Revise,
        "kill" => Decision::Kill,
        other => {
            let notice = format!(
                "<p role=\"alert\" class=\"problem\">There is no decision “{}”: choose approve, \
                 revise or kill.</p>\n",
                escape(other)
            );
            return gates_page(&app, &identity, StatusCode::BAD_REQUEST, notice).await;
        }
    };
    let rationale: String = posted
        .rationale
        .trim()
        .chars()
        .take(MAX_RATIONALE_CHARS)
        .collect();
    // A revise or a kill tells the agent (and the audit's reader) to do otherwise: without a
    // reason, neither knows what. The form's `required` says so first; this is for a browser
    // without it, and for any other client.
    if rationale.is_empty() && decision != Decision::Approve {
        let notice = format!(
            "<p role=\"alert\" class=\"problem\">The gate {} of flow {} was not decided: to {} \
             it, say why in the rationale (the audit keeps it, and the agent reads it).</p>\n",
            escape(&step_id),
            escape(&flow_id),
            decision.outcome()
        );
        return gates_page(&app, &identity, StatusCode::UNPROCESSABLE_ENTITY, notice).await;
    }
    let runtime = app.runtime();
    let actor = identity.name.clone();
    let (flow, step) = (flow_id.clone(), step_id.clone());
    let answer = tokio::task::spawn_blocking(move || {
        gate::resolve_as(
            &runtime,
            &flow,
            &step,
            decision,
            &rationale,
            ResolvedBy::Human,
            Some(&actor),
            // The console's card does not ask for a typed gate's value yet.
            None,
        )
    })
    .await
    .unwrap_or_else(|panic| {
        Err(StoreError::Database(format!(
            "the gate decision failed unexpectedly: {panic}"
        )))
    });
    match answer {
        Ok(GateAnswer::Done(done)) => {
            let to = format!(
                "/gates?decided={}&flow={}&step={}&now={}",
                encode(&done.outcome),
                encode(&done.flow_id),
                encode(&done.step_id),
                encode(&done.result)
            );
            Redirect::to(&to).into_response()
        }
        Ok(GateAnswer::NotFound(missing)) => {
            let notice = format!(
                "<p role=\"alert\" class=\"problem\">{} It may have been pruned.</p>\n",
                escape(&missing.error.message)
            );
            gates_page(&app, &identity, StatusCode::NOT_FOUND, notice).await
        }
        Ok(GateAnswer::Conflict(conflict)) => {
            let notice = format!(
                "<p role=\"alert\" class=\"problem\">The gate {step} of flow {flow} was not \
                 decided: {message} ({kind}). Someone may have decided it meanwhile; the list \
                 below is as it stands now.</p>\n",
                step = escape(&step_id),
                flow = escape(&flow_id),
                message = escape(&conflict.for_person()),
                kind = escape(&conflict.error_type)
            );
            gates_page(&app, &identity, StatusCode::CONFLICT, notice).await
        }
        Err(error) => unavailable(&identity, &error),
    }
}
