//! `file_exists(path)` and `file_contains(path, text)`, confined to the project root.
//!
//! A path resolves against [`Limits::root`]. It is refused (an error naming it) when it leaves
//! the root: an absolute path outside it, `..` climbing above it, or a symbolic link on the way
//! that resolves outside it (the deepest existing ancestor of the path is canonicalised and
//! must stay under the canonical root, so a link out is refused whether or not its target
//! exists). `..` is resolved lexically, before any link is followed. `file_contains` never
//! reads more than [`Limits::max_file_bytes`]: a larger file is simply not searched (False, as
//! in the reference), and the read itself is capped.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::eval_error::EvalErrorKind;
use crate::limits::Limits;
use crate::value::{Fault, Meter, Res};

fn file_fault(message: String) -> Fault {
    Fault::msg(EvalErrorKind::File, message)
}

/// The canonical path that `path` names under the root, or `None` when nothing exists there.
pub(crate) fn resolve(limits: &Limits, path: &str) -> Res<Option<PathBuf>> {
    let Some(root) = &limits.root else {
        return Err(file_fault(format!(
            "file built-ins need a project root: cannot look for `{path}`"
        )));
    };
    let canonical_root = root.canonicalize().map_err(|error| {
        file_fault(format!(
            "the project root `{}` cannot be resolved: {error}",
            root.display()
        ))
    })?;
    let given = Path::new(path);
    let relative = if given.is_absolute() {
        match given
            .strip_prefix(root)
            .or_else(|_| given.strip_prefix(&canonical_root))
        {
            Ok(relative) => relative,
            Err(_) => {
                return Err(file_fault(format!(
                    "path `{path}` is outside the project root"
                )));
            }
        }
    } else {
        given
    };
    let mut normal = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => normal.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(file_fault(format!(
                        "path `{path}` escapes the project root"
                    )));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(file_fault(format!(
                    "path `{path}` is outside the project root"
                )));
            }
        }
    }
    let candidate = canonical_root.join(&normal);
    for ancestor in candidate.ancestors() {
        let Ok(real) = ancestor.canonicalize() else {
            continue;
        };
        if !real.starts_with(&canonical_root) {
            return Err(file_fault(format!(
                "path `{path}` leads outside the project root through a symbolic link"
            )));
        }
        return Ok((ancestor == candidate).then_some(real));
    }
    Ok(None)
}

/// `file_exists(path)`: a regular file exists at `path`.
pub(crate) fn file_exists(limits: &Limits, path: &str) -> Res<bool> {
    Ok(resolve(limits, path)?
        .and_then(|real| fs::metadata(real).ok())
        .is_some_and(|meta| meta.is_file()))
}

/// `file_contains(path, needle)`: `path` is a regular file of at most `max_file_bytes` whose
/// text (UTF-8, invalid bytes replaced) contains `needle`.
pub(crate) fn file_contains(
    limits: &Limits,
    path: &str,
    needle: &str,
    meter: &mut Meter,
) -> Res<bool> {
    let Some(real) = resolve(limits, path)? else {
        return Ok(false);
    };
    let Ok(meta) = fs::metadata(&real) else {
        return Ok(false);
    };
    if !meta.is_file() || meta.len() > limits.max_file_bytes {
        return Ok(false);
    }
    let Ok(file) = fs::File::open(&real) else {
        return Ok(false);
    };
    let mut bytes = Vec::new();
    // Capped even if the file grew after its size was read.
    if file
        .take(limits.max_file_bytes)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Ok(false);
    }
    meter.charge_bytes(bytes.len())?;
    Ok(String::from_utf8_lossy(&bytes).contains(needle))
}
