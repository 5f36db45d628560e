//! The SQLite store: flow executions in one database file, shared by every process on one
//! machine (an MCP server, a CLI, several agents' servers at once).
//!
//! Takes a path (or `$STRATUM_HOME/stratum.db`, by default `~/.stratum/stratum.db`) and
//! [`SqliteOptions`]; gives a [`Store`] whose every [`transact`](Store::transact) runs in two
//! phases. The command runs against a read snapshot (a deferred transaction on a connection
//! of a small pool; WAL readers never wait for writers), so that its evaluation, however slow,
//! holds no lock; then its [`Changes`] are written in one `BEGIN IMMEDIATE` transaction on the
//! writer connection, each flow header by compare-and-set on the version the command read. A
//! header that moved meanwhile (another call, process or CLI got there first) aborts the
//! write, and the command runs again on fresh state: what it answers is always what it
//! committed, and the transaction commits before the caller sees the response. Writers in
//! every process are serialised by SQLite's write lock, held only while rows are written.
//!
//! Invariants:
//! - no flow state is kept between transactions: only plans, immutable and named by their
//!   checksum, are cached in-process (as `Arc<Plan>`), and a plan read from the database is
//!   loaded through [`stratum_compiler::plan::load()`], which verifies its checksum, so that a stored plan
//!   edited by hand is refused ([`StoreError::Corrupt`]) rather than run;
//! - a command writes only the rows it changed, by primary key: a `step_done` costs the same
//!   in a flow of ten steps as in one of ten thousand;
//! - the directory is created `0700` and the database (with its `-wal` and `-shm` files)
//!   is `0600`: results and inputs are the user's alone;
//! - the schema is versioned by `PRAGMA user_version`; a database from a newer program is
//!   refused with [`StoreError::NewerSchema`] and left untouched.
//!
//! The SQL is kept portable (plain tables, `ON CONFLICT … DO UPDATE`, no SQLite-only types)
//! so that a PostgreSQL store can use the same shapes.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

mod drives;
mod sqlite_errors;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Params, Transaction, TransactionBehavior, params,
};
use serde::Serialize;
use serde_json::Value;
use stratum_compiler::plan::Plan;

use crate::sqlite_errors::{cannot_create, failed, opening};
use stratum_runtime::ids::FlowId;
use stratum_runtime::plan_cache::{PlanCache, plan_size};
use stratum_runtime::state::{Checkpoint, Event, EventBody, FlowHeader, StepState};
use stratum_runtime::store::dump::{
    CacheRow, CheckpointRow, DiffRow, Dump, EventRow, FlowColumns, FlowRow, PlanRow, StepRow,
    ensure_empty, header_of,
};
use stratum_runtime::store::rows::{self, decode, load_plan, to_i64};
use stratum_runtime::store::{
    AgentRun, Changes, DiffKey, Drive, Enrolled, FlowChange, Pruned, Release, Session, Snapshot,
    Store, StoreError, Token, prunable,
};

/// The database's file name in the state directory.
pub const DATABASE_FILE: &str = "stratum.db";

/// The schema, one migration per version: migration `n` (from 0) takes `user_version` `n`
/// to `n + 1`. Append only; never edit one that has shipped.
const MIGRATIONS: &[&str] = &[
    // 1: the tables. `flows.seq` is the creation order (for `list_flows` and `children`);
    // the other columns beside `header` copy fields of it for operators' queries.
    "CREATE TABLE plans (
        checksum TEXT PRIMARY KEY,
        json TEXT NOT NULL
    );
    CREATE TABLE flows (
        id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,
        parent TEXT,
        plan TEXT NOT NULL,
        status TEXT NOT NULL,
        flow_name TEXT NOT NULL,
        updated_ms INTEGER NOT NULL,
        version INTEGER NOT NULL,
        header TEXT NOT NULL
    );
    CREATE INDEX flows_parent ON flows (parent, seq);
    CREATE TABLE steps (
        flow TEXT NOT NULL,
        step INTEGER NOT NULL,
        state TEXT NOT NULL,
        PRIMARY KEY (flow, step)
    );
    CREATE TABLE events (
        flow TEXT NOT NULL,
        seq INTEGER NOT NULL,
        round INTEGER NOT NULL,
        reverted INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (flow, seq)
    );
    CREATE TABLE checkpoints (
        flow TEXT NOT NULL,
        label TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (flow, label)
    );
    CREATE TABLE cache (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );",
    // 2: the access tokens of `serve`: the SHA-256 of each secret, never the secret.
    "CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        read_only INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        last_used_ms INTEGER
    );",
    // 3: the browser sessions of `serve`, shared by every process on the database: the
    // SHA-256 of each session's id (the cookie's value), never the id.
    "CREATE TABLE sessions (
        id_hash TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL,
        csrf TEXT NOT NULL,
        expires_ms INTEGER NOT NULL
    );
    CREATE INDEX sessions_expiry ON sessions (expires_ms);
    CREATE INDEX sessions_token ON sessions (token_hash);",
    // 4: a flow's checkpoints are listed in the order their labels were first committed, as
    // the reference lists them. Rows already there were inserted in that order, and an
    // upsert keeps a row's rowid, so the rowid is their position.
    "ALTER TABLE checkpoints ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
    UPDATE checkpoints SET position = rowid;",
    // 5: unattended driving: a drive per enrolled flow (the workers' queue and its lease),
    // and a row per agent process the runtime launched (its event log capped, in `body`).
    "CREATE TABLE drives (
        flow TEXT PRIMARY KEY,
        agent TEXT,
        model TEXT,
        state TEXT NOT NULL,
        owner TEXT,
        expires_ms INTEGER NOT NULL,
        parked_flow TEXT,
        parked_version INTEGER,
        wake_ms INTEGER,
        turn_ms INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        note TEXT
    );
    CREATE INDEX drives_queue ON drives (state, turn_ms);
    CREATE TABLE agent_runs (
        id TEXT PRIMARY KEY,
        flow TEXT,
        status TEXT NOT NULL,
        started_ms INTEGER NOT NULL,
        finished_ms INTEGER,
        body TEXT NOT NULL
    );
    CREATE INDEX agent_runs_flow ON agent_runs (flow, started_ms);",
    // 6: the diffs of fan-out tasks, a row each, written once when the task settles: kept in
    // the step's row they were rewritten with it on every task event.
    "CREATE TABLE task_diffs (
        flow TEXT NOT NULL,
        step TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        task TEXT NOT NULL,
        diff TEXT NOT NULL,
        PRIMARY KEY (flow, step, attempt, task)
    );",
    // 7: secrets the processes on one store share (the key that seals a gate form's
    // `requestState`), made by the first process that needs one.
    "CREATE TABLE secrets (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_ms INTEGER NOT NULL
    );",
];

