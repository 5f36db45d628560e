//! Where a command's product goes: standard output, or a file written whole or not at all.

use std::io::Write;
use std::path::Path;

/// Writes `text` to `path`, or to stdout when there is none or it is `-`.
pub fn write_product(path: Option<&Path>, text: &str) -> std::io::Result<()> {
    match path {
        Some(path) if path.as_os_str() != "-" => write_file(path, text),
        _ => print(text),
    }
}

/// Writes `text` to stdout. A reader that closed it early (`stratumc explain | head`) has all
/// it wanted: that is not an error, and the command ends quietly.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
    }
}

/// Writes beside the target and renames over it, so that a reader never sees half a file and
/// a failed write leaves the previous one in place.
fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} is not a file name", path.display())))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    let result = std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(|error| std::io::Error::other(format!("{}: {error}", path.display())))
}
