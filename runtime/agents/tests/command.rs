//! `run_command` against real processes: exit codes, the deadline ending a whole group, the
//! output bound, raw bytes, and an environment that is only what was given.

#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use stratum_agents::{CommandOutput, CommandSpec, Error, run_command};

fn sh(script: &str, cwd: &Path, deadline: Duration, output_bytes: usize) -> CommandOutput {
    let args = [OsString::from("-c"), OsString::from(script)];
    run_command(CommandSpec {
        program: Path::new("/bin/sh"),
        args: &args,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd,
        stdin: Vec::new(),
        deadline,
        grace: Duration::from_millis(200),
        output_bytes,
    })
    .unwrap()
}

/// Whether `pid` is gone: no such process, or a zombie (dead; the container's init may never
/// reap it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn eventually_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn the_exit_code_and_both_streams_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = sh(
        "printf out; printf err >&2; exit 7",
        dir.path(),
        Duration::from_secs(10),
        1024,
    );
    assert_eq!(out.exit.code, Some(7));
    assert!(!out.timed_out && !out.success());
    assert_eq!(
        (out.stdout.as_slice(), out.stderr.as_slice()),
        (&b"out"[..], &b"err"[..])
    );
    assert!(!out.stdout_truncated);

    let ok = sh("true", dir.path(), Duration::from_secs(10), 1024);
    assert!(ok.success());
}

#[test]
fn stdin_is_given_and_stdout_is_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..=255_u8)
        .chain(b"\r\nno newline at the end".iter().copied())
        .collect();
    let out = run_command(CommandSpec {
        program: Path::new("cat"),
        args: &[],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: dir.path(),
        stdin: bytes.clone(),
        deadline: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        output_bytes: 4096,
    })
    .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, bytes);
}

#[test]
fn the_deadline_ends_the_command_with_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = sh(
        "sleep 100 & echo $!; sleep 100",
        dir.path(),
        Duration::from_millis(500),
        1024,
    );
    assert!(out.timed_out && !out.success());
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        eventually_gone(grandchild),
        "the background sleep {grandchild} lives on"
    );
}

#[test]
fn output_keeps_only_the_last_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out = sh(
        "seq 1 100000; seq 1 100000 >&2",
        dir.path(),
        Duration::from_secs(20),
        16,
    );
    assert!(out.success());
    assert!(out.stdout_truncated && out.stderr_truncated);
    assert_eq!(out.stdout, b"98\n99999\n100000\n");
    assert_eq!(out.stderr, b"98\n99999\n100000\n");
}

#[test]
fn the_environment_is_only_what_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_command(CommandSpec {
        program: Path::new("/usr/bin/env"),
        args: &[],
        env: vec![("ONLY".into(), "this".into())],
        cwd: dir.path(),
        stdin: Vec::new(),
        deadline: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        output_bytes: 4096,
    })
    .unwrap();
    assert!(out.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "ONLY=this\n");
}

#[test]
fn what_cannot_start_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |program, cwd| CommandSpec {
        program,
        args: &[],
        env: Vec::new(),
        cwd,
        stdin: Vec::new(),
        deadline: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        output_bytes: 16,
    };
    let missing = run_command(spec(Path::new("/nonexistent/program"), dir.path()));
    assert!(matches!(missing, Err(Error::Spawn { .. })), "{missing:?}");
    let no_dir = dir.path().join("absent");
    let bad_cwd = run_command(spec(Path::new("/bin/true"), &no_dir));
    assert!(
        matches!(bad_cwd, Err(Error::WorkingDirectory { .. })),
        "{bad_cwd:?}"
    );
}

#[tokio::test]
async fn it_runs_from_inside_a_tokio_runtime_too() {
    let dir = tempfile::tempdir().unwrap();
    let out = sh("echo inside", dir.path(), Duration::from_secs(10), 64);
    assert_eq!(out.stdout, b"inside\n");
}

/// A bare program name is found on the `PATH` of the environment given, as the child's own
/// search would find it: the first entry that has it, an entry relative to the command's
/// directory included.
#[test]
fn a_bare_name_is_found_on_the_path_given() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = |at: &Path, says: &str| {
        std::fs::create_dir_all(at).unwrap();
        let path = at.join("say-where");
        std::fs::write(&path, format!("#!/bin/sh\necho {says}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let not_executable = dir.path().join("plain");
    script(&second, "second");
    script(&dir.path().join("cwd/relative"), "relative");
    std::fs::create_dir_all(&not_executable).unwrap();
    std::fs::write(not_executable.join("say-where"), "#!/bin/sh\necho plain\n").unwrap();
    let run = |path: OsString| {
        run_command(CommandSpec {
            program: Path::new("say-where"),
            args: &[],
            env: vec![("PATH".into(), path)],
            cwd: &dir.path().join("cwd"),
            stdin: Vec::new(),
            deadline: Duration::from_secs(10),
            grace: Duration::from_millis(200),
            output_bytes: 64,
        })
    };
    let joined = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap();
    // A missing directory and a file that is not executable are passed over.
    let out = run(joined(&[&first, &not_executable, &second])).unwrap();
    assert_eq!(out.stdout, b"second\n");
    script(&first, "first");
    let out = run(joined(&[&first, &second])).unwrap();
    assert_eq!(out.stdout, b"first\n");
    // A relative entry is the child's to search, from its own directory.
    let out = run(joined(&[Path::new("relative"), &first])).unwrap();
    assert_eq!(out.stdout, b"relative\n");
    let missing = run(joined(&[&dir.path().join("none")]));
    assert!(matches!(missing, Err(Error::Spawn { .. })), "{missing:?}");
}