/// The schema version this program writes (and the newest it reads).
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Enough for every statement the store prepares, so none is prepared twice.
const STATEMENT_CACHE_CAPACITY: usize = 64;

/// What a commit waits for before it returns.
///
/// In WAL mode:
/// - [`Synchronous::Normal`] (the default) writes the commit to the WAL file without waiting
///   for the disk. It survives any crash of the process, `kill -9` included (the operating
///   system has the data), and never corrupts the database; a power loss or kernel crash may
///   lose the last commits before a checkpoint (the database rolls back to an earlier,
///   consistent state: an agent then finds its last acknowledged steps current again).
/// - [`Synchronous::Full`] also waits for the WAL to reach the disk (`fsync`) on every
///   commit: it survives power loss too, at the price of one disk flush per command
///   (measured on a virtual disk, a `step_done` took about 0.27 ms with `FULL` against
///   0.09 ms with `NORMAL` when the disk was quiet, and 3.4 ms against 0.2 ms while other
///   programs were writing to it).
///
/// `Normal` is the default: agents' processes die far more often than machines lose power, and
/// what a power loss takes back (at most the commits since the last checkpoint, which SQLite
/// runs every 1,000 pages of log, a few hundred commands) leaves every flow consistent, as it
/// stood some steps earlier: its agent is told `wrong_step` with the step that is current, or
/// asks `stratum_resume`, and does those steps again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    #[default]
    Normal,
    Full,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// How a [`SqliteStore`] uses its database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    /// How long a command waits for another process's write transaction before it fails.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> SqliteOptions {
        SqliteOptions {
            synchronous: Synchronous::default(),
            busy_timeout: Duration::from_secs(10),
        }
    }
}

/// Flow executions in a SQLite database: a writer connection behind a mutex and a pool of
/// read connections, shared by a server's concurrent calls; each process opens its own.
pub struct SqliteStore {
    path: PathBuf,
    options: SqliteOptions,
    writer: Mutex<Connection>,
    /// Idle read connections; a call takes one (or opens one) and gives it back.
    readers: Mutex<Vec<Connection>>,
    plans: Mutex<PlanCache>,
}

/// How many idle read connections a store keeps.
const IDLE_READERS: usize = 8;

/// How often a command runs again when its flow moved between its read and its write.
const WRITE_ATTEMPTS: usize = 32;

impl SqliteStore {
    /// Opens (creating it if need be) the database at `path`, with the default options.
    /// Missing parent directories are created `0700`.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens the database at [`SqliteStore::default_path`], making its directory `0700`.
    pub fn open_default() -> Result<SqliteStore, StoreError> {
        let path = SqliteStore::default_path()?;
        if let Some(dir) = path.parent() {
            // The state directory is Stratum's own: tightened even when it already existed
            // (an older version may have made it readable by others).
            prepare_dir(dir, true)?;
        }
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// `$STRATUM_HOME/stratum.db`, with `STRATUM_HOME` defaulting to `~/.stratum`.
    pub fn default_path() -> Result<PathBuf, StoreError> {
        let home = std::env::var_os("STRATUM_HOME").filter(|home| !home.is_empty());
        let dir = match home {
            Some(home) => PathBuf::from(home),
            None => std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".stratum"))
                .ok_or_else(|| StoreError::Directory {
                    path: "~/.stratum".to_owned(),
                    reason: "HOME is not set; set STRATUM_HOME to the directory to keep state in"
                        .to_owned(),
                })?,
        };
        Ok(dir.join(DATABASE_FILE))
    }

    /// The schema version of the database at `path`, read without creating, migrating or
    /// writing anything (`stratum-mcp doctor`); `None` when there is no file.
    pub fn stored_schema_version(path: &Path) -> Result<Option<i64>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(failed("open the database read-only"))?;
        user_version(&conn).map(Some)
    }

    /// Opens (creating it if need be) the database at `path`.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            prepare_dir(dir, false)?;
        }
        create_private_file(&path)?;
        let conn = open_connection(&path, &options)?;
        // Refuse a newer database before changing anything in it, its journal mode included.
        check_version(user_version(&conn)?)?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(opening(&path, "switch the database to WAL journal mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Database(format!(
                "cannot switch {} to WAL journal mode (it stays in {mode} mode); keep the state \
                 directory on a local filesystem",
                path.display()
            )));
        }
        migrate(&conn)?;
        restrict_files(&path)?;
        Ok(SqliteStore {
            path,
            options,
            writer: Mutex::new(conn),
            readers: Mutex::new(Vec::new()),
            plans: Mutex::new(PlanCache::default()),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn writer(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a command dropped its transaction, which rolled it back: the
        // connection is usable, so a poisoned lock is taken over rather than refused.
        let conn = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        conn
    }

    /// Runs `work` in a read transaction on a pooled connection.
    fn reading<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let idle = self
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_connection(&self.path, &self.options)?,
        };
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        let outcome = Transaction::new_unchecked(&conn, TransactionBehavior::Deferred)
            .map_err(failed("begin a read transaction"))
            .and_then(|tx| {
                let value = work(&tx)?;
                tx.commit().map_err(failed("end the read transaction"))?;
                Ok(value)
            });
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        if readers.len() < IDLE_READERS {
            readers.push(conn);
        }
        outcome
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction on the writer, committed when it
    /// succeeds.
    fn writing<T>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.writer();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(failed("begin a write transaction"))?;
        let value = work(&tx)?;
        tx.commit().map_err(failed("commit the transaction"))?;
        Ok(value)
    }

    fn cache_plans(&self, plans: &[Arc<Plan>]) {
        // Sized before the lock: measuring a large plan takes a while.
        let sized: Vec<_> = plans.iter().map(|plan| (plan, plan_size(plan))).collect();
        let mut cache = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        for (plan, size) in sized {
            cache.insert(plan.checksum.clone(), plan.clone(), size);
        }
    }
}

