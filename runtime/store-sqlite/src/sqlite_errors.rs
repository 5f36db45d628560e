//! What a SQLite failure means for the person running stratum-mcp, for the SQLite store.
//!
//! Takes a `rusqlite::Error` (or the I/O error of creating the database file) and the step
//! that failed; gives a [`StoreError`] that names the cause and what to do, where SQLite's own
//! words name a symptom of the step that happened to fail first: a read-only directory shows
//! as "attempt to write a readonly database" while setting the synchronous mode, a damaged
//! page as "invalid utf-8" while listing tokens.
//!
//! - A damaged database (SQLite finds a malformed page or no database at all, or a column
//!   holds what the store never writes) is [`StoreError::Corrupt`], saying how to check it
//!   (`PRAGMA integrity_check`) and what to do.
//! - A database SQLite cannot write is told apart, while opening, by trying what SQLite needs
//!   in turn: writing the file, then creating a file beside it (its `-wal` and `-shm` files).

use std::fs::OpenOptions;
use std::path::Path;

use rusqlite::ErrorCode;

use stratum_runtime::StoreError;

/// Maps a SQLite error of the step `what` to a [`StoreError`]: damage is
/// [`StoreError::Corrupt`], anything else [`StoreError::Database`].
pub(super) fn failed(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |error| {
        if is_damage(&error) {
            return damaged(None, what, &error);
        }
        StoreError::Database(format!("cannot {what}: {error}"))
    }
}

/// [`failed`] while opening the database at `path`, where a refusal to write is explained by
/// which of the file and its directory cannot be written.
pub(super) fn opening(path: &Path, what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |error| {
        if is_damage(&error) {
            return damaged(Some(path), what, &error);
        }
        if is_refusal_to_write(&error) {
            return StoreError::Database(format!(
                "SQLite cannot write {}: {} (SQLite: {error}, while trying to {what})",
                path.display(),
                why_unwritable(path)
            ));
        }
        StoreError::Database(format!("cannot {what}: {error}"))
    }
}

/// The database file at `path` could not be opened for writing, or created.
pub(super) fn cannot_create(path: &Path, error: &std::io::Error) -> StoreError {
    if path.symlink_metadata().is_ok() {
        return StoreError::Database(format!(
            "cannot open {} for writing: {error}; the state database must be writable by the \
             user running stratum-mcp: check the file's owner and mode (`ls -l`), or choose \
             another file with --db",
            path.display()
        ));
    }
    StoreError::Database(format!(
        "cannot create {}: {error}; its directory must be writable by the user running \
         stratum-mcp, or choose another file with --db",
        path.display()
    ))
}

/// A page SQLite finds malformed, a file that is not a database, or a column that holds what
/// the store never writes (text that is not UTF-8, a value of another type).
fn is_damage(error: &rusqlite::Error) -> bool {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => matches!(
            failure.code,
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase
        ),
        rusqlite::Error::Utf8Error(..)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..) => true,
        _ => false,
    }
}

fn is_refusal_to_write(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _) if matches!(
            failure.code,
            ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied
        )
    )
}

fn damaged(path: Option<&Path>, what: &str, error: &rusqlite::Error) -> StoreError {
    let file = path.map_or_else(|| "STATE.db".to_owned(), |path| path.display().to_string());
    let which = match path {
        Some(_) => String::new(),
        None => " (STATE.db: the --db file, by default ~/.stratum/stratum.db)".to_owned(),
    };
    StoreError::Corrupt(format!(
        "cannot {what} ({error}); check the database file with `sqlite3 {file} 'PRAGMA \
         integrity_check'`{which}, then restore it from a backup, or move it aside and start \
         with an empty one"
    ))
}

/// Which of what SQLite writes is refused: the file, or its directory, where SQLite creates
/// the `-wal` and `-shm` files (and a journal) of a database it opens for writing.
fn why_unwritable(path: &Path) -> String {
    if let Err(error) = OpenOptions::new().write(true).open(path) {
        return format!(
            "the file is not writable by this user ({error}): check its owner and mode \
             (`ls -l`), or choose another file with --db"
        );
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let probe = dir.join(format!(
        ".stratum-probe-{:032x}",
        stratum_runtime::fresh_seed()
    ));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            "the file and its directory are both writable, so something else refuses the \
             writes (a read-only mount, another program holding the database)"
                .to_owned()
        }
        Err(error) => format!(
            "its directory {} is not writable by this user ({error}), and SQLite creates the \
             database's `-wal` and `-shm` files there: make the directory writable, or keep \
             the database in one that is (--db)",
            dir.display()
        ),
    }
}
