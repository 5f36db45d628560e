//! Where specs come from: files, directories searched for `*.stratum.yaml`, or stdin.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::input::MAX_FILE_SIZE;

pub enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    pub fn display(&self) -> String {
        match self {
            Input::Stdin => "<stdin>".to_owned(),
            Input::File(path) => path.display().to_string(),
        }
    }
}

/// Files as given, and every `*.stratum.yaml` below the directories given, in sorted order.
pub fn collect_inputs(paths: &[PathBuf]) -> Result<Vec<Input>, String> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut inputs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            inputs.push(Input::Stdin);
            continue;
        }
        let metadata = std::fs::metadata(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        if metadata.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            if found.is_empty() {
                return Err(format!("no *.stratum.yaml files under {}", path.display()));
            }
            found.sort();
            inputs.extend(found.into_iter().map(Input::File));
        } else {
            inputs.push(Input::File(path.clone()));
        }
    }
    Ok(inputs)
}

/// Finds spec files below `dir`, skipping hidden directories, `target` and `node_modules`,
/// and never following symbolic links to directories (so a link cycle cannot trap it).
fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                walk(&path, found)?;
            }
        } else if name.ends_with(".stratum.yaml") && (file_type.is_file() || path.is_file()) {
            found.push(path);
        }
    }
    Ok(())
}

/// Reads at most one byte more than the size limit, so a huge file costs no more than that.
pub fn read_input(input: &Input) -> std::io::Result<Vec<u8>> {
    let limit = MAX_FILE_SIZE as u64 + 1;
    let mut bytes = Vec::new();
    match input {
        Input::Stdin => {
            std::io::stdin()
                .lock()
                .take(limit)
                .read_to_end(&mut bytes)?;
        }
        Input::File(path) => {
            std::fs::File::open(path)?
                .take(limit)
                .read_to_end(&mut bytes)?;
        }
    }
    Ok(bytes)
}

impl Input {
    /// One spec named on the command line: a file, or `-` for stdin.
    pub fn single(path: &Path) -> Input {
        if path.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::File(path.to_path_buf())
        }
    }
}