/// One connection to the database with the store's settings.
fn open_connection(path: &Path, options: &SqliteOptions) -> Result<Connection, StoreError> {
    // No SQLITE_OPEN_URI: a path is a path, never a `file:` URI with options.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn =
        Connection::open_with_flags(path, flags).map_err(opening(path, "open the database"))?;
    conn.busy_timeout(options.busy_timeout)
        .map_err(opening(path, "set the busy timeout"))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    // The first statement to touch the file: where a database SQLite cannot write, or a
    // damaged one, shows first.
    conn.pragma_update(None, "synchronous", options.synchronous.pragma())
        .map_err(opening(path, "set the synchronous mode"))?;
    Ok(conn)
}

impl Store for SqliteStore {
    fn transact(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<Changes, StoreError>,
    ) -> Result<(), StoreError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let changes = self.reading(|conn| {
                work(&mut Reader {
                    conn,
                    plans: &self.plans,
                })
            })?;
            if changes.is_empty() {
                return Ok(());
            }
            let conn = self.writer();
            let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
                .map_err(failed("begin a write transaction"))?;
            // An error from here on drops `tx`, which rolls the transaction back.
            match write(&tx, &changes) {
                Err(StoreError::Conflict(_)) if attempt < WRITE_ATTEMPTS => continue,
                written => written?,
            }
            tx.commit().map_err(failed("commit the transaction"))?;
            drop(conn);
            // Only plans that are now stored are cached: the cache never knows more than the
            // database.
            self.cache_plans(&changes.plans);
            return Ok(());
        }
    }

    fn read(
        &self,
        work: &mut dyn FnMut(&mut dyn Snapshot) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.reading(|conn| {
            work(&mut Reader {
                conn,
                plans: &self.plans,
            })
        })
    }

    fn list_flows(&self) -> Result<Vec<FlowHeader>, StoreError> {
        let mut headers = self.reading(all_headers)?;
        headers.reverse();
        Ok(headers)
    }

    fn flow_versions(&self) -> Result<Vec<(FlowId, u64)>, StoreError> {
        self.reading(|conn| {
            let mut statement = conn
                .prepare_cached("SELECT id, version FROM flows")
                .map_err(failed("list the flows' versions"))?;
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(failed("list the flows' versions"))?;
            let mut versions = Vec::new();
            for row in rows {
                let (id, version) = row.map_err(failed("list the flows' versions"))?;
                versions.push(rows::flow_version(&id, version)?);
            }
            Ok(versions)
        })
    }

    fn prune(&self, finished_before_ms: u64) -> Result<Pruned, StoreError> {
        let conn = self.writer();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(failed("begin a write transaction"))?;
        // Decided inside the write transaction: no flow can start or move meanwhile.
        let headers = all_headers(&tx)?;
        let doomed = prunable(&headers, finished_before_ms);
        for id in &doomed {
            for table in [
                "DELETE FROM steps WHERE flow = ?1",
                "DELETE FROM events WHERE flow = ?1",
                "DELETE FROM checkpoints WHERE flow = ?1",
                "DELETE FROM task_diffs WHERE flow = ?1",
                "DELETE FROM flows WHERE id = ?1",
            ] {
                tx.prepare_cached(table)
                    .and_then(|mut statement| statement.execute(params![id.as_str()]))
                    .map_err(failed("delete a finished flow"))?;
            }
        }
        let plans = tx
            .execute(
                "DELETE FROM plans WHERE checksum NOT IN (SELECT plan FROM flows)",
                [],
            )
            .map_err(failed("delete the plans no flow runs on"))?;
        drives::prune(&tx, &doomed, finished_before_ms)?;
        tx.commit().map_err(failed("commit the prune"))?;
        Ok(Pruned {
            flows: doomed,
            plans,
        })
    }

    fn export(&self) -> Result<Dump, StoreError> {
        let mut dump = self.reading(export)?;
        dump.sort();
        Ok(dump)
    }

    fn import(&self, dump: &Dump) -> Result<(), StoreError> {
        let conn = self.writer();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(failed("begin a write transaction"))?;
        let (flows, plans): (i64, i64) = tx
            .query_row(
                "SELECT (SELECT COUNT(*) FROM flows), (SELECT COUNT(*) FROM plans)",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(failed("count the flows"))?;
        ensure_empty(flows, plans)?;
        import(&tx, dump)?;
        tx.commit().map_err(failed("commit the copy"))
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn secret(&self, name: &str, fresh: &str) -> Result<String, StoreError> {
        let created_ms = to_i64(wall_clock_ms(), "a time")?;
        let conn = self.writer();
        conn.prepare_cached(
            "INSERT INTO secrets (name, value, created_ms) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .and_then(|mut statement| statement.execute(params![name, fresh, created_ms]))
        .map_err(failed("store a secret"))?;
        conn.prepare_cached("SELECT value FROM secrets WHERE name = ?1")
            .and_then(|mut statement| statement.query_row([name], |row| row.get(0)))
            .map_err(failed("read a secret"))
    }

    fn add_token(&self, token: &Token) -> Result<(), StoreError> {
        let created_ms = to_i64(token.created_ms, "a time")?;
        let conn = self.writer();
        let inserted = conn
            .prepare_cached(
                "INSERT INTO tokens (name, hash, read_only, created_ms, last_used_ms) \
                 VALUES (?1, ?2, ?3, ?4, NULL) ON CONFLICT (name) DO NOTHING",
            )
            .and_then(|mut statement| {
                statement.execute(params![token.name, token.hash, token.read_only, created_ms])
            })
            .map_err(failed("store an access token"))?;
        if inserted == 0 {
            return Err(StoreError::TokenExists(token.name.clone()));
        }
        Ok(())
    }

    fn tokens(&self) -> Result<Vec<Token>, StoreError> {
        self.reading(|conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT name, hash, read_only, created_ms, last_used_ms FROM tokens \
                     ORDER BY name",
                )
                .map_err(failed("list the access tokens"))?;
            let rows = statement
                .query_map([], token_row)
                .map_err(failed("list the access tokens"))?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(failed("list the access tokens"))
        })
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<Token>, StoreError> {
        self.reading(|conn| {
            conn.prepare_cached(
                "SELECT name, hash, read_only, created_ms, last_used_ms FROM tokens \
                 WHERE hash = ?1",
            )
            .and_then(|mut statement| statement.query_row([hash], token_row).optional())
            .map_err(failed("read an access token"))
        })
    }

    fn revoke_token(&self, name: &str) -> Result<bool, StoreError> {
        let conn = self.writer();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(failed("begin a write transaction"))?;
        tx.prepare_cached(
            "DELETE FROM sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE name = ?1)",
        )
        .and_then(|mut statement| statement.execute([name]))
        .map_err(failed("end the sessions of an access token"))?;
        let deleted = tx
            .prepare_cached("DELETE FROM tokens WHERE name = ?1")
            .and_then(|mut statement| statement.execute([name]))
            .map_err(failed("revoke an access token"))?;
        tx.commit().map_err(failed("commit the revocation"))?;
        Ok(deleted > 0)
    }

    fn token_used(&self, hash: &str, at_ms: u64) -> Result<(), StoreError> {
        let at_ms = to_i64(at_ms, "a time")?;
        let conn = self.writer();
        conn.prepare_cached("UPDATE tokens SET last_used_ms = ?1 WHERE hash = ?2")
            .and_then(|mut statement| statement.execute(params![at_ms, hash]))
            .map_err(failed("record an access token's use"))?;
        Ok(())
    }

    fn open_session(
        &self,
        id_hash: &str,
        session: &Session,
        now_ms: u64,
        keep: usize,
    ) -> Result<(), StoreError> {
        let now_ms = to_i64(now_ms, "a time")?;
        let expires_ms = to_i64(session.expires_ms, "a time")?;
        let keep = i64::try_from(keep.max(1)).unwrap_or(i64::MAX);
        let conn = self.writer();
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(failed("begin a write transaction"))?;
        let open = failed("open a browser session");
        tx.prepare_cached("DELETE FROM sessions WHERE expires_ms <= ?1 OR id_hash = ?2")
            .and_then(|mut statement| statement.execute(params![now_ms, id_hash]))
            .map_err(&open)?;
        // Only this token's sessions count, and only they make room.
        let count: i64 = tx
            .prepare_cached("SELECT COUNT(*) FROM sessions WHERE token_hash = ?1")
            .and_then(|mut statement| {
                statement.query_row(params![session.token_hash], |row| row.get(0))
            })
            .map_err(&open)?;
        let excess = count.saturating_add(1).saturating_sub(keep);
        if excess > 0 {
            tx.prepare_cached(
                "DELETE FROM sessions WHERE id_hash IN (SELECT id_hash FROM sessions \
                 WHERE token_hash = ?1 ORDER BY expires_ms, id_hash LIMIT ?2)",
            )
            .and_then(|mut statement| statement.execute(params![session.token_hash, excess]))
            .map_err(&open)?;
        }
        tx.prepare_cached(
            "INSERT INTO sessions (id_hash, token_hash, csrf, expires_ms) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                id_hash,
                session.token_hash,
                session.csrf,
                expires_ms
            ])
        })
        .map_err(&open)?;
        tx.commit().map_err(failed("commit the session"))
    }

    fn session(&self, id_hash: &str, now_ms: u64) -> Result<Option<Session>, StoreError> {
        let now_ms = to_i64(now_ms, "a time")?;
        self.reading(|conn| {
            conn.prepare_cached(
                "SELECT token_hash, csrf, expires_ms FROM sessions \
                 WHERE id_hash = ?1 AND expires_ms > ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_row(params![id_hash, now_ms], session_row)
                    .optional()
            })
            .map_err(failed("read a browser session"))
        })
    }

    fn close_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        let conn = self.writer();
        let deleted = conn
            .prepare_cached("DELETE FROM sessions WHERE id_hash = ?1")
            .and_then(|mut statement| statement.execute([id_hash]))
            .map_err(failed("close a browser session"))?;
        Ok(deleted > 0)
    }

    fn enroll(&self, drive: &Drive) -> Result<Enrolled, StoreError> {
        self.writing(|tx| drives::enroll(tx, drive))
    }

    fn claim(
        &self,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
        only: Option<&FlowId>,
    ) -> Result<Option<Drive>, StoreError> {
        self.writing(|tx| drives::claim(tx, owner, now_ms, lease_ms, only))
    }

    fn renew(
        &self,
        flow: &FlowId,
        owner: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        self.writing(|tx| drives::renew(tx, flow, owner, now_ms, lease_ms))
    }

    fn release(
        &self,
        flow: &FlowId,
        owner: &str,
        release: &Release,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.writing(|tx| drives::release(tx, flow, owner, release, now_ms))
    }

    fn cancel_drive(&self, flow: &FlowId, note: &str) -> Result<Option<Drive>, StoreError> {
        self.writing(|tx| drives::cancel(tx, flow, note))
    }

    fn drive(&self, flow: &FlowId) -> Result<Option<Drive>, StoreError> {
        self.reading(|conn| drives::get_drive(conn, flow))
    }

    fn drives(&self) -> Result<Vec<Drive>, StoreError> {
        self.reading(drives::all_drives)
    }

    fn put_run(&self, run: &AgentRun) -> Result<(), StoreError> {
        self.writing(|tx| drives::put_run(tx, run))
    }

    fn agent_run(&self, id: &str) -> Result<Option<AgentRun>, StoreError> {
        self.reading(|conn| drives::agent_run(conn, id))
    }

    fn agent_runs(&self, flow: Option<&FlowId>, limit: usize) -> Result<Vec<AgentRun>, StoreError> {
        self.reading(|conn| drives::agent_runs(conn, flow, limit))
    }
}

