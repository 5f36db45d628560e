//! `vocabulary_compliance(path, files_changed[, git_fallback[, base]])`: the reference's check
//! that the files a step changed use no alias its vocabulary rejects.
//!
//! Takes the path of a vocabulary file (`contracts/vocabulary.yaml`: canonical names, each with
//! the aliases it rejects and why) and the changed files; gives `True`, or one violation per
//! whole-word use of a rejected alias, in the reference's words and order (file, line, alias in
//! the vocabulary's order, match). This crate knows no YAML: the host reads the vocabulary's
//! text through [`Limits::vocabulary`] (the compiler's reader), and this module does the rest.
//!
//! Every path is confined to [`Limits::root`] as `file_exists`'s is; a file over
//! [`Limits::max_file_bytes`] is skipped, as in the reference; the scan charges the instruction
//! budget per byte. With `git_fallback` and no files given, the changed files come from `git
//! diff --name-only --relative BASE --` and `git ls-files --others --exclude-standard`, run in
//! the root as argument vectors (no shell), each within [`GIT_TIMEOUT`] and [`Limits::
//! max_file_bytes`] of output; `base` may not look like an option.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::eval_error::EvalErrorKind;
use crate::files;
use crate::limits::Limits;

pub use crate::limits::{Canonical, Vocabulary, VocabularyReader};
use crate::value::{Fault, Meter, Res, Val, elements};

/// How long each `git` command of the fallback may run, as in the reference.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(5);

fn vocabulary_fault(message: String) -> Fault {
    Fault::msg(EvalErrorKind::File, message)
}

/// `vocabulary_compliance(path, files_changed, git_fallback=False, base="HEAD")`, with its
/// arguments by position.
pub(crate) fn vocabulary_compliance<'a>(
    args: &[Val<'a>],
    meter: &mut Meter,
    limits: &Limits,
) -> Res<Val<'a>> {
    let name = "vocabulary_compliance";
    let path = match args.first().and_then(Val::as_str) {
        Some(path) => path,
        None => {
            return Err(Fault::type_error(format!(
                "`{name}` needs a `str` path to the vocabulary, not `{}`",
                args.first().map_or("nothing", Val::type_name)
            )));
        }
    };
    let files_changed = args.get(1).cloned().unwrap_or(Val::None);
    let git_fallback = args.get(2).is_some_and(Val::truthy);
    let base = match args.get(3) {
        None => "HEAD",
        Some(value) => match value.as_str() {
            Some(base) => base,
            None => {
                return Err(Fault::type_error(format!(
                    "`{name}` needs a `str` git revision for `base`, not `{}`",
                    value.type_name()
                )));
            }
        },
    };
    // Whatever follows `git diff` as its own argument must not be read as an option.
    if base.is_empty() || base.starts_with('-') || base.contains('\0') {
        return Err(Fault::value_error(format!(
            "`{name}`: the base `{base}` is not a git revision: give a commit, branch or tag \
             (not empty, not starting with `-`)"
        )));
    }

    meter.charge(100)?;
    let Some(vocabulary) = load(limits, path, meter)? else {
        return Ok(Val::Bool(true));
    };

    let listed = if files_changed.truthy() {
        let items = elements(&files_changed, name, meter)?;
        let mut paths = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(path) => paths.push(path.to_owned()),
                None => {
                    return Err(Fault::type_error(format!(
                        "`{name}` needs the changed files as `str` paths: item {index} is a `{}`",
                        item.type_name()
                    )));
                }
            }
        }
        paths
    } else if git_fallback {
        meter.charge(1000)?;
        match changed_files(limits, base)? {
            Some(paths) => paths,
            None => return Ok(Val::Bool(true)),
        }
    } else {
        return Ok(Val::Bool(true));
    };

    // Each file once, by its normalised path; those that are not files are skipped.
    let mut seen: HashSet<String> = HashSet::new();
    let mut scanned: Vec<(String, std::path::PathBuf)> = Vec::new();
    for path in listed {
        meter.charge(100)?;
        let normal = normpath(&path);
        if !seen.insert(normal.clone()) {
            continue;
        }
        if let Some(real) = files::resolve(limits, &normal)?
            && fs::metadata(&real).is_ok_and(|meta| meta.is_file())
        {
            scanned.push((normal, real));
        }
    }

    let aliases: Vec<(&str, &Canonical)> = vocabulary
        .entries
        .iter()
        .flat_map(|canonical| {
            canonical
                .reject
                .iter()
                .map(move |alias| (alias.as_str(), canonical))
        })
        .collect();
    let order: HashMap<&str, usize> = aliases
        .iter()
        .enumerate()
        .map(|(index, (alias, _))| (*alias, index))
        .collect();

    let mut violations: Vec<String> = Vec::new();
    let mut bytes: u128 = 0;
    for (shown, real) in &scanned {
        let Some(text) = read_capped(real, limits.max_file_bytes) else {
            continue;
        };
        meter.charge_bytes(text.len())?;
        for (line_index, line) in split_lines(&text).into_iter().enumerate() {
            let mut found: Vec<usize> = words(line)
                .filter_map(|word| order.get(word).copied())
                .collect();
            // The reference looks for each alias in turn over the line: alias order first.
            found.sort();
            for index in found {
                let Some((alias, canonical)) = aliases.get(index) else {
                    continue;
                };
                let mut message = format!(
                    "vocabulary violation: {shown}:{} uses '{alias}' — canonical is '{}'",
                    line_index + 1,
                    canonical.name
                );
                if !canonical.reason.is_empty() {
                    message.push_str(&format!(" (reason: {})", canonical.reason));
                }
                meter.charge(1)?;
                bytes += message.len() as u128;
                meter.check_size(bytes, "the violations")?;
                violations.push(message);
            }
        }
    }
    if violations.is_empty() {
        Ok(Val::Bool(true))
    } else {
        Err(Fault::violations(violations))
    }
}

