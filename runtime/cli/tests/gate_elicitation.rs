//! Gates a person decides in the agent's own client: `stratum_gate_wait` asks them through
//! MCP elicitation (rmcp's client playing the person), and their answer is the gate's
//! resolution, recorded `resolved_by: human`, `via: elicitation`, with the client's name and
//! version. Declined, cancelled, unanswered forms and clients that cannot ask leave the gate
//! waiting; the gate's timeout withdraws the form and applies its rule; under the
//! `person-only` policy an agent's own `stratum_gate_resolve` is refused.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

mod mcp;

use mcp::{McpServer, Protocol, Recorder, Reply, status};
use serde_json::{Value, json};

const SPEC: &str = r#"version: "0.2"
contracts:
  Draft:
    text: {type: string}
functions:
  write:
    mode: infer
    intent: "Write the release note"
    input: {}
    output: Draft
  sign_off:
    mode: gate
    timeout: 3600
  quick_sign_off:
    mode: gate
    timeout: 3
flows:
  release:
    input: {}
    max_rounds: 3
    steps:
      - id: write
        function: write
        inputs: {}
      - id: review
        function: sign_off
        on_approve: ~
        on_revise: write
        on_kill: ~
        depends_on: [write]
  hurried:
    input: {}
    steps:
      - id: write
        function: write
        inputs: {}
      - id: review
        function: quick_sign_off
        on_approve: ~
        on_revise: write
        on_kill: ~
        depends_on: [write]
"#;

fn accept(decision: &str, rationale: &str) -> Reply {
    Reply::Answer(json!({
        "action": "accept",
        "content": {"decision": decision, "rationale": rationale}
    }))
}

/// A server whose client answers forms with `replies`, the flow `flow` at its gate.
async fn at_gate(
    flow: &str,
    replies: Vec<Reply>,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, McpServer, String) {
    at_gate_with(flow, Protocol::Handshake, Recorder::asking(replies), env).await
}

/// A server on `protocol` whose client is `client`, the flow `flow` at its gate.
async fn at_gate_with(
    flow: &str,
    protocol: Protocol,
    client: Recorder,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, McpServer, String) {
    let home = tempfile::tempdir().unwrap();
    let mut server =
        McpServer::start_with_client(home.path(), home.path(), protocol, env, client).await;
    server
        .call(
            "stratum_plan",
            json!({"spec": SPEC, "flow": flow, "inputs": {}}),
        )
        .await;
    let id = server.flow(1);
    let gate = server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "v1.2: faster gates"}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    (home, server, id)
}

fn gate_records(audit: &Value) -> Vec<Value> {
    audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .chain(
            audit["rounds"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|round| round["steps"].as_array().unwrap().iter()),
        )
        .filter(|record| record.get("outcome").is_some())
        .cloned()
        .collect()
}

#[tokio::test]
async fn the_person_approves_in_the_form_and_the_audit_says_so() {
    let (_home, mut server, id) =
        at_gate("release", vec![accept("approve", "reads well")], &[]).await;
    let answer = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&answer), "complete", "{answer:#}");

    // The form showed the flow and its input, the gate, where each decision leads and the
    // work before it.
    let asked = server.received.asked();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let message = asked[0]["message"].as_str().unwrap();
    for part in [
        &format!("Flow 'release' ({id}) waits at gate 'review' (sign_off), round 0."),
        "approve → the flow completes; revise → step 'write'; kill → the flow ends, killed.",
        "The gate times out in ",
        "The flow's input:\n  {}\n",
        "The work before the gate:\n- write:\n  {\n    \"text\": \"v1.2: faster gates\"\n  }\n",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["approve", "revise", "kill"])
    );

    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let gates = gate_records(&audit);
    assert_eq!(gates.len(), 1, "{audit:#}");
    assert_eq!(gates[0]["outcome"], "approve");
    assert_eq!(gates[0]["rationale"], "reads well");
    assert_eq!(gates[0]["resolved_by"], "human");
    assert_eq!(gates[0]["via"], "elicitation");
    assert_eq!(gates[0]["client"], "stratum-test-client 1.2.3");
    server.stop().await;
}