/// Every row, in one read transaction.
fn export(conn: &Connection) -> Result<Dump, StoreError> {
    Ok(Dump {
        plans: collect(conn, "SELECT checksum, json FROM plans", |row| {
            Ok(PlanRow {
                checksum: row.get(0)?,
                json: row.get(1)?,
            })
        })?,
        flows: collect(conn, "SELECT id, seq, header FROM flows", |row| {
            Ok(FlowRow {
                id: row.get(0)?,
                seq: row.get(1)?,
                header: row.get(2)?,
            })
        })?,
        steps: collect(conn, "SELECT flow, step, state FROM steps", |row| {
            Ok(StepRow {
                flow: row.get(0)?,
                step: row.get(1)?,
                state: row.get(2)?,
            })
        })?,
        events: collect(
            conn,
            "SELECT flow, seq, round, reverted, body FROM events",
            |row| {
                Ok(EventRow {
                    flow: row.get(0)?,
                    seq: row.get(1)?,
                    round: row.get(2)?,
                    reverted: row.get(3)?,
                    body: row.get(4)?,
                })
            },
        )?,
        checkpoints: collect(
            conn,
            "SELECT flow, label, position, body FROM checkpoints",
            |row| {
                Ok(CheckpointRow {
                    flow: row.get(0)?,
                    label: row.get(1)?,
                    position: row.get(2)?,
                    body: row.get(3)?,
                })
            },
        )?,
        cache: collect(conn, "SELECT key, value FROM cache", |row| {
            Ok(CacheRow {
                key: row.get(0)?,
                value: row.get(1)?,
            })
        })?,
        diffs: collect(
            conn,
            "SELECT flow, step, attempt, task, diff FROM task_diffs",
            |row| {
                Ok(DiffRow {
                    flow: row.get(0)?,
                    step: row.get(1)?,
                    attempt: row.get(2)?,
                    task: row.get(3)?,
                    diff: row.get(4)?,
                })
            },
        )?,
    })
}

