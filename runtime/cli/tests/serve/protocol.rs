//! What `/mcp` answers to a body that is not a JSON-RPC request: a JSON-RPC error a client can
//! act on (400 with -32700 or -32600, as the Streamable HTTP transport asks), never a bare 415.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::serve::{Serve, State, http};

async fn post(serve: &Serve, secret: &str, body: &'static str) -> (StatusCode, Value) {
    let answer = http()
        .post(serve.url("/mcp"))
        .bearer_auth(secret)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let text = answer.text().await.unwrap();
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{body}: answered {status} with {text:?}"));
    (status, value)
}

#[tokio::test]
async fn a_malformed_body_gets_a_json_rpc_error() {
    let state = State::new();
    let secret = state.token("alice", true);
    let serve = Serve::start(&state, &[]);
    let cases = [
        ("{not json", -32700, Value::Null),
        ("null", -32600, Value::Null),
        ("42", -32600, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","params":{}}"#,
            -32600,
            json!("a"),
        ),
    ];
    for (body, code, id) in cases {
        let (status, answer) = post(&serve, &secret, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{body}: {answer}");
        assert_eq!(answer["id"], id, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    }
    // A known method with params that do not fit: invalid params, not an unknown method.
    let (_, answer) = post(
        &serve,
        &secret,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#,
    )
    .await;
    assert_eq!(answer["id"], 5, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}
