//! Gates a person decides in the agent's own client: `stratum_gate_wait` asks them through
//! MCP elicitation (rmcp's client playing the person), and their answer is the gate's
//! resolution, recorded `resolved_by: human`, `via: elicitation`, with the client's name and
//! version. Declined, cancelled, unanswered forms and clients that cannot ask leave the gate
//! waiting; the gate's timeout withdraws the form and applies its rule; under the
//! `person-only` policy an agent's own `stratum_gate_resolve` is refused; under a gate
//! function's approval rules the form's answer is the decision of the operating-system user
//! running the server, and the agent's own call is refused.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

mod mcp;

use mcp::{McpServer, Protocol, Recorder, Reply, os_user, status};
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

/// A server on `protocol` whose client is `client`, the flow `flow` at its gate. Unless `env`
/// names a config file, the server asks only when `stratum_gate_wait` is called
/// (`ask_when_reached = false`), so that the step that reaches the gate does not.
async fn at_gate_with(
    flow: &str,
    protocol: Protocol,
    client: Recorder,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, McpServer, String) {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("only-when-called.toml");
    std::fs::write(&config, "[gates]\nask_when_reached = false\n").unwrap();
    let config = config.display().to_string();
    let mut env = env.to_vec();
    if !env.iter().any(|(name, _)| *name == "STRATUM_CONFIG") {
        env.push(("STRATUM_CONFIG", &config));
    }
    let mut server =
        McpServer::start_with_client(home.path(), home.path(), protocol, &env, client).await;
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

/// `stratum_gate_wait` on the `review` gate of flow `id`: its answer.
async fn wait_at_review(server: &mut McpServer, id: &str) -> Value {
    server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
        )
        .await
}

#[tokio::test]
async fn the_person_approves_in_the_form_and_the_audit_says_so() {
    let (_home, mut server, id) =
        at_gate("release", vec![accept("approve", "reads well")], &[]).await;
    let answer = wait_at_review(&mut server, &id).await;
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
    let revised = wait_at_review(&mut server, &id).await;
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
    let killed = wait_at_review(&mut server, &id).await;
    assert_eq!(status(&killed), "killed", "{killed:#}");
    let asked = server.received.asked();
    let second = asked[1]["message"].as_str().unwrap();
    assert!(second.contains("round 1."), "{second}");
    // The second form shows the work of the new round, and why it was sent back.
    assert!(second.contains("v1.2: gates in the client"), "{second}");
    assert!(
        second.contains(&format!(
            "Earlier decisions:\n- round 0, review: revise by human as {}, via elicitation \
             (stratum-test-client 1.2.3) at ",
            mcp::os_user()
        )) && second.contains(": \"say what changed\"\n"),
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
        let pending = wait_at_review(&mut server, &id).await;
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
    let answer = wait_at_review(&mut server, &id).await;
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
    // On either protocol: no elicitation capability, no form.
    for protocol in [Protocol::Handshake, Protocol::Stateless] {
        let (_home, mut server, id) =
            at_gate_with("release", protocol, Recorder::default(), &[]).await;
        let pending = wait_at_review(&mut server, &id).await;
        assert_eq!(status(&pending), "gate_pending", "{pending:#}");
        assert_eq!(pending["reason"], "not_asked", "{pending:#}");
        server.stop().await;
    }
}

#[tokio::test]
async fn under_person_only_the_agent_cannot_resolve_its_own_gate() {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        "[gates]\npolicy = \"person-only\"\nask_when_reached = false\n",
    )
    .unwrap();
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
    let approved = wait_at_review(&mut server, &id).await;
    assert_eq!(status(&approved), "complete", "{approved:#}");
    server.stop().await;
}

#[tokio::test]
async fn on_2026_07_28_the_form_is_an_input_required_answer_and_the_retry_decides() {
    // rmcp's client shows the form the `input_required` answer carries and calls again with
    // the person's answer and the echoed state, as a 2026-07-28 client does.
    for (reply, expected) in [
        (accept("approve", "reads well"), "complete"),
        (accept("kill", "wrong release"), "killed"),
    ] {
        let client = Recorder::asking(vec![reply]);
        let (_home, mut server, id) =
            at_gate_with("release", Protocol::Stateless, client, &[]).await;
        let answer = wait_at_review(&mut server, &id).await;
        assert_eq!(status(&answer), expected, "{answer:#}");
        let asked = server.received.asked();
        assert_eq!(asked.len(), 1, "{asked:#?}");
        assert!(
            asked[0]["message"].as_str().unwrap().contains(&format!(
                "Flow 'release' ({id}) waits at gate 'review' (sign_off), round 0."
            )),
            "{asked:#?}"
        );
        let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
        let gates = gate_records(&audit);
        assert_eq!(gates.len(), 1, "{audit:#}");
        assert_eq!(gates[0]["resolved_by"], "human");
        assert_eq!(gates[0]["via"], "elicitation");
        assert_eq!(gates[0]["client"], "stratum-test-client 1.2.3");
        server.stop().await;
    }
}