/// Every row `sql` selects, mapped.
fn collect<T>(
    conn: &Connection,
    sql: &str,
    map: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let copy = failed("export the rows");
    let mut statement = conn.prepare(sql).map_err(&copy)?;
    let rows = statement.query_map([], map).map_err(&copy)?;
    rows.collect::<Result<_, _>>().map_err(copy)
}

/// Writes every row of `dump`, in the caller's transaction.
fn import(conn: &Connection, dump: &Dump) -> Result<(), StoreError> {
    let copy = failed("copy a row");
    let run = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
        conn.prepare_cached(sql)
            .and_then(|mut statement| statement.execute(params))
            .map(drop)
            .map_err(&copy)
    };
    for row in &dump.plans {
        run(
            "INSERT INTO plans (checksum, json) VALUES (?1, ?2)",
            &[&row.checksum, &row.json],
        )?;
    }
    for row in &dump.flows {
        let header = header_of(row)?;
        let columns = FlowColumns::of(&header)?;
        run(
            "INSERT INTO flows \
             (id, seq, parent, plan, status, flow_name, updated_ms, version, header) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            &[
                &row.id,
                &row.seq,
                &columns.parent,
                &columns.plan,
                &columns.status,
                &columns.flow_name,
                &columns.updated_ms,
                &columns.version,
                &row.header,
            ],
        )?;
    }
    for row in &dump.steps {
        run(
            "INSERT INTO steps (flow, step, state) VALUES (?1, ?2, ?3)",
            &[&row.flow, &row.step, &row.state],
        )?;
    }
    for row in &dump.events {
        run(
            "INSERT INTO events (flow, seq, round, reverted, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[&row.flow, &row.seq, &row.round, &row.reverted, &row.body],
        )?;
    }
    for row in &dump.checkpoints {
        run(
            "INSERT INTO checkpoints (flow, label, position, body) VALUES (?1, ?2, ?3, ?4)",
            &[&row.flow, &row.label, &row.position, &row.body],
        )?;
    }
    for row in &dump.cache {
        run(
            "INSERT INTO cache (key, value) VALUES (?1, ?2)",
            &[&row.key, &row.value],
        )?;
    }
    for row in &dump.diffs {
        run(
            "INSERT INTO task_diffs (flow, step, attempt, task, diff) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[&row.flow, &row.step, &row.attempt, &row.task, &row.diff],
        )?;
    }
    Ok(())
}

