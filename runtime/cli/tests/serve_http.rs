//! `stratum-mcp serve` as agents, browsers and attackers meet it: the real binary on a free
//! port of 127.0.0.1, driven by rmcp's Streamable HTTP client (both protocols, every answer
//! checked against its tool's output schema, as on stdio) and by plain HTTP requests.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

#[path = "serve/connections.rs"]
mod connections;
mod mcp;
#[path = "serve/protocol.rs"]
mod protocol;
mod serve;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command as Process;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp::{
    BOTH, McpServer, Protocol, Recorder, Reply, error_type, example, flow_at_gate, os_user,
    run_every_example, start_reviewed_work, status,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use serve::{Serve, State, binary, csrf_of, http, sign_in};
use stratum_serve::{Access, App, ServeOptions};
use stratum_test_support::linear;

/// The routes the server registers, from its own router.
fn registered_routes() -> Vec<stratum_serve::RouteInfo> {
    let app = App::new(
        Arc::new(stratum_runtime::MemoryStore::new()),
        Default::default(),
        ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            allowed_hosts: vec![],
            secure_cookies: false,
            connections: Default::default(),
            metrics_listen: None,
        },
    );
    stratum_serve::router(app).1
}

fn concrete(path: &str) -> String {
    // A path parameter (`{id}`) is given a value.
    path.split('/')
        .map(|part| if part.starts_with('{') { "x" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_route_refuses_a_request_without_a_valid_token() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let client = http();
    let routes = registered_routes();
    let public: Vec<(&str, &str)> = routes
        .iter()
        .filter(|route| route.access == Access::Public)
        .map(|route| (route.method, route.path))
        .collect();
    assert_eq!(
        public,
        [
            ("GET", "/signin"),
            ("POST", "/signin"),
            ("GET", "/assets/{name}")
        ]
    );
    assert!(routes.iter().any(|route| route.path == "/mcp"));
    // The secret with its last digit changed (to one it is not).
    let last = if secret.ends_with('0') { '1' } else { '0' };
    let wrong = format!("{}{last}", &secret[..secret.len() - 1]);
    let headers: [Option<String>; 4] = [
        None,
        Some(format!("Bearer {wrong}")),
        Some("Basic YWxpY2U6c2VjcmV0".to_owned()),
        Some("Bearer".to_owned()),
    ];
    let mut asked = 0;
    for route in routes.iter().filter(|route| route.access != Access::Public) {
        for header in &headers {
            let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap();
            let mut request = client
                .request(method, serve.url(&concrete(route.path)))
                .header("content-type", "application/json")
                .body("{}");
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let answer = request.send().await.unwrap();
            assert_eq!(
                answer.status(),
                StatusCode::UNAUTHORIZED,
                "{} {} with {header:?}",
                route.method,
                route.path
            );
            assert!(answer.headers().contains_key("www-authenticate"));
            asked += 1;
        }
    }
    assert!(asked >= 20, "{asked}");
    // A path no route serves says nothing either, without a token.
    let answer = client.get(serve.url("/no/such/page")).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let answer = client
        .get(serve.url("/no/such/page"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn agents_drive_every_example_over_http_with_the_stdio_answers() {
    let state = State::new();
    let secret = state.token("ci-agent", false);
    let serve = Serve::start(&state, &[]);
    let work = tempfile::tempdir().unwrap();
    let stdio = McpServer::start(state.dir.path(), work.path(), Protocol::Handshake).await;
    for protocol in BOTH {
        let mut server =
            McpServer::start_http(&serve.url("/mcp"), &secret, protocol, state.dir.path()).await;
        assert_eq!(
            serde_json::to_value(&server.tools).unwrap(),
            serde_json::to_value(&stdio.tools).unwrap(),
            "the same tools, descriptions, annotations and schemas as on stdio"
        );
        run_every_example(&mut server).await;
        // A refusal has the stdio shape too.
        let refused = server.refused("stratum_audit", json!({"flow_id": 7})).await;
        assert_eq!(refused["error_type"], "invalid_argument");
        server.stop().await;
    }
    stdio.stop().await;
}

#[tokio::test]
async fn a_gate_resolved_over_http_records_the_token_not_the_claim() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let mut server = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let flow = flow_at_gate(&mut server).await;
    let approved = server
        .call(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "approve",
                   "rationale": "fine", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(status(&approved), "complete");
    let audit = server.call("stratum_audit", json!({"flow_id": flow})).await;
    let gate = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap()
        .clone();
    assert_eq!(
        (&gate["resolved_by"], &gate["actor"]),
        (&json!("human"), &json!("alice")),
        "the claim is kept, and beside it who the server knows resolved: {gate:#}"
    );
    // The operator's view shows it too, in its published schema.
    let (code, state_json) = state.cli(&["query", "flow", &flow, "--json"]);
    assert_eq!(code, 0);
    let record = state_json["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap();
    assert_eq!(record["actor"], "alice");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/query-flow.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(jsonschema::is_valid(&schema, &state_json));
    server.stop().await;
}

/// Every record of `type` in an audit's trace and earlier rounds.
fn records_of(audit: &Value, kind: &str) -> Vec<Value> {
    let earlier = audit["rounds"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|round| round["steps"].as_array().into_iter().flatten());
    earlier
        .chain(audit["trace"].as_array().into_iter().flatten())
        .filter(|record| record["type"] == kind)
        .cloned()
        .collect()
}

/// The approval rules of `review_gate` (two approvals, no self-approval) over HTTP: each
/// access token's name is an identity, the token that started a flow may not approve it, two
/// distinct tokens must; and the operator CLI's user counts as one more identity beside them.
#[tokio::test]
async fn over_http_each_token_is_an_identity_the_approval_rules_count() {
    let state = State::new();
    let alice = state.token("alice", false);
    let bob = state.token("bob", false);
    let carol = state.token("carol", false);
    let config = state.dir.path().join("rules.toml");
    std::fs::write(
        &config,
        "[gates.functions.review_gate]\nmin_approvals = 2\nself_approval = false\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let serve = Serve::start(&state, &["--config", config]);
    let as_token = |secret: String| {
        let url = serve.url("/mcp");
        let home = state.dir.path().to_owned();
        async move { McpServer::start_http(&url, &secret, Protocol::Handshake, &home).await }
    };
    let (mut a, mut b, mut c) = (
        as_token(alice).await,
        as_token(bob).await,
        as_token(carol).await,
    );
    let decide = |flow: &str, outcome: &str, why: &str| {
        json!({"flow_id": flow, "step_id": "review", "outcome": outcome,
               "rationale": why, "resolved_by": "human"})
    };

    let flow = flow_at_gate(&mut a).await;
    let own = a
        .call("stratum_gate_resolve", decide(&flow, "approve", "mine"))
        .await;
    assert_eq!(error_type(&own), "self_approval", "{own:#}");
    let first = b
        .call("stratum_gate_resolve", decide(&flow, "approve", "good"))
        .await;
    assert_eq!(status(&first), "approval_recorded", "{first:#}");
    assert_eq!(
        (
            &first["identity"],
            &first["approvals"],
            &first["approvals_needed"]
        ),
        (&json!("bob"), &json!(1), &json!(1))
    );
    let twice = b
        .call("stratum_gate_resolve", decide(&flow, "approve", "really"))
        .await;
    assert_eq!(
        (&twice["counted"], &twice["approvals"]),
        (&json!(false), &json!(1))
    );
    let still = a.call("stratum_resume", json!({"flow_id": flow})).await;
    assert_eq!(status(&still), "await_gate", "{still:#}");
    let done = c
        .call("stratum_gate_resolve", decide(&flow, "approve", "agreed"))
        .await;
    assert_eq!(status(&done), "complete", "{done:#}");

    let audit = a.call("stratum_audit", json!({"flow_id": flow})).await;
    assert_eq!(audit["started_by"], "alice", "{audit:#}");
    let approvals = records_of(&audit, "approval");
    assert_eq!(approvals.len(), 1, "{audit:#}");
    assert_eq!(approvals[0]["identity"], "bob");
    let gates = records_of(&audit, "gate");
    assert_eq!(gates.len(), 1, "the refusal left no record: {audit:#}");
    assert_eq!(
        (&gates[0]["actor"], &gates[0]["approvers"]),
        (&json!("carol"), &json!(["bob", "carol"]))
    );
    // The operator's view of the flow says who started it, in its published schema.
    let (code, shown) = state.cli(&["--config", config, "query", "flow", &flow, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(shown["started_by"], "alice");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/query-flow.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(jsonschema::is_valid(&schema, &shown), "{shown:#}");

    // The terminal's user is one identity, a token another.
    let second = flow_at_gate(&mut a).await;
    let (code, recorded) = state.cli(&[
        "--config", config, "gate", "approve", &second, "review", "--json",
    ]);
    assert_eq!(code, 0, "{recorded:#}");
    assert_eq!(
        (&recorded["result"], &recorded["actor"]),
        (&json!("approval_recorded"), &json!(os_user()))
    );
    let resolved = b
        .call("stratum_gate_resolve", decide(&second, "approve", "yes"))
        .await;
    assert_eq!(status(&resolved), "complete", "{resolved:#}");
    let audit = a.call("stratum_audit", json!({"flow_id": second})).await;
    assert_eq!(
        records_of(&audit, "gate")[0]["approvers"],
        json!([os_user(), "bob"])
    );
    for client in [a, b, c] {
        client.stop().await;
    }
}

#[tokio::test]
async fn over_http_on_2026_07_28_the_person_decides_in_the_form_and_the_token_is_recorded() {
    let state = State::new();
    let alice = state.token("alice", false);
    let bob = state.token("bob", false);
    let serve = Serve::start(&state, &[]);
    let person = Recorder::asking(vec![Reply::Answer(json!({
        "action": "accept",
        "content": {"decision": "approve", "rationale": "checked the numbers"}
    }))]);
    let mut server = McpServer::start_http_with_client(
        &serve.url("/mcp"),
        &alice,
        Protocol::Stateless,
        state.dir.path(),
        person,
    )
    .await;
    // The step that reaches the gate asks (input_required), answered here by hand.
    let flow = start_reviewed_work(&mut server).await;
    let first = server
        .call_once(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r1", "quality_score": 0.9}}),
            None,
            None,
        )
        .await;
    let rmcp::model::CallToolResponse::InputRequired(form) = first else {
        panic!("not input_required: {first:?}");
    };
    let sealed = form.request_state.unwrap();
    // A state issued to alice does not open for bob, on the same store and server.
    let other = McpServer::start_http_with_client(
        &serve.url("/mcp"),
        &bob,
        Protocol::Stateless,
        state.dir.path(),
        Recorder::asking(Vec::new()),
    )
    .await;
    let stolen = other
        .call_once(
            "stratum_gate_wait",
            json!({"flow_id": flow, "step_id": "review"}),
            Some(&sealed),
            Some(json!({"gate_decision": {"action": "accept",
                "content": {"decision": "approve", "rationale": "mine now"}}})),
        )
        .await;
    let rmcp::model::CallToolResponse::Complete(stolen) = stolen else {
        panic!("not complete: {stolen:?}");
    };
    assert_eq!(stolen.is_error, Some(true));
    assert_eq!(
        stolen.structured_content.unwrap()["error_type"],
        "invalid_request_state"
    );

    // rmcp's client shows gate_wait's form and calls again with the person's answer.
    let decided = server
        .call(
            "stratum_gate_wait",
            json!({"flow_id": flow, "step_id": "review"}),
        )
        .await;
    assert_eq!(status(&decided), "complete", "{decided:#}");
    let audit = server.call("stratum_audit", json!({"flow_id": flow})).await;
    let gate = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap()
        .clone();
    assert_eq!(gate["actor"], "alice", "{gate:#}");
    assert_eq!(gate["via"], "elicitation", "{gate:#}");
    assert_eq!(gate["resolved_by"], "human", "{gate:#}");
    assert_eq!(gate["rationale"], "checked the numbers", "{gate:#}");
    assert_eq!(gate["client"], "stratum-test-client 1.2.3", "{gate:#}");
    other.stop().await;
    server.stop().await;

    // A 2025-11-25 client over stateless HTTP cannot be asked during the call.
    let mut older = McpServer::start_http_with_client(
        &serve.url("/mcp"),
        &alice,
        Protocol::Handshake,
        state.dir.path(),
        Recorder::asking(Vec::new()),
    )
    .await;
    let flow = flow_at_gate(&mut older).await;
    let pending = older
        .call(
            "stratum_gate_wait",
            json!({"flow_id": flow, "step_id": "review"}),
        )
        .await;
    assert_eq!(pending["reason"], "not_asked", "{pending:#}");
    older.stop().await;
}

#[tokio::test]
async fn a_read_only_token_can_look_but_not_change() {
    let state = State::new();
    let writer = state.token("agent", false);
    let reader = state.token("dashboard", true);
    let serve = Serve::start(&state, &[]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &writer,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let flow = flow_at_gate(&mut agent).await;
    let mut viewer = McpServer::start_http(
        &serve.url("/mcp"),
        &reader,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;
    assert_eq!(viewer.tools.len(), agent.tools.len(), "the same list");
    let audit = viewer.call("stratum_audit", json!({"flow_id": flow})).await;
    assert_eq!(status(&audit), "in_progress");
    let valid = viewer
        .call(
            "stratum_validate",
            json!({"spec": example("sentiment.stratum.yaml")}),
        )
        .await;
    assert_eq!(valid["valid"], true);
    let refused = viewer
        .refused(
            "stratum_gate_resolve",
            json!({"flow_id": flow, "step_id": "review", "outcome": "approve",
                   "rationale": "", "resolved_by": "human"}),
        )
        .await;
    assert_eq!(refused["error_type"], "forbidden", "{refused:#}");
    assert!(refused["message"].as_str().unwrap().contains("dashboard"));
    for (tool, arguments) in [
        (
            "stratum_plan",
            json!({"spec": example("sentiment.stratum.yaml"), "flow": "run", "inputs": {"text": "t"}}),
        ),
        ("stratum_resume", json!({"flow_id": flow})),
        ("stratum_commit", json!({"flow_id": flow, "label": "x"})),
    ] {
        let refused = viewer.refused(tool, arguments).await;
        assert_eq!(refused["error_type"], "forbidden", "{tool}");
    }
    let (_, flows) = state.cli(&["query", "flows", "--json"]);
    assert_eq!(flows.as_array().unwrap().len(), 1, "no flow was started");
    let (_, gates) = state.cli(&["query", "gates", "--json"]);
    assert_eq!(gates[0]["flow_id"], json!(flow), "the gate still waits");
    agent.stop().await;
    viewer.stop().await;
}

/// Over HTTP a path argument names a directory under the server's root (the directory it runs
/// in), never another of the machine's: a token must not become a way to read the server's
/// files, or to write a draft anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authoring_tools_over_http_reach_only_under_the_servers_root() {
    let state = State::new();
    let secret = state.token("agent", false);
    let workflows = state.dir.path().join("workflows");
    std::fs::create_dir(&workflows).unwrap();
    std::fs::write(
        workflows.join("deploy.stratum.yaml"),
        example("deploy.stratum.yaml"),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.stratum.yaml"),
        example("deploy.stratum.yaml"),
    )
    .unwrap();
    let serve = Serve::start(&state, &[]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;

    let listed = agent
        .call(
            "stratum_list_workflows",
            json!({"workflows_dir": "workflows"}),
        )
        .await;
    assert_eq!(
        listed["workflows"].as_array().unwrap().len(),
        1,
        "{listed:#}"
    );
    let outside_dir = outside.path().display().to_string();
    for (tool, arguments, argument) in [
        (
            "stratum_list_workflows",
            json!({"workflows_dir": outside_dir}),
            "workflows_dir",
        ),
        (
            "stratum_list_workflows",
            json!({"workflows_dir": "workflows/../.."}),
            "workflows_dir",
        ),
        (
            "stratum_compile_speckit",
            json!({"tasks_dir": "/etc", "flow_name": "tasks"}),
            "tasks_dir",
        ),
        (
            "stratum_draft_pipeline",
            json!({"project_dir": outside_dir, "draft": {"name": "x", "phases": []}}),
            "project_dir",
        ),
    ] {
        let refused = agent.refused(tool, arguments).await;
        assert_eq!(
            refused["error_type"], "invalid_argument",
            "{tool}: {refused:#}"
        );
        assert_eq!(refused["argument"], argument, "{tool}: {refused:#}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("outside the server's root"),
            "{tool}: {refused:#}"
        );
    }
    assert!(
        !outside.path().join(".stratum").exists(),
        "no draft was written outside the root"
    );

    let saved = agent
        .call(
            "stratum_draft_pipeline",
            json!({"project_dir": "fresh/project", "draft": {"name": "x"}}),
        )
        .await;
    assert_eq!(saved["status"], "saved", "{saved:#}");
    assert!(
        state
            .dir
            .path()
            .join("fresh/project/.stratum/pipeline-draft.json")
            .is_file(),
        "a project directory that does not exist yet is created under the root: {saved:#}"
    );
    let linked = state.dir.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(outside.path(), linked.join(".stratum")).unwrap();
    let refused = agent
        .call(
            "stratum_draft_pipeline",
            json!({"project_dir": "linked", "draft": {"name": "x"}}),
        )
        .await;
    assert_eq!(refused["error_type"], "write_failed", "{refused:#}");
    assert!(
        !outside.path().join("pipeline-draft.json").exists(),
        "no draft was written through a `.stratum` linked out of the root"
    );
    agent.stop().await;
}

/// Every file the authoring tools open for an HTTP caller resolves under the server's root,
/// for a read-only token and a writer alike: a symbolic link inside an allowed directory that
/// leads out of the root (`tasks/passwd.md -> /etc/passwd`, `tasks/env.md ->
/// /proc/self/environ`, a spec linked in from elsewhere) is refused, never read, and its
/// resolved path is not shown; a draft file linked out is replaced, its target untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_linked_out_of_the_root_are_neither_read_nor_written_over_http() {
    use std::os::unix::fs::symlink;

    let state = State::new();
    let writer = state.token("agent", false);
    let reader = state.token("dashboard", true);
    let root = state.dir.path();
    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().canonicalize().unwrap().display().to_string();
    let secret = "root:x:0:0:SECRET-OUTSIDE-THE-ROOT:/root:/bin/sh\n";
    std::fs::write(outside.path().join("passwd"), secret).unwrap();
    std::fs::write(
        outside.path().join("elsewhere.stratum.yaml"),
        example("deploy.stratum.yaml").replace("name: deploy", "name: elsewhere"),
    )
    .unwrap();
    std::fs::write(outside.path().join("draft.json"), "untouched").unwrap();

    let task = "# Task: Write the notes\n\nWrite them.\n";
    for dir in [
        "passwd_tasks",
        "env_tasks",
        "own_tasks",
        "sources",
        "workflows",
        "p/.stratum",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("passwd_tasks/01_notes.md"), task).unwrap();
    symlink(
        outside.path().join("passwd"),
        root.join("passwd_tasks/passwd.md"),
    )
    .unwrap();
    std::fs::write(root.join("env_tasks/01_notes.md"), task).unwrap();
    symlink("/proc/self/environ", root.join("env_tasks/env.md")).unwrap();
    // A link that stays under the root is followed, as before.
    std::fs::write(root.join("sources/notes.md"), task).unwrap();
    symlink(
        root.join("sources/notes.md"),
        root.join("own_tasks/notes.md"),
    )
    .unwrap();
    std::fs::write(
        root.join("workflows/deploy.stratum.yaml"),
        example("deploy.stratum.yaml"),
    )
    .unwrap();
    symlink(
        outside.path().join("elsewhere.stratum.yaml"),
        root.join("workflows/elsewhere.stratum.yaml"),
    )
    .unwrap();
    symlink(
        outside.path().join("draft.json"),
        root.join("p/.stratum/pipeline-draft.json"),
    )
    .unwrap();

    let serve = Serve::start(&state, &[]);
    for (who, secret_of) in [("writer", &writer), ("reader", &reader)] {
        let mut agent =
            McpServer::start_http(&serve.url("/mcp"), secret_of, Protocol::Stateless, root).await;
        for (tasks_dir, leaked) in [
            ("passwd_tasks", "SECRET-OUTSIDE-THE-ROOT"),
            ("env_tasks", "STRATUM_LOG="),
        ] {
            let answer = agent
                .call(
                    "stratum_compile_speckit",
                    json!({"tasks_dir": tasks_dir, "flow_name": "tasks"}),
                )
                .await;
            assert_eq!(answer["status"], "error", "{who} {tasks_dir}: {answer:#}");
            assert_eq!(answer["error_type"], "compile_error", "{who}: {answer:#}");
            let message = answer["message"].as_str().unwrap();
            assert!(
                message.contains("outside the server's root"),
                "{who} {tasks_dir}: {answer:#}"
            );
            assert!(!answer.to_string().contains(leaked), "{who}: {answer:#}");
        }
        let own = agent
            .call(
                "stratum_compile_speckit",
                json!({"tasks_dir": "own_tasks", "flow_name": "tasks"}),
            )
            .await;
        assert_eq!(own["status"], "ok", "{who}: {own:#}");

        let listed = agent
            .call(
                "stratum_list_workflows",
                json!({"workflows_dir": "workflows"}),
            )
            .await;
        let names: Vec<&str> = listed["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|workflow| workflow["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["deploy"], "{who}: {listed:#}");
        assert_eq!(
            listed["problems"].as_array().unwrap().len(),
            1,
            "{listed:#}"
        );
        let problem = &listed["problems"][0];
        assert!(
            problem["message"]
                .as_str()
                .unwrap()
                .contains("outside the server's root"),
            "{who}: {listed:#}"
        );
        assert!(
            problem["path"]
                .as_str()
                .unwrap()
                .ends_with("workflows/elsewhere.stratum.yaml"),
            "{who}: {listed:#}"
        );
        assert!(
            !listed.to_string().contains(&outside_dir),
            "{who}: no path outside the root is shown: {listed:#}"
        );
        agent.stop().await;
    }

    // A read-only token saves no draft at all; a writer's replaces the link in the root by
    // the draft file, and the file the link pointed to is not written.
    let mut viewer =
        McpServer::start_http(&serve.url("/mcp"), &reader, Protocol::Stateless, root).await;
    let refused = viewer
        .refused(
            "stratum_draft_pipeline",
            json!({"project_dir": "p", "draft": {"name": "x"}}),
        )
        .await;
    assert_eq!(refused["error_type"], "forbidden", "{refused:#}");
    viewer.stop().await;
    let mut agent =
        McpServer::start_http(&serve.url("/mcp"), &writer, Protocol::Stateless, root).await;
    let saved = agent
        .call(
            "stratum_draft_pipeline",
            json!({"project_dir": "p", "draft": {"name": "x"}}),
        )
        .await;
    assert_eq!(saved["status"], "saved", "{saved:#}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("draft.json")).unwrap(),
        "untouched"
    );
    let draft = root.join("p/.stratum/pipeline-draft.json");
    assert!(
        std::fs::symlink_metadata(&draft).unwrap().is_file(),
        "the draft file in the root is a file of its own now"
    );
    agent.stop().await;
}

#[tokio::test]
async fn a_browser_signs_in_and_its_posts_need_the_csrf_token() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let client = http();

    let form = client.get(serve.url("/signin")).send().await.unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    assert!(form.text().await.unwrap().contains("name=\"token\""));
    let wrong = client
        .post(serve.url("/signin"))
        .form(&[("token", "stratum_nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);

    let cookie = sign_in(&serve, &secret).await;
    let home = client
        .get(serve.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    let page = home.text().await.unwrap();
    assert!(page.contains("<span>alice</span>"), "{page}");
    let csrf = csrf_of(&page);

    // A post without the session's CSRF token, or with another, is refused.
    for form in [vec![], vec![("csrf", "0".repeat(64))]] {
        let refused = client
            .post(serve.url("/signout"))
            .header("cookie", &cookie)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{form:?}");
    }
    let refused = client
        .post(serve.url("/mcp"))
        .header("cookie", &cookie)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN, "MCP with a cookie");

    let out = client
        .post(serve.url("/signout"))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let after = client
        .get(serve.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        after.status(),
        StatusCode::UNAUTHORIZED,
        "the session ended"
    );
}

/// An action route of the console (a state-changing form) served in-process on `store`,
/// through the same `Routes` the server's table uses: what a read-only token and a missing
/// CSRF token meet.
#[tokio::test]
async fn a_read_only_token_cannot_post_a_form_that_changes_state() {
    use axum::extract::State as Axum;
    use stratum_serve::{Identity, pages};

    let store: Arc<dyn stratum_runtime::Store> = Arc::new(stratum_runtime::MemoryStore::new());
    let (writer, reader) = ("stratum_writer", "stratum_reader");
    for (name, secret, read_only) in [("w", writer, false), ("r", reader, true)] {
        store
            .add_token(&stratum_runtime::store::Token {
                name: name.to_owned(),
                hash: stratum_mcp::cli::token::hash(secret),
                read_only,
                created_ms: 0,
                last_used_ms: None,
            })
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let store_for_gate = store.clone();
    let app = App::new(
        store,
        Default::default(),
        ServeOptions {
            listen: address,
            allowed_hosts: vec![],
            secure_cookies: false,
            connections: Default::default(),
            metrics_listen: None,
        },
    );
    /// What a console's gate form does: the CLI's resolution, as the signed-in token.
    async fn approve(
        Axum(app): Axum<App>,
        identity: Identity,
        axum::extract::Path(flow): axum::extract::Path<String>,
    ) -> String {
        use stratum_mcp::cli::gate::{Decision, ResolvedBy, resolve_as};
        let runtime = app.runtime();
        let answer = tokio::task::spawn_blocking(move || {
            resolve_as(
                &runtime,
                &flow,
                "review",
                Decision::Approve,
                "from the console",
                ResolvedBy::Human,
                Some(&identity.name),
                None,
            )
        })
        .await
        .unwrap()
        .unwrap();
        answer.to_json().to_string()
    }
    async fn act(_: Axum<App>, identity: Identity) -> String {
        format!("acted as {}", identity.name)
    }
    async fn page(identity: Identity) -> axum::response::Response {
        pages::layout(
            axum::http::StatusCode::OK,
            "t",
            &pages::form(&identity, "/act", "<button>go</button>"),
        )
    }
    let routes = stratum_serve::routes::table(&app)
        .page("/page", page)
        .action("/act", act)
        .action("/approve/{flow}", approve);
    assert!(
        routes
            .list()
            .iter()
            .any(|route| route.path == "/act" && route.access == Access::Write)
    );
    let router = routes.into_router(app);
    tokio::spawn(async move { axum::serve(listener, router).await });
    let url = |path: &str| format!("http://{address}{path}");
    let client = http();

    let post = |secret: &'static str| {
        client
            .post(url("/act"))
            .bearer_auth(secret)
            .form(&[("x", "1")])
            .send()
    };
    let done = post(writer).await.unwrap();
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(done.text().await.unwrap(), "acted as w");
    let refused = post(reader).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("read-only"));

    // A browser: the form carries the CSRF token; without it the post is refused.
    let signed = client
        .post(url("/signin"))
        .form(&[("token", writer)])
        .send()
        .await
        .unwrap();
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let page = client
        .get(url("/page"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = csrf_of(&page);
    let without = client
        .post(url("/act"))
        .header("cookie", &cookie)
        .form(&[("x", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), StatusCode::FORBIDDEN);
    let with = client
        .post(url("/act"))
        .header("cookie", &cookie)
        .form(&[("x", "1"), ("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), StatusCode::OK);
    let header = client
        .post(url("/act"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(header.status(), StatusCode::OK);

    // A gate resolved through an action records the token, and a second try is a conflict.
    let plan = stratum_runtime::compile::plan_from_spec(
        "reviewed-work.stratum.yaml",
        &example("reviewed-work.stratum.yaml"),
    )
    .unwrap();
    let runtime = stratum_runtime::Runtime::new(store_for_gate.clone(), Default::default());
    let started = runtime
        .call(&stratum_runtime::Command::Start {
            plan: Arc::new(plan),
            flow: None,
            inputs: json!({"text": "t"}),
            started_by: None,
        })
        .unwrap()
        .to_json();
    let flow = started["flow_id"].as_str().unwrap().to_owned();
    let at_gate = runtime
        .call(&stratum_runtime::Command::StepDone {
            flow_id: flow.clone(),
            step_id: "work".to_owned(),
            result: json!({"result": "r", "quality_score": 0.9}),
            usage: None,
        })
        .unwrap()
        .to_json();
    assert_eq!(status(&at_gate), "await_gate");
    let approve = |secret: &'static str| {
        client
            .post(url(&format!("/approve/{flow}")))
            .bearer_auth(secret)
            .send()
    };
    let refused = approve(reader).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let done: Value =
        serde_json::from_str(&approve(writer).await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(done["ok"], true, "{done}");
    let again: Value =
        serde_json::from_str(&approve(writer).await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(again["conflict"], true, "{again}");
    let audit = runtime
        .call(&stratum_runtime::Command::Audit { flow_id: flow })
        .unwrap()
        .to_json();
    let gate = audit["trace"]
        .as_array()
        .unwrap()
        .iter()
        .find(|record| record["type"] == "gate")
        .unwrap()
        .clone();
    assert_eq!(
        (&gate["actor"], &gate["resolved_by"]),
        (&json!("w"), &json!("human"))
    );
}

#[tokio::test]
async fn a_revoked_token_stops_working_with_its_sessions() {
    let state = State::new();
    let secret = state.token("temp", false);
    let serve = Serve::start(&state, &[]);
    let client = http();
    let cookie = sign_in(&serve, &secret).await;
    let ok = client
        .get(serve.url("/"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let (_, tokens) = state.cli(&["token", "list", "--json"]);
    assert!(
        tokens[0]["last_used_ms"].is_u64(),
        "its use is recorded: {tokens}"
    );
    let (code, _) = state.cli(&["token", "revoke", "temp", "--json"]);
    assert_eq!(code, 0);
    let bearer = client
        .get(serve.url("/"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::UNAUTHORIZED);
    let session = client
        .get(serve.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(session.status(), StatusCode::UNAUTHORIZED);
    let (_, tokens) = state.cli(&["token", "list", "--json"]);
    assert_eq!(tokens, json!([]));
}

/// Sends `request` as written and returns what comes back before the server closes (or 5 s).
fn raw(address: SocketAddr, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

#[tokio::test]
async fn oversized_and_malformed_requests_get_a_clear_4xx() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let client = http();

    // A body declared over the limit is refused before it is read (sending it all would race
    // the refusal: the server answers and closes while the client still writes).
    let reply = raw(
        serve.address,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {secret}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{{",
            stratum_serve::MAX_MCP_BODY_BYTES + 1
        ),
    );
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("limit of 8388608 bytes"), "{reply}");

    let form = "x".repeat(stratum_serve::MAX_FORM_BODY_BYTES + 1);
    let answer = client
        .post(serve.url("/signin"))
        .form(&[("token", form.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);

    let answer = client
        .post(serve.url("/mcp"))
        .bearer_auth(&secret)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_client_error(), "{}", answer.status());

    let answer = client
        .post(serve.url("/signin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("nothing=here")
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_client_error(), "{}", answer.status());

    let answer = client
        .get(serve.url("/"))
        .bearer_auth(&secret)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert!(answer.text().await.unwrap().contains("--allowed-host"));

    // Not HTTP at all.
    let reply = raw(serve.address, "\x00\x01garbage\r\n\r\n");
    assert!(
        reply.is_empty() || reply.starts_with("HTTP/1.1 400"),
        "{reply}"
    );

    // Still serving.
    let answer = client
        .get(serve.url("/"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
}

#[test]
fn a_non_loopback_address_needs_a_token_first() {
    let state = State::new();
    let refused = Process::new(binary())
        .arg("--db")
        .arg(state.db())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("STRATUM_DATABASE_URL")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("stratum-mcp token create --name NAME"),
        "{stderr}"
    );

    // On loopback it starts, and says how to make a token.
    let serve = Serve::start(&state, &[]);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let stderr = serve.stderr.lock().unwrap().clone();
        if stderr.contains("no access token exists yet") {
            break;
        }
        assert!(Instant::now() < until, "{stderr}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn other_host_names_are_answered_only_when_allowed() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &["--allowed-host", "stratum.example.com"]);
    let client = http();
    for (host, expected) in [
        ("stratum.example.com", StatusCode::OK),
        ("stratum.example.com:443", StatusCode::OK),
        ("localhost:7777", StatusCode::OK),
        ("other.example.com", StatusCode::FORBIDDEN),
    ] {
        let answer = client
            .get(serve.url("/"))
            .bearer_auth(&secret)
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), expected, "{host}");
    }
}

/// SIGTERM while a call waits for the database: the server stops accepting connections,
/// answers the call once it commits, then exits 0; the step it acknowledged is stored.
#[tokio::test]
async fn sigterm_lets_the_call_in_flight_finish_and_exits_0() {
    let state = State::new();
    let secret = state.token("alice", false);
    let mut serve = Serve::start(&state, &[]);
    let server = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let mut server = server;
    let planned = server
        .call(
            "stratum_plan",
            json!({"spec": example("sentiment.stratum.yaml"), "flow": "run",
                   "inputs": {"text": "I love it"}}),
        )
        .await;
    let flow = planned["flow_id"].as_str().unwrap().to_owned();

    // Hold SQLite's write lock: the step's commit waits for it.
    let lock = rusqlite::Connection::open(state.db()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let posts = || serve.stderr.lock().unwrap().matches("path=/mcp").count();
    let before = posts();
    let call = {
        let flow = flow.clone();
        tokio::spawn(async move {
            let answer = server
                .call(
                    "stratum_step_done",
                    json!({"flow_id": flow, "step_id": "s1",
                           "result": {"label": "positive", "confidence": 0.9}}),
                )
                .await;
            (server, answer)
        })
    };
    // The server logs each request it has taken, before its handler runs.
    let until = Instant::now() + Duration::from_secs(20);
    while posts() == before {
        assert!(Instant::now() < until, "the call never reached the server");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    serve.signal("TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        serve.child.try_wait().unwrap().is_none(),
        "it waits for the call in flight"
    );
    assert!(
        std::net::TcpStream::connect(serve.address).is_err(),
        "no new connection is accepted"
    );
    assert!(!call.is_finished());
    lock.execute_batch("COMMIT").unwrap();
    let (server, answer) = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status(&answer), "complete", "{answer:#}");
    assert_eq!(serve.wait(Duration::from_secs(20)), Some(0));
    assert!(serve.stderr.lock().unwrap().contains("stopped"));
    drop(server);
    let (_, stored) = state.cli(&["query", "flow", &flow, "--json"]);
    assert_eq!(stored["status"], "complete", "{stored:#}");
}

/// A sign-in posted from another site's page is refused: it would sign the person in with the
/// other site's token (login CSRF). The browser's own headers tell, and a client that sends
/// none (a script) signs in as before.
#[tokio::test]
async fn a_sign_in_from_another_sites_page_is_refused() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let own = format!("http://{}", serve.address);
    for (header, value, expected) in [
        ("origin", "http://evil.example", StatusCode::FORBIDDEN),
        ("origin", "null", StatusCode::FORBIDDEN),
        ("sec-fetch-site", "cross-site", StatusCode::FORBIDDEN),
        ("sec-fetch-site", "same-site", StatusCode::FORBIDDEN),
        ("origin", own.as_str(), StatusCode::SEE_OTHER),
        ("sec-fetch-site", "same-origin", StatusCode::SEE_OTHER),
    ] {
        let answer = http()
            .post(serve.url("/signin"))
            .header(header, value)
            .form(&[("token", secret.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), expected, "{header}: {value}");
        if expected == StatusCode::FORBIDDEN {
            assert!(!answer.headers().contains_key("set-cookie"));
            let page = answer.text().await.unwrap();
            assert!(page.contains("was refused"), "{page}");
        }
    }
    // Behind a proxy that passes no public name, the page's origin is an --allowed-host.
    let proxied = Serve::start(&state, &["--allowed-host", "stratum.example.com"]);
    for (origin, expected) in [
        ("https://stratum.example.com", StatusCode::SEE_OTHER),
        (
            "https://stratum.example.com.evil.example",
            StatusCode::FORBIDDEN,
        ),
    ] {
        let answer = http()
            .post(proxied.url("/signin"))
            .header("origin", origin)
            .form(&[("token", secret.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), expected, "{origin}");
    }
}

/// `serve`'s resident memory (`VmRSS` of `/proc/PID/status`), in KiB.
fn resident_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Issue 26: four large specs that differ only by a comment took `serve` from 71 to 801 MB
/// resident, and it stayed there, since the plan caches were bounded by count. Bounded by bytes
/// (here 2 MiB, set by `STRATUM_PLAN_CACHE_MIB`, so that plans of 6,000 steps, about 3 MB of
/// JSON each, stand for the 100,000-step ones a debug build would take minutes to compile),
/// no such plan is kept: once the first two have set the allocator's working set, five more
/// leave the resident memory where it was. Count-bounded caches grew it by some 13 MB a plan
/// (the server's cache by spec text and the store's by checksum each keep one), 65 MB here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_plans_do_not_stay_in_the_servers_memory() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start_with_env(&state, &[("STRATUM_PLAN_CACHE_MIB", "2")], &[]);
    let mut server = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let large = linear::linear_spec(6_000);
    let mut settled = 0;
    for copy in 0..7 {
        let spec = format!("# copy {copy}\n{large}");
        let started = server
            .call(
                "stratum_plan",
                json!({"spec": spec, "flow": "main", "inputs": linear::inputs()}),
            )
            .await;
        assert_eq!(status(&started), "execute_step", "{started:#}");
        if copy == 1 {
            settled = resident_kib(serve.child.id());
        }
    }
    let after = resident_kib(serve.child.id());
    let grown_mib = after.saturating_sub(settled) / 1024;
    assert!(
        grown_mib <= 24,
        "serve grew by {grown_mib} MiB over five large plans ({settled} KiB to {after} KiB)"
    );
    server.stop().await;
}

/// A person's browser (`Accept: text/html`, no `Authorization`) without a session is sent to
/// the sign-in form, which remembers the page it asked for and, once signed in, goes back to
/// it; a script keeps its 401; and `next` never leads off this server.
#[tokio::test]
async fn a_browser_without_a_session_is_sent_to_sign_in_and_back_to_its_page() {
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start(&state, &[]);
    let client = http();
    const BROWSER: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    for (asked, next) in [
        ("/", "/"),
        ("/flows/abc", "/flows/abc"),
        ("/?status=gate&q=x", "/%3Fstatus%3Dgate%26q%3Dx"),
        ("/no/such/page", "/no/such/page"),
    ] {
        let answer = client
            .get(serve.url(asked))
            .header("accept", BROWSER)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{asked}");
        assert_eq!(
            answer.headers()["location"],
            format!("/signin?next={next}"),
            "{asked}"
        );
    }
    // A session that ended is sent to sign in again, as one that never began.
    let answer = client
        .get(serve.url("/gates"))
        .header("accept", "text/html")
        .header("cookie", "stratum_session=0000")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer.headers()["location"], "/signin?next=/gates");
    // Scripts keep the 401: no `text/html`, a bearer token (even a wrong one), the event
    // stream, a post.
    for (method, path, accept, authorization) in [
        ("GET", "/", "application/json", None),
        ("GET", "/", "*/*", None),
        ("GET", "/", "text/html", Some("Bearer stratum_wrong")),
        ("GET", "/events", "text/event-stream", None),
        ("POST", "/signout", "text/html", None),
    ] {
        let mut request = client
            .request(method.parse().unwrap(), serve.url(path))
            .header("accept", accept);
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(
            answer.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path} {accept} {authorization:?}"
        );
    }

    // The form carries `next` on; signing in goes there.
    let form = client
        .get(serve.url("/signin?next=%2Fflows%2Fabc%3Fx%3D1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        form.contains("<input type=\"hidden\" name=\"next\" value=\"/flows/abc?x=1\">"),
        "{form}"
    );
    let signed_in = client
        .post(serve.url("/signin"))
        .form(&[("token", secret.as_str()), ("next", "/flows/abc?x=1")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers()["location"], "/flows/abc?x=1");
    // A wrong token shows the form again, still going to the same page.
    let wrong = client
        .post(serve.url("/signin"))
        .form(&[("token", "stratum_nope"), ("next", "/gates")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("name=\"next\" value=\"/gates\"")
    );

    // Open redirects: anything but a path of this server goes to `/`, and the form does not
    // carry it.
    for hostile in [
        "//evil.example/",
        "///evil.example",
        "https://evil.example/",
        "http:/evil.example",
        "javascript:alert(1)",
        "/\\evil.example",
        "\\\\evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        " /flows",
        "evil.example",
        "",
        "/caf\u{e9}",
    ] {
        let signed_in = client
            .post(serve.url("/signin"))
            .form(&[("token", secret.as_str()), ("next", hostile)])
            .send()
            .await
            .unwrap();
        assert_eq!(signed_in.status(), StatusCode::SEE_OTHER, "{hostile:?}");
        assert_eq!(signed_in.headers()["location"], "/", "{hostile:?}");
        let form = client
            .get(serve.url(&format!(
                "/signin?next={}",
                percent_encoding::utf8_percent_encode(hostile, percent_encoding::NON_ALPHANUMERIC)
            )))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!form.contains("name=\"next\""), "{hostile:?}: {form}");
    }
}

/// The `await_gate` dispatch tells the agent how a person decides: the operator command with
/// this flow's id and gate (which works as given), and the console's address when the server
/// knows it; the CLAUDE.md block and the skill point the agent at it in the same words.
#[tokio::test]
async fn a_gate_dispatch_says_how_a_person_decides_it() {
    let state = State::new();
    let secret = state.token("ci-agent", false);
    let serve = Serve::start(&state, &["--allowed-host", "console.example"]);
    let mut agent = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Stateless,
        state.dir.path(),
    )
    .await;
    let flow = mcp::start_reviewed_work(&mut agent).await;
    let gate = agent
        .call(
            "stratum_step_done",
            json!({"flow_id": flow, "step_id": "work",
                   "result": {"result": "r1", "quality_score": 0.9}}),
        )
        .await;
    assert_eq!(status(&gate), "await_gate", "{gate:#}");
    let told = gate["how_to_decide"].as_str().unwrap();
    let command = format!("stratum-mcp gate approve {flow} review --note \"why\"");
    assert!(told.contains(&format!("`{command}`")), "{told}");
    assert!(
        told.contains("`gate revise`") && told.contains("`gate kill`"),
        "{told}"
    );
    assert!(told.contains("http://console.example/gates"), "{told}");
    // Every key of the reference's answer is still there.
    for key in [
        "status",
        "flow_id",
        "step_number",
        "total_steps",
        "step_id",
        "step_mode",
        "function",
        "agent",
        "on_approve",
        "on_revise",
        "on_kill",
        "timeout",
    ] {
        assert!(gate.get(key).is_some(), "{key}: {gate:#}");
    }
    // What the installed instructions say agrees with it.
    let block = stratum_mcp::setup::claude_md_block("\n");
    for text in [block.as_str(), stratum_mcp::setup::SKILL] {
        assert!(text.contains("how_to_decide"), "{text}");
        assert!(
            text.contains("stratum-mcp gate approve <flow_id> <step_id> --note"),
            "{text}"
        );
    }
    // The command works as the agent passes it on.
    let (code, decided) = state.cli(&[
        "gate", "approve", &flow, "review", "--note", "why", "--json",
    ]);
    assert_eq!(
        (code, &decided["outcome"]),
        (0, &json!("approve")),
        "{decided}"
    );
    agent.stop().await;
}

#[tokio::test]
async fn a_call_waiting_for_a_fan_out_over_http_streams_its_progress() {
    use stratum_test_support::fake_agent::{Format, TaskAction, task_agent};
    let state = State::new();
    let home = tempfile::tempdir().unwrap();
    let agents = tempfile::tempdir().unwrap();
    let root = state.dir.path();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["commit", "-q", "--allow-empty", "-m", "base"],
    ] {
        let out = Process::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
    }
    let done = |summary: &str| format!("Done.\n```json\n{{\"summary\": \"{summary}\"}}\n```");
    task_agent(
        agents.path(),
        Format::Claude,
        &[
            ("a", vec![TaskAction::edit("a.txt", "from a", &done("a"))]),
            ("b", vec![TaskAction::edit("b.txt", "from b", &done("b"))]),
        ],
    );
    let path = format!(
        "{}:{}",
        agents.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let secret = state.token("ci-agent", false);
    let serve = Serve::start_with_env(
        &state,
        &[
            ("PATH", &path),
            ("STRATUM_HOME", &home.path().display().to_string()),
        ],
        &[],
    );
    let mut server = McpServer::start_http(
        &serve.url("/mcp"),
        &secret,
        Protocol::Handshake,
        state.dir.path(),
    )
    .await;
    let spec = r#"version: "0.3"
contracts:
  Change:
    summary: {type: string}
flows:
  build:
    input: {tasks: {type: array}}
    steps:
      - id: work
        type: parallel_dispatch
        source: "$.input.tasks"
        intent_template: "Task TASK[{id}]: {description}"
        agent: claude
        output_contract: Change
        isolation: none
        merge: manual
        task_timeout: 60
"#;
    let tasks = json!([
        {"id": "a", "description": "write a"},
        {"id": "b", "description": "write b", "depends_on": ["a"]}
    ]);
    let envelope = server
        .call(
            "stratum_plan",
            json!({"spec": spec, "flow": "build", "inputs": {"tasks": tasks}}),
        )
        .await;
    assert_eq!(status(&envelope), "parallel_dispatch", "{envelope:#}");
    let flow = envelope["flow_id"].as_str().unwrap().to_owned();
    let waited = server
        .call(
            "stratum_parallel_start",
            json!({"flow_id": flow, "step_id": "work", "wait_seconds": 120}),
        )
        .await;
    assert_eq!(status(&waited), "parallel_status", "{waited:#}");
    assert_eq!(waited["running"], false, "{waited:#}");
    // Over HTTP the answer becomes an event stream once a notification goes out first.
    let progress = server.received.progress();
    let last = progress.last().expect("progress notifications over HTTP");
    assert_eq!(last.total, Some(2.0), "{progress:#?}");
    let message = last.message.as_deref().unwrap();
    assert!(
        message.starts_with("2 of 2 tasks settled; latest: ") && message.ends_with("'b' complete"),
        "{progress:#?}"
    );
    server.stop().await;
}

/// `stratum-mcp doctor --serve URL --json` on the state's store, `token` in STRATUM_TOKEN.
fn doctor_of_serve(state: &State, url: &str, token: Option<&str>) -> (i32, Value) {
    let mut command = Process::new(binary());
    command
        .args(state.store_args())
        .args(["doctor", "--json", "--serve", url])
        .env_remove("STRATUM_DATABASE_URL")
        .env_remove("STRATUM_TOKEN");
    if let Some(token) = token {
        command.env("STRATUM_TOKEN", token);
    }
    let output = command.output().unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let serve = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "serve")
        .unwrap()
        .clone();
    (output.status.code().unwrap_or(-1), serve)
}

#[test]
fn doctor_reaches_serve_and_checks_the_token() {
    let state = State::new();
    let secret = state.token("operator", true);
    let serve = Serve::start(&state, &[]);
    let url = serve.url("");
    let (status, check) = doctor_of_serve(&state, &url, Some(&secret));
    assert_eq!((status, &check["status"]), (0, &json!("ok")), "{check:#}");
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("the token accepted")
    );
    let (status, check) = doctor_of_serve(&state, &url, None);
    assert_eq!((status, &check["status"]), (0, &json!("ok")), "{check:#}");
    let (status, check) = doctor_of_serve(&state, &url, Some("stratum_not-a-token"));
    assert_eq!(
        (status, &check["status"]),
        (1, &json!("problem")),
        "{check:#}"
    );
    assert!(
        check["fix"].as_str().unwrap().contains("token create"),
        "{check:#}"
    );
    drop(serve);
    let (status, check) = doctor_of_serve(&state, &url, Some(&secret));
    assert_eq!(
        (status, &check["status"]),
        (1, &json!("problem")),
        "{check:#}"
    );
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("cannot be reached"),
        "{check:#}"
    );
}