#[tokio::test]
async fn on_2026_07_28_revise_asks_again_for_the_next_round_and_decline_leaves_it_waiting() {
    let client = Recorder::asking(vec![
        accept("revise", "say what changed"),
        Reply::Answer(json!({"action": "decline"})),
        Reply::Answer(json!({"action": "cancel"})),
    ]);
    let (_home, mut server, id) = at_gate_with("release", Protocol::Stateless, client, &[]).await;
    let revised = wait_at_review(&mut server, &id).await;
    assert_eq!(status(&revised), "execute_step", "{revised:#}");
    assert_eq!(revised["step_id"], "write");
    server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "v1.2: gates, faster"}}),
        )
        .await;
    for reason in ["declined", "cancelled"] {
        let pending = wait_at_review(&mut server, &id).await;
        assert_eq!(status(&pending), "gate_pending", "{pending:#}");
        assert_eq!(pending["reason"], reason, "{pending:#}");
        assert!(
            pending["how_to_decide"]
                .as_str()
                .unwrap()
                .contains("gate approve")
        );
    }
    let asked = server.received.asked();
    assert!(
        asked[1]["message"].as_str().unwrap().contains("round 1"),
        "{asked:#?}"
    );
    server.stop().await;
}

/// A 2026-07-28 client whose forms the test answers by hand, the flow `flow` at its gate.
async fn by_hand(flow: &str) -> (tempfile::TempDir, McpServer, String) {
    at_gate_with(flow, Protocol::Stateless, Recorder::asking(Vec::new()), &[]).await
}

/// `stratum_gate_wait` on the `review` gate of flow `id`, bringing back `state` and the
/// client's `responses`.
async fn answer_form(
    server: &McpServer,
    id: &str,
    state: &str,
    responses: Value,
) -> rmcp::model::CallToolResponse {
    server
        .call_once(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
            Some(state),
            Some(responses),
        )
        .await
}

/// The first round of `stratum_gate_wait` on 2026-07-28, answered by hand: the state.
async fn form_state(server: &McpServer, id: &str) -> (String, Value) {
    let first = server
        .call_once(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review"}),
            None,
            None,
        )
        .await;
    let rmcp::model::CallToolResponse::InputRequired(form) = first else {
        panic!("not input_required: {first:?}");
    };
    let requests = serde_json::to_value(form.input_requests.as_ref().unwrap()).unwrap();
    assert_eq!(
        requests["gate_decision"]["method"], "elicitation/create",
        "{requests:#}"
    );
    (form.request_state.unwrap(), requests)
}

/// The flow's audit without what changes by itself (the time it has taken so far).
async fn recorded(server: &mut McpServer, id: &str) -> Value {
    let mut audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    audit.as_object_mut().unwrap().remove("total_duration_ms");
    audit
}

fn approval() -> Value {
    json!({"gate_decision": {"action": "accept",
        "content": {"decision": "approve", "rationale": "fine"}}})
}

/// The structured answer of a call that completed, and whether it was a refusal.
fn completed(response: rmcp::model::CallToolResponse) -> (Value, bool) {
    let rmcp::model::CallToolResponse::Complete(result) = response else {
        panic!("not complete: {response:?}");
    };
    (
        result.structured_content.unwrap(),
        result.is_error == Some(true),
    )
}