/// A row of `tokens` (name, hash, read_only, created_ms, last_used_ms).
/// A row of `sessions` (token_hash, csrf, expires_ms).
fn session_row(row: &rusqlite::Row) -> rusqlite::Result<Session> {
    let expires_ms: i64 = row.get(2)?;
    Ok(Session {
        token_hash: row.get(0)?,
        csrf: row.get(1)?,
        expires_ms: u64::try_from(expires_ms).map_err(|error| {
            rusqlite::Error::FromSqlConversionFailure(
                2,
                rusqlite::types::Type::Integer,
                Box::new(error),
            )
        })?,
    })
}

fn token_row(row: &rusqlite::Row) -> rusqlite::Result<Token> {
    let time = |index: usize| -> rusqlite::Result<u64> {
        let value: i64 = row.get(index)?;
        u64::try_from(value).map_err(|error| {
            rusqlite::Error::FromSqlConversionFailure(
                index,
                rusqlite::types::Type::Integer,
                Box::new(error),
            )
        })
    };
    Ok(Token {
        name: row.get(0)?,
        hash: row.get(1)?,
        read_only: row.get(2)?,
        created_ms: time(3)?,
        last_used_ms: match row.get::<_, Option<i64>>(4)? {
            Some(_) => Some(time(4)?),
            None => None,
        },
    })
}

/// Every flow's header, oldest first.
fn all_headers(conn: &Connection) -> Result<Vec<FlowHeader>, StoreError> {
    let mut statement = conn
        .prepare_cached("SELECT id, header FROM flows ORDER BY seq")
        .map_err(failed("list the flows"))?;
    let rows = statement
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .map_err(failed("list the flows"))?;
    let mut headers = Vec::new();
    for row in rows {
        let (id, header) = row.map_err(failed("list the flows"))?;
        headers.push(decode::<FlowHeader>(&header, || {
            format!("flow {id}'s header")
        })?);
    }
    Ok(headers)
}

/// The core's view of the database, inside the command's transaction.
struct Reader<'c> {
    conn: &'c Connection,
    plans: &'c Mutex<PlanCache>,
}

impl Reader<'_> {
    /// The text column of the one row `sql` selects, if there is one.
    fn one_text(
        &self,
        sql: &str,
        params: impl Params,
        what: &'static str,
    ) -> Result<Option<String>, StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut statement| statement.query_row(params, |row| row.get(0)).optional())
            .map_err(failed(what))
    }
}

