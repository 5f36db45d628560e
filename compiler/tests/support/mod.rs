//! What the `stratumc` end-to-end tests share: running the binary and reading what it wrote.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `stratumc` in `dir` with `args`, `stdin` fed to it (or nothing), plain human output at
/// 80 columns.
pub fn stratumc_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stratumc"));
    command
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .env("COLUMNS", "80")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("stratumc starts");
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        // stratumc may refuse the command line before it reads its input: a closed pipe is
        // then the expected end of the write, not a failure.
        if let Err(error) = pipe.write_all(bytes) {
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::BrokenPipe,
                "stdin accepts the spec"
            );
        }
    }
    child.wait_with_output().expect("stratumc finishes")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
