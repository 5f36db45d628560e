//! Commands run with standard output on a pseudo-terminal, where the operator commands print
//! for a person, and the check that what reached it is inert text.

#![cfg(unix)]
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `stratum-mcp ARGS` (state in `home`), with standard output on a pseudo-terminal,
/// where the operator commands print for a person (into a pipe they print JSON): the exit
/// status and everything that reached the terminal.
pub fn cli_on_terminal(home: &Path, args: &[&str]) -> (i32, String) {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::Read;

    let screen = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&screen).unwrap();
    unlockpt(&screen).unwrap();
    let name = ptsname(&screen, Vec::new()).unwrap();
    let terminal = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY,
        Mode::empty(),
    )
    .unwrap();
    // The command (and with it this process's copy of the terminal) is dropped once spawned,
    // so the screen reads to its end when the child exits.
    let mut child = Command::new(env!("CARGO_BIN_EXE_stratum-mcp"))
        .args(args)
        .env("STRATUM_HOME", home)
        .env_remove("STRATUM_DB")
        .env_remove("STRATUM_LOG")
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::from(terminal))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("stratum-mcp runs");
    let reader = std::thread::spawn(move || {
        let mut shown = Vec::new();
        // Linux answers EIO once the last writer has closed the terminal: that is the end.
        let _ = std::fs::File::from(screen).read_to_end(&mut shown);
        shown
    });
    let status = child.wait().unwrap();
    let shown = reader.join().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&shown).into_owned(),
    )
}

/// Fails when `shown` holds anything a terminal acts on instead of showing: a control
/// character (ESC, BEL, a carriage return other than the terminal's own line ends, …) or a
/// bidirectional override or isolate.
pub fn assert_inert(what: &str, shown: &str) {
    let shown = shown.replace("\r\n", "\n");
    for c in shown.chars() {
        let acts = (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(!acts, "{what}: {c:?} reached the terminal raw:\n{shown:?}");
    }
}
