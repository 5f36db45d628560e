//! Whole sessions with the real `stratum-lsp` binary over stdio, with `Content-Length` framing:
//! initialize → didOpen → didChange → the requests → shutdown → exit. Responses are snapshots.
#![allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used)] // tests may

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::{Value, json};

const URI: &str = "file:///work/specs/review.stratum.yaml";

/// A spec with one misspelt field in an `ensure` (`confdence`), after non-ASCII text on its line
/// so that UTF-16 columns differ from byte columns.
const SPEC: &str = r#"version: "0.2"
contracts:
  Finding:
    label: {type: string, values: [ok, bad]}
    confidence: {type: number}
functions:
  classify:
    mode: infer
    intent: "Classify — with care"
    input: {text: {type: string}}
    output: Finding
    ensure: ["'é' != '' and result.confdence > 0.5"]
flows:
  review:
    input: {text: {type: string}}
    output: Finding
    steps:
      - id: scan
        function: classify
        inputs: {text: "$.input.text"}
      - id: report
        intent: "Write the report"
        inputs: {label: "$.steps.scan.output.label"}
        depends_on: [scan]
        output_contract: Finding
        skip_if: "$.steps.scan.output.label == 'ok'"
"#;

struct Server {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for responses.
    notifications: Vec<Value>,
    cache: std::path::PathBuf,
}

impl Server {
    fn start(name: &str) -> Server {
        let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        let _ = std::fs::remove_dir_all(&cache);
        let mut child = Command::new(env!("CARGO_BIN_EXE_stratum-lsp"))
            .env("XDG_CACHE_HOME", &cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("stratum-lsp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, messages) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(value) = line.strip_prefix("Content-Length: ") {
                        length = value.parse::<usize>().ok();
                    }
                }
                let mut body = vec![0; length.expect("every message has a Content-Length")];
                reader.read_exact(&mut body).unwrap();
                if send.send(serde_json::from_slice(&body).unwrap()).is_err() {
                    return;
                }
            }
        });
        Server {
            child,
            stdin,
            messages,
            next_id: 1,
            notifications: Vec::new(),
            cache,
        }
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn receive(&mut self) -> Value {
        match self.messages.recv_timeout(Duration::from_secs(20)) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the server in 20 s"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its output"),
        }
    }

    /// Sends a request and returns its response, keeping notifications that come first.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self.receive();
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            self.notifications.push(message);
        }
    }

    /// The next `publishDiagnostics`, received or already kept.
    fn diagnostics(&mut self) -> Value {
        let kept = self
            .notifications
            .iter()
            .position(|m| m["method"] == "textDocument/publishDiagnostics");
        if let Some(at) = kept {
            return self.notifications.remove(at)["params"].clone();
        }
        loop {
            let message = self.receive();
            if message["method"] == "textDocument/publishDiagnostics" {
                return message["params"].clone();
            }
            self.notifications.push(message);
        }
    }

    /// A response as a snapshot: pretty JSON, with the cache directory made portable.
    fn shown(&self, value: &Value) -> String {
        let text = serde_json::to_string_pretty(value).unwrap();
        let cache = self.cache.display().to_string();
        text.replace(&cache, "$CACHE")
    }

    fn finish(mut self) {
        let response = self.request("shutdown", Value::Null);
        assert_eq!(response["result"], Value::Null, "{response}");
        self.notify("exit", Value::Null);
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "stratum-lsp exits 0 after shutdown and exit"
        );
    }
}

fn at(line: u32, character: u32) -> Value {
    json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": character}})
}