/// The vocabulary at `path`, or `None` when there is nothing to check (no file, or no
/// entries). A file that cannot be read or is malformed is a violation, as in the reference.
fn load(limits: &Limits, path: &str, meter: &mut Meter) -> Res<Option<Vocabulary>> {
    let Some(real) = files::resolve(limits, path)? else {
        return Ok(None);
    };
    let Ok(meta) = fs::metadata(&real) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    let cannot_read = |why: String| {
        Fault::violations(vec![format!(
            "vocabulary.yaml malformed: cannot read {path}: {why}"
        )])
    };
    if meta.len() > limits.max_file_bytes {
        return Err(cannot_read(format!(
            "it is larger than {} bytes",
            limits.max_file_bytes
        )));
    }
    let mut bytes = Vec::new();
    fs::File::open(&real)
        .and_then(|file| file.take(limits.max_file_bytes).read_to_end(&mut bytes))
        .map_err(|error| cannot_read(error.to_string()))?;
    meter.charge_bytes(bytes.len())?;
    let text = String::from_utf8(bytes).map_err(|_| cannot_read("it is not UTF-8 text".into()))?;
    let Some(reader) = limits.vocabulary else {
        return Err(vocabulary_fault(format!(
            "`vocabulary_compliance` cannot read the vocabulary `{path}`: this host gives \
             expressions no vocabulary reader"
        )));
    };
    let vocabulary = (reader.0)(&text).map_err(|message| Fault::violations(vec![message]))?;
    Ok((!vocabulary.entries.is_empty()).then_some(vocabulary))
}

/// The text of a regular file of at most `max` bytes (invalid UTF-8 replaced), or `None`.
fn read_capped(path: &Path, max: u64) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    let mut bytes = Vec::new();
    // Capped even if the file grew after its size was read.
    fs::File::open(path)
        .ok()?
        .take(max)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Python's `os.path.normpath` on a POSIX path: `.` and empty parts dropped, `..` resolved
/// lexically (kept at the start of a relative path), `.` for nothing.
pub(crate) fn normpath(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Python's `str.splitlines()`: the line breaks it knows, `\r\n` as one.
pub(crate) fn split_lines(text: &str) -> Vec<&str> {
    let is_break = |c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    };
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !is_break(c) {
            continue;
        }
        lines.push(text.get(start..at).unwrap_or(""));
        start = at + c.len_utf8();
        if c == '\r'
            && let Some((next, '\n')) = chars.peek().copied()
        {
            chars.next();
            start = next + 1;
        }
    }
    if start < text.len() {
        lines.push(text.get(start..).unwrap_or(""));
    }
    lines
}

/// The words of a line: maximal runs of word characters (letters, digits, `_`), as Python's
/// `\b` sees them. An alias (an identifier) matches `\balias\b` exactly where it is a word.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c == '_' || c.is_alphanumeric()))
        .filter(|word| !word.is_empty())
}

/// The changed files by git, as the reference's fallback finds them: `None` when git fails
/// (not a repository, an unknown base, no git, a timeout), which checks nothing.
fn changed_files(limits: &Limits, base: &str) -> Res<Option<Vec<String>>> {
    let Some(root) = &limits.root else {
        return Err(vocabulary_fault(format!(
            "file built-ins need a project root: cannot ask git what changed since `{base}`"
        )));
    };
    let max = limits.max_file_bytes;
    let Some(tracked) = git(
        root,
        &["diff", "--name-only", "--relative", base, "--"],
        max,
    ) else {
        return Ok(None);
    };
    let untracked =
        git(root, &["ls-files", "--others", "--exclude-standard"], max).unwrap_or_default();
    let mut seen: HashSet<&str> = HashSet::new();
    Ok(Some(
        tracked
            .lines()
            .chain(untracked.lines())
            .filter(|path| !path.is_empty() && seen.insert(path))
            .map(str::to_owned)
            .collect(),
    ))
}

/// Runs `git ARGS` in `root` (no shell, no input, paths unquoted) and gives its output, or
/// `None` when it fails, outlives [`GIT_TIMEOUT`] or writes more than `max` bytes.
fn git(root: &Path, args: &[&str], max: u64) -> Option<String> {
    let mut child = Command::new("git")
        .args(["-c", "core.quotePath=false"])
        .args(args)
        .current_dir(root)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    // Read while waiting, so that a full pipe cannot stall git until the deadline.
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    });
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let bytes = reader.join().ok()?.ok()?;
    if !status?.success() || bytes.len() as u64 > max {
        return None;
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_as_python_does() {
        assert_eq!(normpath("./src//a.py"), "src/a.py");
        assert_eq!(normpath("src/../b.py"), "b.py");
        assert_eq!(normpath("../x"), "../x");
        assert_eq!(normpath("/a/../../b"), "/b");
        assert_eq!(normpath(""), ".");
    }

    #[test]
    fn lines_split_as_python_splits_them() {
        assert_eq!(split_lines("a\r\nb\rc\n"), vec!["a", "b", "c"]);
        assert_eq!(split_lines("a\n\nb"), vec!["a", "", "b"]);
        assert_eq!(split_lines("a\u{2028}b"), vec!["a", "b"]);
        assert_eq!(split_lines(""), Vec::<&str>::new());
    }

    #[test]
    fn words_are_runs_of_word_characters() {
        let found: Vec<&str> = words("colour_x colour, (colour2) café").collect();
        assert_eq!(found, vec!["colour_x", "colour", "colour2", "café"]);
    }
}
