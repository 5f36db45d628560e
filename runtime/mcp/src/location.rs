//! Where the state is: a SQLite file on this machine, or a PostgreSQL database a team shares.
//! One setting chooses (`--database-url` / `STRATUM_DATABASE_URL`); SQLite stays the default.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use stratum_runtime::{Store, StoreError};
use stratum_store_postgres::PostgresStore;
use stratum_store_sqlite::{SqliteOptions, SqliteStore};

/// A store's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database, by its `postgres://` URL.
    Postgres(String),
}

impl Location {
    /// Reads `postgres://…` / `postgresql://…` (a PostgreSQL URL) or `sqlite:PATH`.
    pub fn parse(text: &str) -> Result<Location, String> {
        let text = text.trim();
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Location::Postgres(text.to_owned()));
        }
        if let Some(path) = text.strip_prefix("sqlite:") {
            // `sqlite:///abs/path` and `sqlite://rel` read as the path after the slashes'
            // scheme part, as in most tools' URLs.
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("`sqlite:` needs a path: sqlite:/path/to/stratum.db".to_owned());
            }
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        Err(format!(
            "{:?} is not a database URL; write postgres://USER@HOST:PORT/DATABASE or \
             sqlite:PATH",
            redact(text)
        ))
    }

    /// Opens the store (a SQLite file is created, a PostgreSQL schema migrated, when need be).
    pub fn open(&self, sqlite: SqliteOptions) -> Result<Arc<dyn Store>, StoreError> {
        Ok(match self {
            Location::Sqlite(path) => Arc::new(SqliteStore::open_with(path, sqlite)?),
            Location::Postgres(url) => Arc::new(PostgresStore::connect(url)?),
        })
    }
}

impl fmt::Display for Location {
    /// The location without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Location::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// `url` with the password of its user part, if any, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{Location, redact};

    #[test]
    fn urls_choose_the_store() {
        assert_eq!(
            Location::parse("postgres://u@h/db"),
            Ok(Location::Postgres("postgres://u@h/db".into()))
        );
        assert_eq!(
            Location::parse("postgresql://h"),
            Ok(Location::Postgres("postgresql://h".into()))
        );
        assert_eq!(
            Location::parse("sqlite:/tmp/s.db"),
            Ok(Location::Sqlite(PathBuf::from("/tmp/s.db")))
        );
        assert_eq!(
            Location::parse("sqlite:///tmp/s.db"),
            Ok(Location::Sqlite(PathBuf::from("/tmp/s.db")))
        );
        assert_eq!(
            Location::parse("sqlite:state.db"),
            Ok(Location::Sqlite(PathBuf::from("state.db")))
        );
        let refused = Location::parse("mysql://u:secret@h/db").expect_err("not a store URL");
        assert!(refused.contains("postgres://"), "{refused}");
        assert!(!refused.contains("secret"), "{refused}");
        assert!(Location::parse("sqlite:").is_err());
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("postgres://ann:s3cr@t@db.example:5432/stratum?sslmode=disable"),
            "postgres://ann:***@db.example:5432/stratum?sslmode=disable"
        );
        assert_eq!(redact("postgres://ann@db/x"), "postgres://ann@db/x");
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        let shown = Location::Postgres("postgres://a:pw@h/d".into()).to_string();
        assert_eq!(shown, "postgres://a:***@h/d");
    }
}