#[tokio::test]
async fn a_forged_altered_or_replayed_request_state_is_refused_and_changes_nothing() {
    let (_home, mut server, id) = by_hand("release").await;
    let (state, _) = form_state(&server, &id).await;
    let before = recorded(&mut server, &id).await;

    // Made up, altered (one character of the payload), or cut: refused, nothing recorded.
    let mut altered: Vec<char> = state.chars().collect();
    let middle = altered.len() / 2;
    altered[middle] = if altered[middle] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let cut = &state[..state.len() - 4];
    for forged in ["rs1.e30.AAAA", altered.as_str(), cut] {
        let (refused, is_error) = completed(answer_form(&server, &id, forged, approval()).await);
        assert!(is_error, "{refused:#}");
        assert_eq!(
            refused["error_type"], "invalid_request_state",
            "{refused:#}"
        );
    }
    let after = recorded(&mut server, &id).await;
    assert_eq!(before, after, "a refused state changed the flow");

    // The real one decides, once.
    let (decided, is_error) = completed(answer_form(&server, &id, &state, approval()).await);
    assert!(!is_error, "{decided:#}");
    assert_eq!(status(&decided), "complete", "{decided:#}");
    let decided_audit = recorded(&mut server, &id).await;
    let (replayed, is_error) = completed(answer_form(&server, &id, &state, approval()).await);
    assert!(is_error, "{replayed:#}");
    assert_eq!(replayed["error_type"], "not_at_gate", "{replayed:#}");
    let replayed_audit = recorded(&mut server, &id).await;
    assert_eq!(decided_audit, replayed_audit, "a replay changed the flow");
    assert_eq!(gate_records(&replayed_audit).len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_state_of_an_earlier_round_cannot_decide_the_gate_reached_again() {
    let (_home, mut server, id) = by_hand("release").await;
    let (round_0, _) = form_state(&server, &id).await;
    // Revised through another path meanwhile, the gate is reached again in round 1.
    server
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": id, "step_id": "review", "outcome": "revise",
                   "rationale": "again", "resolved_by": "human"}),
        )
        .await;
    server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "v1.2.1"}}),
        )
        .await;
    let before = server.call("stratum_audit", json!({"flow_id": id})).await;
    let (stale, _) = completed(answer_form(&server, &id, &round_0, approval()).await);
    assert_eq!(stale["error_type"], "stale_round", "{stale:#}");
    let after = server.call("stratum_audit", json!({"flow_id": id})).await;
    assert_eq!(gate_records(&before).len(), gate_records(&after).len());
    let resumed = server.call("stratum_resume", json!({"flow_id": id})).await;
    assert_eq!(status(&resumed), "await_gate", "{resumed:#}");
    server.stop().await;
}

#[tokio::test]
async fn a_state_from_another_server_process_does_not_open_here() {
    // Two stdio servers on one store: the state is bound to the connection that asked.
    let (home, first, id) = by_hand("release").await;
    let (state, _) = form_state(&first, &id).await;
    let second = McpServer::start_with_client(
        home.path(),
        home.path(),
        Protocol::Stateless,
        &[],
        Recorder::asking(Vec::new()),
    )
    .await;
    let (refused, is_error) = completed(answer_form(&second, &id, &state, approval()).await);
    assert!(is_error);
    assert_eq!(
        refused["error_type"], "invalid_request_state",
        "{refused:#}"
    );
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn on_2026_07_28_an_answer_after_the_gate_s_timeout_does_not_count() {
    let (_home, mut server, id) = by_hand("hurried").await;
    let (state, _) = form_state(&server, &id).await;
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let (late, is_error) = completed(answer_form(&server, &id, &state, approval()).await);
    assert!(!is_error, "{late:#}");
    assert_eq!(
        status(&late),
        "killed",
        "the timeout rule decided: {late:#}"
    );
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let gates = gate_records(&audit);
    assert_eq!(gates.len(), 1, "{audit:#}");
    assert_eq!(gates[0]["rationale"], "timeout", "{audit:#}");
    server.stop().await;
}

/// A server with the default config (the call that reaches a gate asks) whose client is
/// `client`, and a `release` flow planned; its id.
async fn planned(protocol: Protocol, client: Recorder) -> (tempfile::TempDir, McpServer, String) {
    let home = tempfile::tempdir().unwrap();
    let mut server =
        McpServer::start_with_client(home.path(), home.path(), protocol, &[], client).await;
    server
        .call(
            "stratum_plan",
            json!({"spec": SPEC, "flow": "release", "inputs": {}}),
        )
        .await;
    let id = server.flow(1);
    (home, server, id)
}

fn write_done(id: &str) -> Value {
    json!({"flow_id": id, "step_id": "write", "result": {"text": "v1.2: faster gates"}})
}

/// How many times the audit records the `write` step as done.
fn writes(audit: &Value) -> usize {
    audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|record| record["step_id"] == "write" && record["type"] == "step")
        .count()
}

