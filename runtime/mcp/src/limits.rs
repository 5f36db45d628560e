//! The server's documented bounds on what a call may carry. Each is checked before any work
//! starts, and each refusal says which bound and what to send instead.
//!
//! | what | bound |
//! |---|---|
//! | one JSON-RPC message (one line on stdio) | [`MAX_MESSAGE_BYTES`] |
//! | nesting of a JSON message | 128 levels (the JSON parser's own bound) |
//! | a spec's text (`spec`) | [`MAX_SPEC_BYTES`] |
//! | any other argument, serialized | [`MAX_ARGUMENT_BYTES`] |
//! | nesting of an argument | [`MAX_ARGUMENT_DEPTH`] levels |
//! | a call's `wait_seconds` | [`MAX_WAIT_SECONDS`] |

use serde_json::Value;

/// Largest message read from standard input; a longer line is answered with an error and
/// discarded without being held in memory.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// Largest spec text `stratum_plan` and `stratum_validate` accept.
pub const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;
/// Largest serialized value of any other argument (a step's result, inputs, a draft).
pub const MAX_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;
/// Deepest nesting of objects and arrays in an argument.
pub const MAX_ARGUMENT_DEPTH: usize = 64;
/// The longest a call waits for a fan-out to settle (`wait_seconds`); a longer wait is
/// refused, since clients give up on a call long before.
pub const MAX_WAIT_SECONDS: u64 = 600;

/// Checks one argument against the bounds.
pub fn check_argument(name: &str, value: &Value) -> Result<(), String> {
    if let Value::String(text) = value {
        let bound = if name == "spec" {
            MAX_SPEC_BYTES
        } else {
            MAX_ARGUMENT_BYTES
        };
        if text.len() > bound {
            return Err(format!(
                "argument `{name}` is {} bytes; the limit is {} ({}); send a smaller value",
                text.len(),
                bound,
                mebibytes(bound)
            ));
        }
        return Ok(());
    }
    if depth_beyond(value, MAX_ARGUMENT_DEPTH) {
        return Err(format!(
            "argument `{name}` nests objects and arrays deeper than {MAX_ARGUMENT_DEPTH} levels; \
             send a flatter value"
        ));
    }
    let size = stratum_runtime::plan_cache::json_size(value);
    if size > MAX_ARGUMENT_BYTES {
        return Err(format!(
            "argument `{name}` is {size} bytes as JSON; the limit is {MAX_ARGUMENT_BYTES} ({}); \
             send a smaller value (large artifacts belong in files, referenced by path)",
            mebibytes(MAX_ARGUMENT_BYTES)
        ));
    }
    Ok(())
}

fn mebibytes(bytes: usize) -> String {
    format!("{} MiB", bytes / (1024 * 1024))
}

/// Whether `value` nests deeper than `limit`, found without recursion.
fn depth_beyond(value: &Value, limit: usize) -> bool {
    let mut pending = vec![(value, 0usize)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn depth_counts_containers() {
        let mut value = json!(1);
        for _ in 0..MAX_ARGUMENT_DEPTH {
            value = json!([value]);
        }
        assert!(check_argument("result", &value).is_ok());
        let deeper = json!({ "k": value });
        assert!(
            check_argument("result", &deeper)
                .is_err_and(|message| message.contains("deeper than 64 levels"))
        );
    }

    #[test]
    fn sizes_are_bounded() {
        let big = json!({ "text": "x".repeat(MAX_ARGUMENT_BYTES) });
        assert!(check_argument("result", &big).is_err());
        let spec = Value::String("x".repeat(MAX_SPEC_BYTES + 1));
        assert!(check_argument("spec", &spec).is_err_and(|m| m.contains("4 MiB")));
    }
}
