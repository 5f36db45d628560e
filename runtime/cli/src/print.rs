//! Standard output for the operator commands: a reader that closes it early (`| head`) ends
//! the command quietly, with the status it would have had, never with a panic.

use std::io::{ErrorKind, Write};
use std::process::ExitCode;

/// Writes `bytes` to standard output and returns `code`; a closed output is not an error.
pub fn bytes_with(bytes: &[u8], code: u8) -> ExitCode {
    match write(bytes) {
        Ok(()) | Err(Closed) => ExitCode::from(code),
    }
}

pub fn bytes(bytes: &[u8]) -> ExitCode {
    bytes_with(bytes, 0)
}

pub fn text_with(text: &str, code: u8) -> ExitCode {
    bytes_with(text.as_bytes(), code)
}

/// A value as indented JSON and a newline.
pub fn json_with(value: &serde_json::Value, code: u8) -> ExitCode {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned());
    text.push('\n');
    text_with(&text, code)
}

/// Standard output is gone (its reader closed it): stop writing.
pub struct Closed;

/// Writes and flushes; any failure means nobody reads any more.
pub fn write(bytes: &[u8]) -> Result<(), Closed> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Err(Closed),
        Err(error) => {
            eprintln!("stratum-mcp: cannot write to standard output: {error}");
            Err(Closed)
        }
    }
}