#[tokio::test]
async fn the_step_that_reaches_the_gate_asks_the_person_and_answers_what_comes_next() {
    let client = Recorder::asking(vec![accept("approve", "ship it")]);
    let (_home, mut server, id) = planned(Protocol::Handshake, client).await;
    let answer = server.call("stratum_step_done", write_done(&id)).await;
    assert_eq!(status(&answer), "complete", "{answer:#}");
    assert_eq!(server.received.asked().len(), 1);
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let gates = gate_records(&audit);
    assert_eq!(gates[0]["via"], "elicitation", "{audit:#}");
    assert_eq!(gates[0]["rationale"], "ship it", "{audit:#}");
    server.stop().await;
}

#[tokio::test]
async fn declined_when_reached_the_call_answers_the_gate_and_resume_asks_again() {
    let client = Recorder::asking(vec![
        Reply::Answer(json!({"action": "decline"})),
        accept("approve", "now I have read it"),
    ]);
    let (_home, mut server, id) = planned(Protocol::Handshake, client).await;
    let reached = server.call("stratum_step_done", write_done(&id)).await;
    assert_eq!(status(&reached), "await_gate", "{reached:#}");
    assert!(reached["how_to_decide"].is_string(), "{reached:#}");
    let resumed = server.call("stratum_resume", json!({"flow_id": id})).await;
    assert_eq!(status(&resumed), "complete", "{resumed:#}");
    assert_eq!(server.received.asked().len(), 2);
    server.stop().await;
}

#[tokio::test]
async fn on_2026_07_28_the_step_that_reaches_the_gate_asks_and_its_retry_records_it_once() {
    let client = Recorder::asking(vec![accept("approve", "ship it")]);
    let (_home, mut server, id) = planned(Protocol::Stateless, client).await;
    let answer = server.call("stratum_step_done", write_done(&id)).await;
    assert_eq!(status(&answer), "complete", "{answer:#}");
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    assert_eq!(
        writes(&audit),
        1,
        "the retry did not run the step again: {audit:#}"
    );
    assert_eq!(gate_records(&audit)[0]["via"], "elicitation", "{audit:#}");
    server.stop().await;
}

#[tokio::test]
async fn on_2026_07_28_a_declined_or_forged_answer_to_the_reaching_call_decides_nothing() {
    let (_home, mut server, id) = planned(Protocol::Stateless, Recorder::asking(Vec::new())).await;
    let first = server
        .call_once("stratum_step_done", write_done(&id), None, None)
        .await;
    let rmcp::model::CallToolResponse::InputRequired(form) = first else {
        panic!("not input_required: {first:?}");
    };
    let state = form.request_state.unwrap();
    let (forged, is_error) = completed(
        server
            .call_once(
                "stratum_step_done",
                write_done(&id),
                Some(&state[..state.len() - 3]),
                Some(approval()),
            )
            .await,
    );
    assert!(is_error, "{forged:#}");
    assert_eq!(forged["error_type"], "invalid_request_state", "{forged:#}");
    let (declined, is_error) = completed(
        server
            .call_once(
                "stratum_step_done",
                write_done(&id),
                Some(&state),
                Some(json!({"gate_decision": {"action": "decline"}})),
            )
            .await,
    );
    assert!(!is_error, "{declined:#}");
    assert_eq!(status(&declined), "await_gate", "{declined:#}");
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    assert_eq!(writes(&audit), 1, "{audit:#}");
    assert!(gate_records(&audit).is_empty(), "{audit:#}");
    server.stop().await;
}

