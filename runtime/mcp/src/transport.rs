//! Newline-delimited JSON-RPC over a byte stream (stdio), with a bound on each message that
//! is answered, not silent: a line over [`MAX_MESSAGE_BYTES`](super::limits::MAX_MESSAGE_BYTES)
//! is discarded as it arrives (never held in memory) and its request gets a JSON-RPC error
//! naming the limit, as does a request that is not a well-formed message: -32700 for a line
//! that is not JSON (or not UTF-8), -32600 for JSON that is not a request (a batch, `null`,
//! `42`), with `"id": null` when no id can be read. rmcp's own stdio transport drops such lines
//! without a word, which leaves the client waiting.
//!
//! Reading is cancellation-safe (the service polls `receive` inside a `select!`): bytes are
//! consumed from the buffered reader only once copied into the line being assembled.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// How much of an oversized line is kept to find the id of the request it carried.
const ID_SEARCH_PREFIX: usize = 4096;

pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    line: Vec<u8>,
    /// The start of an oversized line being skipped, and how long it has grown.
    skipping: Option<(Vec<u8>, usize)>,
    writer: Arc<Mutex<W>>,
    limit: usize,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(reader: R, writer: W, limit: usize) -> LineTransport<R, W> {
        LineTransport {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::new(),
            skipping: None,
            writer: Arc::new(Mutex::new(writer)),
            limit,
        }
    }

    /// The next whole line (without its newline), or `None` at the end of the input.
    async fn next_line(&mut self) -> Option<Vec<u8>> {
        loop {
            let (consumed, finished) = {
                let available = match self.reader.fill_buf().await {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        tracing::error!("cannot read standard input: {error}");
                        return None;
                    }
                };
                if available.is_empty() {
                    return None;
                }
                let newline = available.iter().position(|&byte| byte == b'\n');
                let taken = newline.map_or(available.len(), |at| at + 1);
                let content = available
                    .get(..newline.unwrap_or(taken))
                    .unwrap_or_default();
                match &mut self.skipping {
                    Some((prefix, length)) => {
                        *length += content.len();
                        let room = ID_SEARCH_PREFIX.saturating_sub(prefix.len());
                        prefix.extend(content.iter().take(room));
                    }
                    None if self.line.len() + content.len() > self.limit => {
                        // Counted before the held bytes are cut to the id-search prefix: they
                        // are part of the message's size.
                        let length = self.line.len() + content.len();
                        let mut prefix = std::mem::take(&mut self.line);
                        prefix.truncate(ID_SEARCH_PREFIX);
                        let room = ID_SEARCH_PREFIX.saturating_sub(prefix.len());
                        prefix.extend(content.iter().take(room));
                        self.skipping = Some((prefix, length));
                    }
                    None => self.line.extend_from_slice(content),
                }
                (taken, newline.is_some())
            };
            self.reader.consume(consumed);
            if !finished {
                continue;
            }
            if let Some((prefix, length)) = self.skipping.take() {
                self.answer_error(
                    request_id(&prefix),
                    -32600,
                    format!(
                        "the message is {length} bytes; stratum-mcp reads messages of at most {} \
                         bytes: send a smaller spec or result (large artifacts belong in files)",
                        self.limit
                    ),
                );
                continue;
            }
            return Some(std::mem::take(&mut self.line));
        }
    }

    /// Sends an error response without waiting for it, so that a cancelled `receive` never
    /// leaves half a message on the wire. A message whose id cannot be read is answered with
    /// `"id": null`, as JSON-RPC asks: silence would leave the client waiting forever.
    fn answer_error(&self, id: Option<Value>, code: i64, message: String) {
        let id = id.unwrap_or(Value::Null);
        let response =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let mut bytes = response.to_string().into_bytes();
        bytes.push(b'\n');
        let writer = self.writer.clone();
        tokio::spawn(async move {
            let mut writer = writer.lock().await;
            if writer.write_all(&bytes).await.is_ok() {
                let _ = writer.flush().await;
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut writer = writer.lock().await;
            writer.write_all(&bytes).await?;
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = self.next_line().await?;
            let text = line.strip_suffix(b"\r").unwrap_or(&line);
            let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
                Ok(message) => return Some(message),
                Err(error) => match refusal(text, &error) {
                    Some(Refusal { id, code, message }) => self.answer_error(id, code, message),
                    // A notification answers nothing; one this server does not know is ignored.
                    None => tracing::debug!("ignored a message: {error}"),
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.shutdown().await
    }
}

/// The JSON-RPC error that answers a message which is not one: the answer of `/mcp` to such a
/// POST body (over HTTP even a malformed notification is answered: the POST needs a reply).
pub fn malformed_message_error(text: &[u8]) -> Value {
    let Refusal { id, code, message } =
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
            Ok(_) => Refusal {
                id: None,
                code: -32600,
                message: "the message could not be served".to_owned(),
            },
            Err(error) => refusal(text, &error).unwrap_or_else(|| Refusal {
                id: None,
                code: -32600,
                message: format!("not a valid MCP notification: {error}"),
            }),
        };
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Why a message was refused: the JSON-RPC error to answer it with.
struct Refusal {
    id: Option<Value>,
    code: i64,
    message: String,
}

/// The refusal of a line that is not a message this server reads (`error` says why), or
/// `None` for a notification, which JSON-RPC never answers: -32700 when it is not JSON (or not
/// UTF-8), -32600 when it is JSON but not a request object (a batch, `null`, `42`, an object
/// of the wrong shape); the request's id when one can be read, else `null`.
fn refusal(text: &[u8], error: &serde_json::Error) -> Option<Refusal> {
    let invalid = |id: Option<Value>, message: String| Refusal {
        id,
        code: -32600,
        message,
    };
    Some(match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(message))
            if !message.contains_key("id") && message.contains_key("method") =>
        {
            return None;
        }
        Ok(Value::Object(message)) => invalid(
            message.get("id").filter(|id| is_request_id(id)).cloned(),
            format!("not a valid MCP request: {error}"),
        ),
        Ok(Value::Array(_)) => invalid(
            None,
            "batches are not supported (MCP removed them): send one JSON-RPC message at a time"
                .to_owned(),
        ),
        Ok(other) => invalid(
            None,
            format!(
                "a JSON-RPC message is an object, not {}: send one request object",
                json_kind(&other)
            ),
        ),
        Err(_) if std::str::from_utf8(text).is_err() => Refusal {
            id: request_id(text),
            code: -32700,
            message: "the message is not UTF-8 text: send JSON encoded as UTF-8".to_owned(),
        },
        Err(_) => Refusal {
            id: request_id(text),
            code: -32700,
            message: format!("the message is not valid JSON: {error}"),
        },
    })
}

/// Whether a value may be a JSON-RPC request id (a string or a number); any other is
/// answered as `null`, since an id the client never sent matches no request of its own.
fn is_request_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

/// What kind of JSON value a message is, for the refusal that names it.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The `"id"` of a request whose text could not be read as a whole: the first `"id": <number
/// or string>` at the top of the text.
fn request_id(text: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(text.get(..ID_SEARCH_PREFIX.min(text.len()))?);
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"id\"") {
        let after = rest.get(at + 4..)?.trim_start();
        if let Some(value) = after.strip_prefix(':') {
            let value = value.trim_start();
            let end = if value.starts_with('"') {
                value.get(1..)?.find('"').map(|close| close + 2)
            } else {
                value.find(|c: char| !(c.is_ascii_digit() || c == '-'))
            };
            if let Some(end) = end
                && let Some(literal) = value.get(..end)
                && let Ok(id @ (Value::Number(_) | Value::String(_))) =
                    serde_json::from_str(literal)
            {
                return Some(id);
            }
        }
        rest = rest.get(at + 4..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_at_the_top_of_a_message() {
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"#),
            Some(json!(17))
        );
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0", "id" : "a-1", "method""#),
            Some(json!("a-1"))
        );
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","method":"x"}"#), None);
    }
}
