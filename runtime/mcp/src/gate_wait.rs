//! `stratum_gate_wait`: an agent hands a gate's decision to the person in its own client. The
//! server asks them through MCP elicitation (a form: the decision, a rationale), without the
//! model in between, and their answer goes through the gate's one resolution path, recorded
//! `resolved_by: human`, `via: elicitation`, with the client's name and version. While the form
//! is open the call sends a progress heartbeat; at the gate's `timeout` the form is withdrawn
//! and the timeout rule applies. Declined, cancelled, or a client that cannot ask: the gate
//! stays pending and the answer says how else to decide. What the form says about the gate is
//! its [`GateContext`], the one every surface shows, folded for a dialog.
//!
//! Over stdio on 2025-11-25 the question is `elicitation/create`, sent during the call. On
//! 2026-07-28 (stdio or HTTP) a server sends no requests; the call answers `input_required`
//! with the same form and a sealed `requestState` ([`crate::request_state`]), and the client
//! calls again with the person's answer. A 2025-11-25 client over stateless HTTP cannot be
//! asked: there the answer is `gate_pending` with `reason: not_asked`.

use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::gate_context::{Folded, GateContext, TextBounds, to_text};
use crate::outputs::ToolError;
use crate::progress::{self, Progress};

/// The longest a call waits for a person when the gate has no timeout and the call sets none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3600);
/// The longest `wait_seconds` may ask for.
pub const MAX_WAIT_SECONDS: u64 = 86_400;
/// The most characters of the message above the form, whatever the context holds (each
/// part of it is bounded by [`TextBounds::FORM`] too).
const MAX_MESSAGE_CHARS: usize = 16_000;

/// `stratum_gate_wait`'s answer when nobody decided in the call: the gate still waits.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GatePending {
    #[schemars(extend("const" = "gate_pending"))]
    pub status: &'static str,
    pub flow_id: String,
    pub step_id: String,
    /// `declined` or `cancelled` (the person closed the form), `no_answer` (the wait ended
    /// before the gate's timeout), `not_asked` (the client cannot show a form).
    #[schemars(extend("enum" = ["declined", "cancelled", "no_answer", "not_asked"]))]
    pub reason: &'static str,
    pub message: String,
    /// How else the person can decide: the console, the CLI.
    pub how_to_decide: String,
}

/// The gate the form asks about: where it is, how long the call may wait, and what the person
/// reads above the form.
pub struct GateView {
    pub flow_id: String,
    pub step_id: String,
    /// The round the answer is bound to.
    pub round: u64,
    pub how_to_decide: String,
    /// Seconds until the gate's timeout, when it has one.
    pub remaining_s: Option<u64>,
    /// The flow, its input, the work before the gate, earlier decisions, merged diffs.
    pub context: GateContext,
    /// The JSON Schema of the value an approval decides, when the gate's function declares
    /// `output` (the form then asks for its fields).
    pub value_schema: Option<Value>,
}

/// What the person answered.
pub enum Answer {
    Decided {
        outcome: String,
        rationale: String,
        client: Option<String>,
        /// The typed value, when the gate decides one and the person approved.
        value: Option<Value>,
    },
    Pending(GatePending),
}

/// Whether the client of `peer` can show a form now.
pub fn can_ask(peer: Option<&Peer<RoleServer>>) -> bool {
    peer.is_some_and(|peer| {
        peer.supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
    })
}

/// The client's name and version, as it declared them.
pub fn client_of(peer: &Peer<RoleServer>) -> Option<String> {
    peer.peer_info().map(|info| {
        format!(
            "{} {}",
            info.client_info.name.trim(),
            info.client_info.version.trim()
        )
    })
}

/// The form's key in an `input_required` answer (2026-07-28) and in the responses the client
/// sends back with the person's answer.
pub const INPUT_KEY: &str = "gate_decision";

/// The request that asks the person about `gate`: its message and the form.
pub fn request(gate: &GateView) -> Result<ElicitRequestParams, ToolError> {
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(gate),
        requested_schema: form(gate.value_schema.as_ref())?,
    })
}

/// Asks the person through `peer` and waits up to `wait` (the gate's timeout ends the form
/// too), sending a heartbeat to `progress` meanwhile.
pub async fn ask(
    peer: &Peer<RoleServer>,
    gate: &GateView,
    wait: Duration,
    progress: &Progress,
) -> Result<Answer, ToolError> {
    let started = Instant::now();
    let asked = peer.create_elicitation_with_timeout(request(gate)?, Some(wait));
    tokio::pin!(asked);
    let mut heartbeat = tokio::time::interval(progress::HEARTBEAT);
    heartbeat.tick().await;
    let answered = loop {
        tokio::select! {
            answered = &mut asked => break answered,
            _ = heartbeat.tick() => {
                let waited = started.elapsed().as_secs();
                progress.report(
                    0,
                    None,
                    &format!(
                        "waiting {waited} s for a person to decide gate '{}' in the client's form",
                        gate.step_id
                    ),
                );
            }
        }
    };
    match answered {
        Ok(result) => Ok(answer(result, gate, client_of(peer))),
        Err(rmcp::ServiceError::Timeout { timeout }) => Ok(pending(
            gate,
            "no_answer",
            format!(
                "nobody answered the form within {} s; it was withdrawn and the gate still waits",
                timeout.as_secs()
            ),
        )),
        Err(error) => Err(ToolError::new(
            "elicitation_failed",
            format!(
                "the client could not ask the person ({error}); the gate still waits: {}",
                gate.how_to_decide
            ),
        )),
    }
}