#[tokio::test]
async fn two_answers_for_one_round_at_once_resolve_the_gate_once() {
    // Two servers on one store, each with its client's form for round 0 open: their answers
    // (approve, kill) arrive together. One resolves the gate; the other finds it decided.
    let (home, mut first, id) = by_hand("release").await;
    let second = McpServer::start_with_client(
        home.path(),
        home.path(),
        Protocol::Stateless,
        &[],
        Recorder::asking(Vec::new()),
    )
    .await;
    let (state_1, _) = form_state(&first, &id).await;
    let (state_2, _) = form_state(&second, &id).await;
    let kill = json!({"gate_decision": {"action": "accept",
        "content": {"decision": "kill", "rationale": "stop"}}});
    let (one, two) = tokio::join!(
        answer_form(&first, &id, &state_1, approval()),
        answer_form(&second, &id, &state_2, kill),
    );
    let answers = [completed(one).0, completed(two).0];
    let won: Vec<&Value> = answers
        .iter()
        .filter(|answer| ["complete", "killed"].contains(&answer["status"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(won.len(), 1, "exactly one decision wins: {answers:#?}");
    let audit = first.call("stratum_audit", json!({"flow_id": id})).await;
    assert_eq!(
        gate_records(&audit).len(),
        1,
        "one resolution recorded: {audit:#}"
    );
    assert_eq!(audit["status"], won[0]["status"], "{audit:#}");
    first.stop().await;
    second.stop().await;
}

/// A config file with `text`, for `STRATUM_CONFIG`; as in [`at_gate_with`], only
/// `stratum_gate_wait` asks (`ask_when_reached = false`).
fn config(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let text = match text.strip_prefix("[gates]\n") {
        Some(rest) => format!("[gates]\nask_when_reached = false\n{rest}"),
        None => format!("[gates]\nask_when_reached = false\n{text}"),
    };
    std::fs::write(file.path(), text).unwrap();
    file
}

#[tokio::test]
async fn under_approval_rules_a_form_on_stdio_is_the_os_user_s_decision() {
    let me = os_user();
    let two = config("[gates.functions.sign_off]\nmin_approvals = 2\n");
    let path = two.path().display().to_string();
    let (_home, mut server, id) = at_gate(
        "release",
        vec![accept("approve", "reads well"), accept("approve", "still")],
        &[("STRATUM_CONFIG", &path)],
    )
    .await;
    // The agent's own call has no identity the server vouches for.
    let agent = server
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": id, "step_id": "review", "outcome": "approve",
                   "rationale": "lgtm", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(agent["error_type"], "identity_required", "{agent:#}");
    // The person who started the client answers: one approval of the two needed.
    let first = wait_at_review(&mut server, &id).await;
    assert_eq!(status(&first), "approval_recorded", "{first:#}");
    assert_eq!(
        (
            &first["identity"],
            &first["approvals"],
            &first["approvals_needed"]
        ),
        (&json!(me), &json!(1), &json!(1))
    );
    let again = wait_at_review(&mut server, &id).await;
    assert_eq!(
        (&again["counted"], &again["approvals"]),
        (&json!(false), &json!(1))
    );
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    assert_eq!(audit["started_by"], json!(me), "{audit:#}");
    let approval = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "approval")
        .unwrap_or_else(|| panic!("no approval record: {audit:#}"))
        .clone();
    assert_eq!(
        (&approval["identity"], &approval["via"], &approval["client"]),
        (
            &json!(me),
            &json!("elicitation"),
            &json!("stratum-test-client 1.2.3")
        )
    );
    server.stop().await;

    // The user started the flow through this server, so without self-approval their form may
    // send the work back but not approve it.
    let own = config("[gates.functions.sign_off]\nself_approval = false\n");
    let path = own.path().display().to_string();
    let (_home, mut server, id) = at_gate(
        "release",
        vec![
            accept("approve", "mine"),
            accept("revise", "one more thing"),
        ],
        &[("STRATUM_CONFIG", &path)],
    )
    .await;
    let refused = wait_at_review(&mut server, &id).await;
    assert_eq!(refused["error_type"], "self_approval", "{refused:#}");
    let revised = wait_at_review(&mut server, &id).await;
    assert_eq!(status(&revised), "execute_step", "{revised:#}");
    server.stop().await;
}

const TYPED: &str = r#"version: "0.2"
contracts:
  Draft:
    text: {type: string}
  Release:
    version: {type: string, description: "The version to publish"}
    channel: {type: string, values: [stable, beta]}
    notes: {type: array, items: string}
  Published:
    url: {type: string}
functions:
  write:
    mode: infer
    intent: "Write the release note"
    input: {}
    output: Draft
  sign_off:
    mode: gate
  publish:
    mode: infer
    intent: "Publish"
    input:
      version: {type: string}
    output: Published
flows:
  release:
    input: {}
    steps:
      - id: write
        function: write
        inputs: {}
      - id: review
        function: sign_off
        on_approve: publish
        on_revise: write
        on_kill: ~
        depends_on: [write]
      - id: publish
        function: publish
        inputs:
          version: "$.steps.review.output.value.version"
        depends_on: [review]
"#;

/// The typed spec, its gate function declaring `output: Release`.
fn typed_spec() -> String {
    TYPED.replace("    mode: gate\n", "    mode: gate\n    output: Release\n")
}

#[tokio::test]
async fn a_typed_gate_s_form_asks_for_its_fields_and_the_value_reaches_the_next_step() {
    let home = tempfile::tempdir().unwrap();
    let person = Recorder::asking(vec![Reply::Answer(json!({
        "action": "accept",
        "content": {"decision": "approve", "rationale": "ready",
                    "version": "1.2.0", "channel": "stable", "notes": "[\"faster gates\"]"}
    }))]);
    let mut server =
        McpServer::start_with_client(home.path(), home.path(), Protocol::Handshake, &[], person)
            .await;
    server
        .call(
            "stratum_plan",
            json!({"spec": typed_spec(), "flow": "release", "inputs": {}}),
        )
        .await;
    let id = server.flow(1);
    let next = server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "notes"}}),
        )
        .await;
    assert_eq!(status(&next), "execute_step", "{next:#}");
    assert_eq!(next["step_id"], "publish");
    assert_eq!(next["inputs"]["version"], "1.2.0", "{next:#}");
    let asked = server.received.asked();
    let fields = &asked[0]["requestedSchema"]["properties"];
    assert_eq!(
        fields["channel"]["enum"],
        json!(["stable", "beta"]),
        "{fields:#}"
    );
    assert_eq!(fields["version"]["type"], "string", "{fields:#}");
    assert_eq!(
        fields["notes"]["type"], "string",
        "a list is asked as JSON: {fields:#}"
    );
    let audit = server.call("stratum_audit", json!({"flow_id": id})).await;
    let gates = gate_records(&audit);
    assert_eq!(
        gates[0]["value"],
        json!({"version": "1.2.0", "channel": "stable", "notes": ["faster gates"]})
    );
    server.stop().await;
}