/// The line and UTF-16 column of the `nth` occurrence of `needle` in `text`.
fn find(text: &str, needle: &str, nth: usize) -> (u32, u32) {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` occurs {} times", nth + 1))
        .0;
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32;
    let column = before.rsplit('\n').next().unwrap().encode_utf16().count() as u32;
    (line, column)
}

fn open(server: &mut Server, text: &str) {
    server.request(
        "initialize",
        json!({"processId": null, "rootUri": null, "capabilities": {},
               "initializationOptions": {"debounceMs": 40}}),
    );
    server.notify("initialized", json!({}));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "yaml", "version": 1, "text": text}}),
    );
}

#[test]
fn a_whole_session() {
    let mut server = Server::start("lsp-session");
    let initialized = server.request(
        "initialize",
        json!({"processId": null, "rootUri": null, "capabilities": {},
               "initializationOptions": {"debounceMs": 40}}),
    );
    insta::assert_snapshot!("initialize", server.shown(&initialized["result"]));
    server.notify("initialized", json!({}));
    server.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "yaml", "version": 1, "text": SPEC}}),
    );

    // The misspelt field, at its exact UTF-16 range, with the explanation linked.
    let published = server.diagnostics();
    assert_eq!(published["version"], 1);
    let (line, column) = find(SPEC, "confdence", 0);
    let range = &published["diagnostics"][0]["range"];
    assert_eq!(range["start"], json!({"line": line, "character": column}));
    assert_eq!(range["end"], json!({"line": line, "character": column + 9}));
    insta::assert_snapshot!("diagnostics_on_open", server.shown(&published));

    // The fix the compiler offers, as a code action.
    let actions = server.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": URI}, "range": range,
               "context": {"diagnostics": []}}),
    );
    insta::assert_snapshot!("code_action", server.shown(&actions["result"]));

    // Apply it as an editor would: an incremental change.
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2},
               "contentChanges": [{"range": range, "text": "confidence"}]}),
    );
    let fixed = SPEC.replace("confdence", "confidence");
    let published = server.diagnostics();
    assert_eq!(published["version"], 2);
    assert_eq!(published["diagnostics"], json!([]), "{published}");

    // Navigation on the fixed text.
    let (line, column) = find(&fixed, "scan.output.label ==", 0);
    let hover = server.request("textDocument/hover", at(line, column + 1));
    insta::assert_snapshot!("hover_step_reference", server.shown(&hover["result"]));
    let (line, column) = find(&fixed, "Finding", 0);
    let hover = server.request("textDocument/hover", at(line, column + 2));
    insta::assert_snapshot!("hover_contract", server.shown(&hover["result"]));
    let (line, column) = find(&fixed, "confidence > 0.5", 0);
    let hover = server.request("textDocument/hover", at(line, column + 3));
    insta::assert_snapshot!("hover_result_field", server.shown(&hover["result"]));
    let (line, column) = find(&fixed, "depends_on", 0);
    let hover = server.request("textDocument/hover", at(line, column + 3));
    insta::assert_snapshot!("hover_key", server.shown(&hover["result"]));

    let (line, column) = find(&fixed, "[scan]", 0);
    let definition = server.request("textDocument/definition", at(line, column + 2));
    let (def_line, def_column) = find(&fixed, "scan", 0);
    assert_eq!(
        definition["result"]["range"]["start"],
        json!({"line": def_line, "character": def_column})
    );
    let mut params = at(def_line, def_column);
    params["context"] = json!({"includeDeclaration": true});
    let references = server.request("textDocument/references", params);
    insta::assert_snapshot!("references", server.shown(&references["result"]));

    let prepared = server.request("textDocument/prepareRename", at(def_line, def_column));
    assert_eq!(prepared["result"]["placeholder"], "scan");
    let mut params = at(def_line, def_column);
    params["newName"] = json!("classify_text");
    let rename = server.request("textDocument/rename", params.clone());
    insta::assert_snapshot!("rename", server.shown(&rename["result"]));
    params["newName"] = json!("report");
    let clash = server.request("textDocument/rename", params);
    assert_eq!(clash["error"]["code"], -32602, "{clash}");
    assert!(
        clash["error"]["message"]
            .as_str()
            .unwrap()
            .contains("report"),
        "{clash}"
    );

    let (line, column) = find(&fixed, "label == 'ok'", 0);
    let completion = server.request("textDocument/completion", at(line, column));
    insta::assert_snapshot!(
        "completion_output_fields",
        server.shown(&completion["result"])
    );
    let (line, column) = find(&fixed, "[scan]", 0);
    let completion = server.request("textDocument/completion", at(line, column + 1));
    let labels: Vec<&str> = completion["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["scan"],
        "step ids in depends_on, not the step itself"
    );

    let symbols = server.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": URI}}),
    );
    insta::assert_snapshot!("document_symbols", server.shown(&symbols["result"]));
    let folding = server.request(
        "textDocument/foldingRange",
        json!({"textDocument": {"uri": URI}}),
    );
    insta::assert_snapshot!("folding_ranges", server.shown(&folding["result"]));

    // The report step iterates, scored: its exit criterion sees the score names.
    let iterating = fixed.replace(
        "        skip_if:",
        "        max_iterations: 3\n        score_expr: \"result.confidence\"\n        exit_criterion: \"iteration > 2\"\n        skip_if:",
    );
    server.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 3},
               "contentChanges": [{"text": iterating}]}),
    );
    let (line, column) = find(&iterating, "iteration > 2", 0);
    let completion = server.request("textDocument/completion", at(line, column + 4));
    insta::assert_snapshot!(
        "completion_iteration_names",
        server.shown(&completion["result"])
    );

    server.finish();
}

#[test]
fn changes_in_quick_succession_publish_only_the_latest() {
    let mut server = Server::start("lsp-debounce");
    open(&mut server, SPEC);
    assert_eq!(server.diagnostics()["version"], 1);
    let whole = |text: &str| json!([{"text": text}]);
    for (version, text) in [
        (2, "version: \"0.2\"\nflows: {"),
        (3, SPEC),
        (4, "version: 7\n"),
    ] {
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": whole(text)}),
        );
    }
    let published = server.diagnostics();
    assert_eq!(
        published["version"], 4,
        "versions 2 and 3 were superseded: {published}"
    );
    assert_eq!(published["diagnostics"][0]["code"], "E0014", "{published}");
    server.finish();
}

#[test]
fn a_half_typed_document_never_stops_the_server() {
    let mut server = Server::start("lsp-half-typed");
    open(&mut server, SPEC);
    server.diagnostics();
    // Type a new key character by character in the middle of a step, asking for everything
    // after each keystroke.
    let (line, _) = find(SPEC, "depends_on", 0);
    let mut version = 1;
    for (column, c) in "        outp: [\"é".chars().enumerate() {
        version += 1;
        let start = json!({"line": line, "character": column});
        server.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": [{"range": {"start": start, "end": start},
                                       "text": c.to_string()}]}),
        );
        for method in [
            "textDocument/hover",
            "textDocument/definition",
            "textDocument/completion",
        ] {
            let response = server.request(method, at(line, column as u32));
            assert!(response.get("error").is_none(), "{method}: {response}");
        }
        for method in ["textDocument/documentSymbol", "textDocument/foldingRange"] {
            let response = server.request(method, json!({"textDocument": {"uri": URI}}));
            assert!(response.get("error").is_none(), "{method}: {response}");
        }
    }
    // Far out of range positions are answered too.
    let response = server.request("textDocument/hover", at(9_999, 9_999));
    assert!(response.get("error").is_none(), "{response}");
    let published = server.diagnostics();
    assert!(published["diagnostics"].as_array().is_some());
    server.finish();
}