/// What the person's `result` of the form about `gate` decides, from `client`.
pub fn answer(result: ElicitResult, gate: &GateView, client: Option<String>) -> Answer {
    match result.action {
        ElicitationAction::Decline => pending(
            gate,
            "declined",
            "the person declined to decide in the form; the gate still waits".to_owned(),
        ),
        ElicitationAction::Accept => {
            let content = result.content.unwrap_or(Value::Null);
            let outcome = content.get("decision").and_then(Value::as_str);
            let rationale = content
                .get("rationale")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim();
            match outcome {
                Some(outcome @ ("approve" | "revise" | "kill")) if !rationale.is_empty() => {
                    let value = match (outcome, &gate.value_schema) {
                        ("approve", Some(schema)) => Some(typed_value(&content, schema)),
                        _ => None,
                    };
                    Answer::Decided {
                        outcome: outcome.to_owned(),
                        rationale: rationale.to_owned(),
                        client,
                        value,
                    }
                }
                _ => pending(
                    gate,
                    "declined",
                    format!(
                        "the form came back without a decision (approve, revise or kill) and a \
                         rationale ({content}); the gate still waits"
                    ),
                ),
            }
        }
        // A future action of the protocol is not a decision either.
        _ => pending(
            gate,
            "cancelled",
            "the person closed the form; the gate still waits".to_owned(),
        ),
    }
}

/// The gate still waits, for `reason`.
pub fn pending(gate: &GateView, reason: &'static str, message: String) -> Answer {
    Answer::Pending(GatePending {
        status: "gate_pending",
        flow_id: gate.flow_id.clone(),
        step_id: gate.step_id.clone(),
        reason,
        message,
        how_to_decide: gate.how_to_decide.clone(),
    })
}

/// The form: the decision and why, and when the gate decides a typed value (its function's
/// `output`), one field per field of the contract: a text, number or yes/no field as the
/// field's type says (a choice for `values`), a JSON text for a list or a nested record. They
/// are optional in the form (revise and kill need none); an approval missing one is refused
/// by the gate with what is missing.
fn form(value_schema: Option<&Value>) -> Result<ElicitationSchema, ToolError> {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "decision".to_owned(),
        json!({
            "type": "string",
            "title": "Decision",
            "description": "approve: go on; revise: do the work again from the revise step; kill: stop the flow",
            "enum": ["approve", "revise", "kill"]
        }),
    );
    properties.insert(
        "rationale".to_owned(),
        json!({
            "type": "string",
            "title": "Why",
            "description": "Kept in the flow's audit with your decision"
        }),
    );
    for (name, field) in value_fields(value_schema) {
        properties.insert(field_key(&name), form_field(&name, &field));
    }
    serde_json::from_value(json!({
        "type": "object",
        "properties": properties,
        "required": ["decision", "rationale"]
    }))
    .map_err(|error| ToolError::new("internal_error", format!("the gate form: {error}")))
}

/// The fields of the decided value's contract, in order.
fn value_fields(schema: Option<&Value>) -> Vec<(String, Value)> {
    schema
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A field's key in the form: its name, kept apart from the form's own two.
fn field_key(name: &str) -> String {
    match name {
        "decision" | "rationale" => format!("value.{name}"),
        _ => name.to_owned(),
    }
}

/// Whether a contract field is shown as JSON text (a list, a record, anything not one value
/// or a choice of texts).
fn as_json_text(field: &Value) -> bool {
    let choice_of_texts = field
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| values.iter().all(Value::is_string));
    !choice_of_texts
        && !matches!(
            field.get("type").and_then(Value::as_str),
            Some("string" | "number" | "integer" | "boolean")
        )
}

/// The form's field for the contract field `name`.
fn form_field(name: &str, field: &Value) -> Value {
    let described = field.get("description").and_then(Value::as_str);
    if as_json_text(field) {
        let what = described.map_or_else(String::new, |text| format!("{text}; "));
        return json!({
            "type": "string",
            "title": name,
            "description": format!("{what}approve: the value as JSON"),
        });
    }
    let mut shown = serde_json::Map::new();
    // A choice of texts (`values`) has no `type` of its own: the form's field is a text.
    shown.insert("type".to_owned(), Value::String("string".to_owned()));
    for key in [
        "type",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
    ] {
        if let Some(value) = field.get(key) {
            shown.insert(key.to_owned(), value.clone());
        }
    }
    shown.insert("title".to_owned(), Value::String(name.to_owned()));
    let description =
        described.map_or_else(|| "the value you approve with".to_owned(), str::to_owned);
    shown.insert("description".to_owned(), Value::String(description));
    Value::Object(shown)
}

/// The value the form's `content` gives for the contract `schema`: each field present, a JSON
/// text read as JSON (kept as text when it is not, for the gate to refuse with why).
fn typed_value(content: &Value, schema: &Value) -> Value {
    let mut value = serde_json::Map::new();
    for (name, field) in value_fields(Some(schema)) {
        let Some(given) = content.get(field_key(&name)) else {
            continue;
        };
        let given = match given.as_str() {
            Some(text) if as_json_text(&field) => {
                serde_json::from_str(text).unwrap_or_else(|_| given.clone())
            }
            _ => given.clone(),
        };
        value.insert(name, given);
    }
    Value::Object(value)
}

/// What the person reads above the form: the flow and its input, the gate and what it decides
/// between, when it times out, the work before it, the decisions made before, and the changes
/// merged, each folded ([`TextBounds::FORM`]) and the whole cut at [`MAX_MESSAGE_CHARS`].
pub fn message(gate: &GateView) -> String {
    let mut context = gate.context.clone();
    // The call's own reading of the timeout (the gate's clock as `CheckTimeouts` saw it).
    context.remaining_s = gate.remaining_s.or(context.remaining_s);
    Folded::of_text(&to_text(&context, TextBounds::FORM), MAX_MESSAGE_CHARS).shown()
}