#[tokio::test]
async fn an_agent_approves_a_typed_gate_only_with_a_value_of_its_contract() {
    let home = tempfile::tempdir().unwrap();
    let mut server = McpServer::start(home.path(), home.path(), Protocol::Handshake).await;
    server
        .call(
            "stratum_plan",
            json!({"spec": typed_spec(), "flow": "release", "inputs": {}}),
        )
        .await;
    let id = server.flow(1);
    server
        .call(
            "stratum_step_done",
            json!({"flow_id": id, "step_id": "write", "result": {"text": "notes"}}),
        )
        .await;
    let decide = |value: Value| {
        let mut arguments = json!({"flow_id": id, "step_id": "review", "outcome": "approve",
                                   "rationale": "ok", "resolved_by": "agent"});
        if !value.is_null() {
            arguments["value"] = value;
        }
        arguments
    };
    let missing = server
        .call("stratum_gate_resolve", decide(Value::Null))
        .await;
    assert_eq!(
        missing["error_type"], "decision_value_required",
        "{missing:#}"
    );
    let wrong = server
        .call(
            "stratum_gate_resolve",
            decide(json!({"version": 12, "channel": "stable", "notes": []})),
        )
        .await;
    assert_eq!(wrong["error_type"], "decision_value_invalid", "{wrong:#}");
    let approved = server
        .call(
            "stratum_gate_resolve",
            decide(json!({"version": "1.2.0", "channel": "beta", "notes": []})),
        )
        .await;
    assert_eq!(approved["inputs"]["version"], "1.2.0", "{approved:#}");
    server.stop().await;
}

#[tokio::test]
async fn while_a_form_is_open_the_call_sends_a_heartbeat_every_five_seconds() {
    let (_home, mut server, id) = at_gate("release", vec![Reply::Never], &[]).await;
    let started = std::time::Instant::now();
    let pending = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": id, "step_id": "review", "wait_seconds": 12}),
        )
        .await;
    assert_eq!(pending["reason"], "no_answer", "{pending:#}");
    let waited = started.elapsed().as_secs_f64();
    let beats = server.received.progress();
    // Two heartbeats in 12 s (at 5 and 10 s), each saying what the call waits for, each
    // notification larger than the one before (the protocol's rule).
    assert_eq!(beats.len(), 2, "{beats:#?} in {waited} s");
    assert!(
        beats
            .windows(2)
            .all(|pair| pair[1].progress > pair[0].progress)
    );
    for beat in &beats {
        let message = beat.message.as_deref().unwrap_or_default();
        assert!(
            message.contains("for a person to decide gate 'review'"),
            "{message}"
        );
    }
    server.stop().await;
}