impl Snapshot for Reader<'_> {
    fn plan(&mut self, checksum: &str) -> Result<Option<Arc<Plan>>, StoreError> {
        let cached = self
            .plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(checksum);
        if let Some(plan) = cached {
            return Ok(Some(plan));
        }
        let json = self.one_text(
            "SELECT json FROM plans WHERE checksum = ?1",
            [checksum],
            "read a plan",
        )?;
        let Some(json) = json else {
            return Ok(None);
        };
        let loaded = Arc::new(load_plan(checksum, &json)?);
        let size = json.len();
        self.plans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(checksum.to_owned(), loaded.clone(), size);
        Ok(Some(loaded))
    }

    fn flow(&mut self, id: &FlowId) -> Result<Option<FlowHeader>, StoreError> {
        let row: Option<(String, i64)> = self
            .conn
            .prepare_cached("SELECT header, version FROM flows WHERE id = ?1")
            .and_then(|mut statement| {
                statement
                    .query_row([id.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(failed("read a flow"))?;
        let Some((header, version)) = row else {
            return Ok(None);
        };
        let header: FlowHeader = decode(&header, || format!("flow {id}'s header"))?;
        // The version column is what the compare-and-set checks: it must be the header's.
        if header.id != *id || i64::try_from(header.version).ok() != Some(version) {
            return Err(StoreError::Corrupt(format!(
                "flow {id}'s row disagrees with its header (id {}, version {} against {version})",
                header.id, header.version
            )));
        }
        Ok(Some(header))
    }

    fn step(&mut self, id: &FlowId, step: u32) -> Result<Option<StepState>, StoreError> {
        let state = self.one_text(
            "SELECT state FROM steps WHERE flow = ?1 AND step = ?2",
            params![id.as_str(), step],
            "read a step",
        )?;
        state
            .map(|state| decode(&state, || format!("step {step} of flow {id}")))
            .transpose()
    }

    fn steps_from(&mut self, id: &FlowId, from: u32) -> Result<Vec<(u32, StepState)>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT step, state FROM steps WHERE flow = ?1 AND step >= ?2 ORDER BY step",
            )
            .map_err(failed("read the steps"))?;
        let rows = statement
            .query_map(params![id.as_str(), from], |row| {
                Ok((row.get::<_, u32>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(failed("read the steps"))?;
        let mut steps = Vec::new();
        for row in rows {
            let (step, state) = row.map_err(failed("read the steps"))?;
            steps.push((
                step,
                decode(&state, || format!("step {step} of flow {id}"))?,
            ));
        }
        Ok(steps)
    }

    fn events(&mut self, id: &FlowId) -> Result<Vec<Event>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT seq, round, reverted, body FROM events WHERE flow = ?1 ORDER BY seq",
            )
            .map_err(failed("read the events"))?;
        let rows = statement
            .query_map([id.as_str()], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, u32>(1)?,
                    row.get::<_, bool>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(failed("read the events"))?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, round, reverted, body) = row.map_err(failed("read the events"))?;
            let seq = u64::try_from(seq).map_err(|_| {
                StoreError::Corrupt(format!("flow {id} has an event numbered {seq}"))
            })?;
            events.push(Event {
                seq,
                round,
                reverted,
                body: decode::<EventBody>(&body, || format!("event {seq} of flow {id}"))?,
            });
        }
        Ok(events)
    }

    fn children(&mut self, id: &FlowId) -> Result<Vec<FlowId>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT id FROM flows WHERE parent = ?1 ORDER BY seq")
            .map_err(failed("read the child flows"))?;
        let rows = statement
            .query_map([id.as_str()], |row| row.get::<_, String>(0))
            .map_err(failed("read the child flows"))?;
        let mut children = Vec::new();
        for row in rows {
            let child = row.map_err(failed("read the child flows"))?;
            children.push(FlowId::parse(&child).ok_or_else(|| {
                StoreError::Corrupt(format!("flow {id} has a child with the id {child:?}"))
            })?);
        }
        Ok(children)
    }

    fn checkpoint(&mut self, id: &FlowId, label: &str) -> Result<Option<Checkpoint>, StoreError> {
        let body = self.one_text(
            "SELECT body FROM checkpoints WHERE flow = ?1 AND label = ?2",
            params![id.as_str(), label],
            "read a checkpoint",
        )?;
        body.map(|body| decode(&body, || format!("checkpoint {label:?} of flow {id}")))
            .transpose()
    }

    fn checkpoint_labels(&mut self, id: &FlowId) -> Result<Vec<String>, StoreError> {
        // In commit order; labels break ties between rows of an older schema, by their bytes
        // (SQLite's BINARY collation), as every store does.
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT label FROM checkpoints WHERE flow = ?1 ORDER BY position, label",
            )
            .map_err(failed("read the checkpoint labels"))?;
        let rows = statement
            .query_map([id.as_str()], |row| row.get::<_, String>(0))
            .map_err(failed("read the checkpoint labels"))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(failed("read the checkpoint labels"))
    }

    fn cached(&mut self, key: &str) -> Result<Option<Value>, StoreError> {
        let value = self.one_text(
            "SELECT value FROM cache WHERE key = ?1",
            [key],
            "read the result cache",
        )?;
        value
            .map(|value| decode(&value, || format!("the cached result {key}")))
            .transpose()
    }

    fn task_diff(&mut self, id: &FlowId, key: &DiffKey) -> Result<Option<String>, StoreError> {
        self.one_text(
            "SELECT diff FROM task_diffs WHERE flow = ?1 AND step = ?2 AND attempt = ?3 \
             AND task = ?4",
            params![id.as_str(), key.step, key.attempt, key.task],
            "read a task's diff",
        )
    }
}

