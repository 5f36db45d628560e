//! Unattended drives and agent runs in SQLite (see `stratum_runtime::store::drives`). A
//! claim, a renewal and a release each run in one `BEGIN IMMEDIATE` transaction: SQLite's
//! write lock makes them atomic across every process on the machine.

use rusqlite::{Connection, OptionalExtension, params};
use stratum_runtime::ids::FlowId;
use stratum_runtime::store::drives::released;
use stratum_runtime::store::rows::decode;
use stratum_runtime::store::{
    AgentRun, Drive, DriveState, Enrolled, Fence, Parked, Release, StoreError,
};

use crate::encode;
use crate::sqlite_errors::failed;

/// Milliseconds and versions as SQLite integers (none comes near `i64::MAX`).
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Every column of `drives`, in the order [`drive_row`] reads them.
const DRIVE_COLUMNS: &str = "flow, agent, model, state, owner, expires_ms, parked_flow, \
     parked_version, wake_ms, turn_ms, created_ms, note";

pub(crate) fn drive_row(row: &rusqlite::Row) -> rusqlite::Result<Drive> {
    let text = |at: usize| row.get::<_, Option<String>>(at);
    let number = |at: usize| -> rusqlite::Result<u64> {
        Ok(u64::try_from(row.get::<_, i64>(at)?).unwrap_or(0))
    };
    let bad = |at: usize, what: String| {
        rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, what.into())
    };
    let flow: String = row.get(0)?;
    let flow = FlowId::parse(&flow).ok_or_else(|| bad(0, format!("bad flow id {flow:?}")))?;
    let state: String = row.get(3)?;
    let state =
        DriveState::parse(&state).ok_or_else(|| bad(3, format!("bad drive state {state:?}")))?;
    let parked = match text(6)? {
        Some(parked_flow) => Some(Parked {
            flow: FlowId::parse(&parked_flow)
                .ok_or_else(|| bad(6, format!("bad flow id {parked_flow:?}")))?,
            version: number(7)?,
            wake_ms: row
                .get::<_, Option<i64>>(8)?
                .map(|wake| u64::try_from(wake).unwrap_or(0)),
        }),
        None => None,
    };
    Ok(Drive {
        flow,
        agent: text(1)?,
        model: text(2)?,
        state,
        owner: text(4)?,
        expires_ms: number(5)?,
        parked,
        turn_ms: number(9)?,
        created_ms: number(10)?,
        note: text(11)?,
    })
}

/// Writes `drive` whole (insert or replace).
pub(crate) fn put_drive(conn: &Connection, drive: &Drive) -> Result<(), StoreError> {
    let parked = drive.parked.as_ref();
    conn.prepare_cached(&format!(
        "INSERT INTO drives ({DRIVE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
         ?11, ?12) ON CONFLICT (flow) DO UPDATE SET agent = excluded.agent, model = \
         excluded.model, state = excluded.state, owner = excluded.owner, expires_ms = \
         excluded.expires_ms, parked_flow = excluded.parked_flow, parked_version = \
         excluded.parked_version, wake_ms = excluded.wake_ms, turn_ms = excluded.turn_ms, \
         created_ms = excluded.created_ms, note = excluded.note"
    ))
    .and_then(|mut statement| {
        statement.execute(params![
            drive.flow.as_str(),
            drive.agent,
            drive.model,
            drive.state.as_str(),
            drive.owner,
            int(drive.expires_ms),
            parked.map(|parked| parked.flow.as_str()),
            parked.map(|parked| int(parked.version)),
            parked.and_then(|parked| parked.wake_ms).map(int),
            int(drive.turn_ms),
            int(drive.created_ms),
            drive.note,
        ])
    })
    .map_err(failed("write a drive"))?;
    Ok(())
}

pub(crate) fn get_drive(conn: &Connection, flow: &FlowId) -> Result<Option<Drive>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {DRIVE_COLUMNS} FROM drives WHERE flow = ?1"
    ))
    .and_then(|mut statement| {
        statement
            .query_row(params![flow.as_str()], drive_row)
            .optional()
    })
    .map_err(failed("read a drive"))
}

pub(crate) fn all_drives(conn: &Connection) -> Result<Vec<Drive>, StoreError> {
    let mut statement = conn
        .prepare_cached(&format!(
            "SELECT {DRIVE_COLUMNS} FROM drives ORDER BY created_ms, flow"
        ))
        .map_err(failed("list the drives"))?;
    let rows = statement
        .query_map([], drive_row)
        .map_err(failed("list the drives"))?;
    rows.collect::<Result<_, _>>()
        .map_err(failed("list the drives"))
}

/// The refusal of a write to a flow tree another driver holds (see `Changes::fence`).
pub(crate) fn check_fence(conn: &Connection, fence: &Fence) -> Result<(), StoreError> {
    match get_drive(conn, &fence.root)? {
        Some(drive) if drive.fences_out(fence.driver.as_deref(), fence.now_ms) => {
            Err(StoreError::Leased {
                flow: fence.root.clone(),
                owner: drive.owner.unwrap_or_default(),
                expires_ms: drive.expires_ms,
            })
        }
        _ => Ok(()),
    }
}

pub(crate) fn enroll(conn: &Connection, drive: &Drive) -> Result<Enrolled, StoreError> {
    if let Some(kept) = get_drive(conn, &drive.flow)?
        && kept.state == DriveState::Active
    {
        return Ok(Enrolled::AlreadyActive(kept));
    }
    put_drive(conn, drive)?;
    Ok(Enrolled::Enrolled(drive.clone()))
}

