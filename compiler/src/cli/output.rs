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

/// Writes `bytes` over the file at `path`, or creates it, as [`write_product`] writes a file,
/// keeping the permissions of the file it replaces; a symbolic link is followed and the file
/// it points at replaced, so the link stays a link. For files people made, such as the specs
/// `stratumc migrate` edits, which may be read-only, executable or linked from elsewhere.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let permissions = std::fs::metadata(&target)
        .ok()
        .map(|metadata| metadata.permissions());
    write_beside(&target, bytes, permissions)
}

fn write_file(path: &Path, text: &str) -> std::io::Result<()> {
    write_beside(path, text.as_bytes(), None)
}

/// Writes beside the target and renames over it, so that a reader never sees half a file and
/// a failed write leaves the previous one in place. `permissions` are set before the bytes are
/// written, so the content is never readable by more people than the old file allowed.
fn write_beside(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} is not a file name", path.display())))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    let result = std::fs::File::create(&temporary)
        .and_then(|mut file| {
            if let Some(permissions) = permissions {
                file.set_permissions(permissions)?;
            }
            file.write_all(bytes)
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.map_err(|error| std::io::Error::other(format!("{}: {error}", path.display())))
}