/// Writes what one command changed, row by row.
fn write(conn: &Connection, changes: &Changes) -> Result<(), StoreError> {
    if let Some(fence) = &changes.fence {
        drives::check_fence(conn, fence)?;
    }
    for plan in &changes.plans {
        conn.prepare_cached(
            "INSERT INTO plans (checksum, json) VALUES (?1, ?2) ON CONFLICT (checksum) DO NOTHING",
        )
        .and_then(|mut statement| statement.execute(params![plan.checksum, plan.to_json(false)]))
        .map_err(failed("store a plan"))?;
    }
    for (id, change) in &changes.flows {
        write_flow(conn, id, change)?;
    }
    for (key, value) in &changes.cache {
        conn.prepare_cached(
            "INSERT INTO cache (key, value) VALUES (?1, ?2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .and_then(|mut statement| statement.execute(params![key, encode(value)?]))
        .map_err(failed("store a cached result"))?;
    }
    Ok(())
}

fn write_flow(conn: &Connection, id: &FlowId, change: &FlowChange) -> Result<(), StoreError> {
    let header = &change.header;
    let json = encode(header).map_err(failed("encode a flow header"))?;
    let parent = header.parent.as_ref().map(|link| link.flow.as_str());
    let version = to_i64(header.version, "a flow version")?;
    let updated_ms = to_i64(header.updated_ms, "a time")?;
    let status = header.status.as_str();
    match change.base_version {
        None => {
            let seq: i64 = conn
                .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM flows")
                .and_then(|mut statement| statement.query_row([], |row| row.get(0)))
                .map_err(failed("number a new flow"))?;
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO flows \
                     (id, seq, parent, plan, status, flow_name, updated_ms, version, header) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        id.as_str(),
                        seq,
                        parent,
                        header.plan,
                        status,
                        header.flow_name,
                        updated_ms,
                        version,
                        json
                    ])
                })
                .map_err(failed("create a flow"))?;
            if inserted == 0 {
                return Err(StoreError::Conflict(id.clone()));
            }
        }
        Some(base) => {
            let base = to_i64(base, "a flow version")?;
            let updated = conn
                .prepare_cached(
                    "UPDATE flows SET parent = ?1, plan = ?2, status = ?3, flow_name = ?4, \
                     updated_ms = ?5, version = ?6, header = ?7 WHERE id = ?8 AND version = ?9",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        parent,
                        header.plan,
                        status,
                        header.flow_name,
                        updated_ms,
                        version,
                        json,
                        id.as_str(),
                        base
                    ])
                })
                .map_err(failed("update a flow"))?;
            // Another writer moved the version on (or the flow is gone): this command's
            // reads are stale, so nothing of it may be written.
            if updated == 0 {
                return Err(StoreError::Conflict(id.clone()));
            }
        }
    }
    if change.replace_steps {
        conn.prepare_cached("DELETE FROM steps WHERE flow = ?1")
            .and_then(|mut statement| statement.execute([id.as_str()]))
            .map_err(failed("clear a flow's steps"))?;
    }
    for (step, state) in &change.steps {
        if state.is_empty() {
            conn.prepare_cached("DELETE FROM steps WHERE flow = ?1 AND step = ?2")
                .and_then(|mut statement| statement.execute(params![id.as_str(), step]))
                .map_err(failed("clear a step"))?;
        } else {
            conn.prepare_cached(
                "INSERT INTO steps (flow, step, state) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (flow, step) DO UPDATE SET state = excluded.state",
            )
            .and_then(|mut statement| statement.execute(params![id.as_str(), step, encode(state)?]))
            .map_err(failed("store a step"))?;
        }
    }
    // Before the new events go in, as the memory store does: the command has already marked
    // its own events.
    if let Some(from) = change.revert_events_from {
        // An event number beyond what a row can hold reverts nothing.
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        conn.prepare_cached("UPDATE events SET reverted = 1 WHERE flow = ?1 AND seq >= ?2")
            .and_then(|mut statement| statement.execute(params![id.as_str(), from]))
            .map_err(failed("revert events"))?;
    }
    for event in &change.events {
        let seq = to_i64(event.seq, "an event number")?;
        conn.prepare_cached(
            "INSERT INTO events (flow, seq, round, reverted, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                id.as_str(),
                seq,
                event.round,
                event.reverted,
                encode(&event.body)?
            ])
        })
        .map_err(failed("append an event"))?;
    }
    for (key, diff) in &change.diffs {
        match diff {
            Some(text) => conn
                .prepare_cached(
                    "INSERT INTO task_diffs (flow, step, attempt, task, diff) \
                     VALUES (?1, ?2, ?3, ?4, ?5) \
                     ON CONFLICT (flow, step, attempt, task) DO UPDATE SET diff = excluded.diff",
                )
                .and_then(|mut statement| {
                    statement.execute(params![id.as_str(), key.step, key.attempt, key.task, text])
                })
                .map_err(failed("store a task's diff"))?,
            None => conn
                .prepare_cached(
                    "DELETE FROM task_diffs WHERE flow = ?1 AND step = ?2 AND attempt = ?3 \
                     AND task = ?4",
                )
                .and_then(|mut statement| {
                    statement.execute(params![id.as_str(), key.step, key.attempt, key.task])
                })
                .map_err(failed("delete a task's diff"))?,
        };
    }
    for checkpoint in &change.checkpoints {
        conn.prepare_cached(
            "INSERT INTO checkpoints (flow, label, position, body) \
             VALUES (?1, ?2, (SELECT COALESCE(MAX(position), 0) + 1 FROM checkpoints \
                              WHERE flow = ?1), ?3) \
             ON CONFLICT (flow, label) DO UPDATE SET body = excluded.body",
        )
        .and_then(|mut statement| {
            statement.execute(params![id.as_str(), checkpoint.label, encode(checkpoint)?])
        })
        .map_err(failed("store a checkpoint"))?;
    }
    Ok(())
}

fn user_version(conn: &Connection) -> Result<i64, StoreError> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(failed("read the schema version"))
}

fn check_version(found: i64) -> Result<(), StoreError> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < 0 {
        return Err(StoreError::Corrupt(format!(
            "the database has schema version {found}"
        )));
    }
    Ok(())
}

/// Brings the schema to [`SCHEMA_VERSION`], every missing migration in one transaction.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    if user_version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
        .map_err(failed("begin the schema migration"))?;
    // Read again under the write lock: another process may have migrated meanwhile.
    let found = user_version(&tx)?;
    check_version(found)?;
    let done = usize::try_from(found).unwrap_or(usize::MAX);
    for (number, sql) in MIGRATIONS.iter().enumerate().skip(done) {
        tx.execute_batch(sql).map_err(|error| {
            StoreError::Database(format!(
                "cannot migrate the schema to version {}: {error}",
                number + 1
            ))
        })?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(failed("record the schema version"))?;
    tx.commit().map_err(failed("commit the schema migration"))
}

/// Creates `dir` (and its missing parents) `0700`; `tighten` also makes an existing `dir`
/// `0700`.
fn prepare_dir(dir: &Path, tighten: bool) -> Result<(), StoreError> {
    let refuse = |reason: String| StoreError::Directory {
        path: dir.display().to_string(),
        reason,
    };
    let existed = dir.is_dir();
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|error| refuse(error.to_string()))?;
    if !existed || tighten {
        // The mode given to `create` is narrowed by the umask, never widened; set it anyway
        // so that it is exactly 0700.
        set_mode(dir, 0o700).map_err(|error| refuse(format!("cannot make it private: {error}")))?;
    }
    Ok(())
}

/// Creates the database file `0600` before SQLite does, so that it is never readable by
/// others, not even for a moment.
fn create_private_file(path: &Path) -> Result<(), StoreError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map(drop)
        .map_err(|error| cannot_create(path, &error))
}

/// Makes the database and its `-wal` and `-shm` files (SQLite gives them the database's
/// mode when it creates them again) `0600`.
fn restrict_files(path: &Path) -> Result<(), StoreError> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    for file in files {
        if file.exists() {
            set_mode(&file, 0o600).map_err(|error| {
                StoreError::Database(format!("cannot make {} private: {error}", file.display()))
            })?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// [`rows::encode`], as the error a SQLite parameter gives.
fn encode(value: &impl Serialize) -> Result<String, rusqlite::Error> {
    rows::encode(value).map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))
}

/// Now, in milliseconds since the Unix epoch (0 before it: a clock that wrong only dates a row).
fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