pub(crate) fn claim(
    conn: &Connection,
    owner: &str,
    now_ms: u64,
    lease_ms: u64,
    only: Option<&FlowId>,
) -> Result<Option<Drive>, StoreError> {
    // The claimable rule of `Drive::claimable`, in SQL, so that a long queue is not read
    // whole; the chosen row is checked by it again below.
    let mut statement = conn
        .prepare_cached(&format!(
            "SELECT {DRIVE_COLUMNS} FROM drives d WHERE d.state = 'active' \
             AND (d.owner IS NULL OR d.expires_ms <= ?1) \
             AND (?2 IS NULL OR d.flow = ?2) \
             AND (d.parked_flow IS NULL \
                  OR (d.wake_ms IS NOT NULL AND d.wake_ms <= ?1) \
                  OR d.parked_version IS NOT \
                     (SELECT f.version FROM flows f WHERE f.id = d.parked_flow)) \
             ORDER BY d.turn_ms, d.flow LIMIT 1"
        ))
        .map_err(failed("find a flow to drive"))?;
    let found = statement
        .query_row(params![int(now_ms), only.map(FlowId::as_str)], drive_row)
        .optional()
        .map_err(failed("find a flow to drive"))?;
    let Some(mut drive) = found else {
        return Ok(None);
    };
    drive.owner = Some(owner.to_owned());
    drive.expires_ms = now_ms.saturating_add(lease_ms);
    drive.parked = None;
    drive.turn_ms = now_ms;
    put_drive(conn, &drive)?;
    Ok(Some(drive))
}

pub(crate) fn renew(
    conn: &Connection,
    flow: &FlowId,
    owner: &str,
    now_ms: u64,
    lease_ms: u64,
) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached(
            "UPDATE drives SET expires_ms = ?1 WHERE flow = ?2 AND owner = ?3 \
             AND state = 'active'",
        )
        .and_then(|mut statement| {
            statement.execute(params![
                int(now_ms.saturating_add(lease_ms)),
                flow.as_str(),
                owner
            ])
        })
        .map_err(failed("renew a lease"))?;
    Ok(changed == 1)
}

pub(crate) fn release(
    conn: &Connection,
    flow: &FlowId,
    owner: &str,
    release: &Release,
    now_ms: u64,
) -> Result<bool, StoreError> {
    match get_drive(conn, flow)? {
        Some(drive) if drive.owner.as_deref() == Some(owner) => {
            put_drive(conn, &released(drive, release, now_ms))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub(crate) fn cancel(
    conn: &Connection,
    flow: &FlowId,
    note: &str,
) -> Result<Option<Drive>, StoreError> {
    let Some(before) = get_drive(conn, flow)? else {
        return Ok(None);
    };
    if before.state == DriveState::Active {
        let mut cancelled = before.clone();
        cancelled.state = DriveState::Cancelled;
        cancelled.note = Some(note.to_owned());
        cancelled.parked = None;
        put_drive(conn, &cancelled)?;
    }
    Ok(Some(before))
}

pub(crate) fn put_run(conn: &Connection, run: &AgentRun) -> Result<(), StoreError> {
    let body = encode(run).map_err(failed("encode an agent run"))?;
    conn.prepare_cached(
        "INSERT INTO agent_runs (id, flow, status, started_ms, finished_ms, body) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE SET status = \
         excluded.status, finished_ms = excluded.finished_ms, body = excluded.body",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            run.id,
            run.flow.as_ref().map(FlowId::as_str),
            run.status.as_str(),
            int(run.started_ms),
            run.finished_ms.map(int),
            body
        ])
    })
    .map_err(failed("write an agent run"))?;
    Ok(())
}

fn run_body(text: String) -> Result<AgentRun, StoreError> {
    decode(&text, || "an agent run".to_owned())
}

pub(crate) fn agent_run(conn: &Connection, id: &str) -> Result<Option<AgentRun>, StoreError> {
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM agent_runs WHERE id = ?1")
        .and_then(|mut statement| {
            statement
                .query_row(params![id], |row| row.get(0))
                .optional()
        })
        .map_err(failed("read an agent run"))?;
    body.map(run_body).transpose()
}

pub(crate) fn agent_runs(
    conn: &Connection,
    flow: Option<&FlowId>,
    limit: usize,
) -> Result<Vec<AgentRun>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT body FROM agent_runs WHERE (?1 IS NULL OR flow = ?1) \
             ORDER BY started_ms DESC, rowid DESC LIMIT ?2",
        )
        .map_err(failed("list agent runs"))?;
    let rows = statement
        .query_map(
            params![
                flow.map(FlowId::as_str),
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |row| row.get::<_, String>(0),
        )
        .map_err(failed("list agent runs"))?;
    let mut runs = Vec::new();
    for row in rows {
        runs.push(run_body(row.map_err(failed("list agent runs"))?)?);
    }
    Ok(runs)
}

/// The drives and runs of pruned flows, and runs of no flow that ended before the cut-off.
pub(crate) fn prune(
    conn: &Connection,
    doomed: &[FlowId],
    finished_before_ms: u64,
) -> Result<(), StoreError> {
    for id in doomed {
        for sql in [
            "DELETE FROM drives WHERE flow = ?1",
            "DELETE FROM agent_runs WHERE flow = ?1",
        ] {
            conn.prepare_cached(sql)
                .and_then(|mut statement| statement.execute(params![id.as_str()]))
                .map_err(failed("delete a pruned flow's drive and runs"))?;
        }
    }
    conn.execute(
        "DELETE FROM agent_runs WHERE flow IS NULL AND finished_ms IS NOT NULL \
         AND finished_ms < ?1",
        params![int(finished_before_ms)],
    )
    .map_err(failed("delete old agent runs"))?;
    Ok(())
}