#[tokio::test]
async fn revise_starts_a_new_round_and_the_next_form_is_for_that_round() {
    let (_home, mut server, id) = at_gate(
        "release",
        vec![
            accept("revise", "say what changed"),
            accept("kill", "not now"),
        ],
        &[],
    )
    .await;
    let revised = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&revised), "execute_step", "{revised:#}");
    assert_eq!(revised["step_id"], "write", "{revised:#}");
    // The gate of the earlier round cannot be asked again: the flow is not at it.
    let early = server
        .refused(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(early["error_type"], "not_at_gate", "{early:#}");
    server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "v1.2: gates in the client"}}),
        )
        .await;
    let killed = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&killed), "killed", "{killed:#}");
    let asked = server.received.asked();
    let second = asked[1]["message"].as_str().unwrap();
    assert!(second.contains("round 1."), "{second}");
    // The second form shows the work of the new round, and why it was sent back.
    assert!(second.contains("v1.2: gates in the client"), "{second}");
    assert!(
        second.contains(
            "Earlier decisions:\n- round 0, review: revise by human, via elicitation \
             (stratum-test-client 1.2.3) at "
        ) && second.contains(": \"say what changed\"\n"),
        "{second}"
    );
    assert!(second.contains("gates in the client"), "{second}");
    server.stop().await;
}

#[tokio::test]
async fn a_declined_or_closed_form_leaves_the_gate_waiting_and_says_how_else_to_decide() {
    let (_home, mut server, id) = at_gate(
        "release",
        vec![
            Reply::Answer(json!({"action": "decline"})),
            Reply::Answer(json!({"action": "cancel"})),
        ],
        &[],
    )
    .await;
    for reason in ["declined", "cancelled"] {
        let pending = server
            .call(
                "stratum_gate_wait",
                json!({"flow_id": id, "step_id": "review"}),
            )
            .await;
        assert_eq!(status(&pending), "gate_pending", "{pending:#}");
        assert_eq!(pending["reason"], reason, "{pending:#}");
        let how = pending["how_to_decide"].as_str().unwrap();
        assert!(
            how.contains(&format!("stratum-mcp gate approve {id} review")),
            "{how}"
        );
    }
    let still = server.call("stratum_resume", json!({"flow_id": id})).await;
    assert_eq!(status(&still), "await_gate", "{still:#}");
    server.stop().await;
}

#[tokio::test]
async fn at_the_gate_s_timeout_the_form_is_withdrawn_and_the_timeout_rule_applies() {
    let (_home, mut server, id) = at_gate("hurried", vec![Reply::Never], &[]).await;
    let started = std::time::Instant::now();
    let answer = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&answer), "killed", "{answer:#}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the call ended at the gate's deadline"
    );
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let gates = gate_records(&audit);
    assert_eq!(gates[0]["resolved_by"], "system", "{audit:#}");
    assert_eq!(gates[0]["rationale"], "timeout", "{audit:#}");
    server.stop().await;
}

#[tokio::test]
async fn an_unanswered_form_within_the_wait_leaves_the_gate_waiting() {
    let (_home, mut server, id) = at_gate("release", vec![Reply::Never], &[]).await;
    let pending = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review", "wait_seconds": 1}),
        )
        .await;
    assert_eq!(status(&pending), "gate_pending", "{pending:#}");
    assert_eq!(pending["reason"], "no_answer", "{pending:#}");
    let bad = server
        .refused(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review", "wait_seconds": 0}),
        )
        .await;
    assert_eq!(bad["argument"], "wait_seconds", "{bad:#}");
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_cannot_show_a_form_gets_the_gate_back_with_how_to_decide() {
    let (_home, mut server, id) =
        at_gate_with("release", Protocol::Handshake, Recorder::default(), &[]).await;
    let pending = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&pending), "gate_pending", "{pending:#}");
    assert_eq!(pending["reason"], "not_asked", "{pending:#}");
    server.stop().await;
}

#[tokio::test]
async fn under_person_only_the_agent_cannot_resolve_its_own_gate() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[gates]\npolicy = \"person-only\"\n").unwrap();
    let path = config.path().display().to_string();
    let (_home, mut server, id) = at_gate(
        "release",
        vec![accept("approve", "checked it myself")],
        &[("STRATUM_CONFIG", &path)],
    )
    .await;
    let refused = server
        .refused(
            "stratum_gate_resolve",
            json!({"flow_id": id, "step_id": "review", "outcome": "approve",
                   "rationale": "lgtm", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(refused["error_type"], "person_required", "{refused:#}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("stratum_gate_wait"), "{message}");
    let approved = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&approved), "complete", "{approved:#}");
    server.stop().await;
}

#[tokio::test]
async fn on_2026_07_28_the_server_does_not_ask_mid_call_and_says_how_else_to_decide() {
    let client = Recorder::asking(vec![accept("approve", "fine")]);
    let (_home, mut server, id) = at_gate_with("release", Protocol::Stateless, client, &[]).await;
    let pending = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&pending), "gate_pending", "{pending:#}");
    assert_eq!(pending["reason"], "not_asked", "{pending:#}");
    assert!(server.received.asked().is_empty());
    server.stop().await;
}
