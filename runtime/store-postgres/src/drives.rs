//! Unattended drives and agent runs in PostgreSQL (see `stratum_runtime::store::drives`).
//!
//! Workers on many machines claim from one queue with `FOR UPDATE SKIP LOCKED`: a row one
//! worker is claiming is skipped by the others instead of waited for. A command's fence reads
//! its drive `FOR SHARE` inside the command's repeatable-read transaction, so a claim that
//! committed after the command's snapshot makes the command fail as a lost race and run again
//! (where it meets the lease).

use deadpool_postgres::GenericClient;
use deadpool_postgres::Transaction;
use tokio_postgres::Row;

use stratum_runtime::ids::FlowId;
use stratum_runtime::store::drives::released;
use stratum_runtime::store::rows::{decode, encode};
use stratum_runtime::store::{
    AgentRun, Drive, DriveState, Enrolled, Fence, Parked, Release, StoreError,
};

use crate::{failed, get};

/// Milliseconds and versions as `BIGINT` (none comes near `i64::MAX`).
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Every column of `stratum_drives`, in the order [`drive_of`] reads them.
const DRIVE_COLUMNS: &str = "flow, agent, model, state, owner, expires_ms, parked_flow, \
     parked_version, wake_ms, turn_ms, created_ms, note";

fn drive_of(row: &Row) -> Result<Drive, StoreError> {
    let id = |text: String| {
        FlowId::parse(&text)
            .ok_or_else(|| StoreError::Corrupt(format!("a drive names the flow {text:?}")))
    };
    let state: String = get(row, 3)?;
    let parked = match get::<Option<String>>(row, 6)? {
        Some(flow) => Some(Parked {
            flow: id(flow)?,
            version: unsigned(get::<Option<i64>>(row, 7)?.unwrap_or(0)),
            wake_ms: get::<Option<i64>>(row, 8)?.map(unsigned),
        }),
        None => None,
    };
    Ok(Drive {
        flow: id(get(row, 0)?)?,
        agent: get(row, 1)?,
        model: get(row, 2)?,
        state: DriveState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("a drive is in the state {state:?}")))?,
        owner: get(row, 4)?,
        expires_ms: unsigned(get(row, 5)?),
        parked,
        turn_ms: unsigned(get(row, 9)?),
        created_ms: unsigned(get(row, 10)?),
        note: get(row, 11)?,
    })
}

pub(crate) async fn put_drive(
    client: &impl GenericClient,
    drive: &Drive,
) -> Result<(), StoreError> {
    let parked = drive.parked.as_ref();
    let parked_flow = parked.map(|parked| parked.flow.as_str());
    let parked_version = parked.map(|parked| int(parked.version));
    let wake_ms = parked.and_then(|parked| parked.wake_ms).map(int);
    client
        .execute(
            &format!(
                "INSERT INTO stratum_drives ({DRIVE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, \
                 $7, $8, $9, $10, $11, $12) ON CONFLICT (flow) DO UPDATE SET agent = \
                 excluded.agent, model = excluded.model, state = excluded.state, owner = \
                 excluded.owner, expires_ms = excluded.expires_ms, parked_flow = \
                 excluded.parked_flow, parked_version = excluded.parked_version, wake_ms = \
                 excluded.wake_ms, turn_ms = excluded.turn_ms, created_ms = \
                 excluded.created_ms, note = excluded.note"
            ),
            &[
                &drive.flow.as_str(),
                &drive.agent,
                &drive.model,
                &drive.state.as_str(),
                &drive.owner,
                &int(drive.expires_ms),
                &parked_flow,
                &parked_version,
                &wake_ms,
                &int(drive.turn_ms),
                &int(drive.created_ms),
                &drive.note,
            ],
        )
        .await
        .map_err(failed("write a drive"))?;
    Ok(())
}

/// The drive of `flow`, read in `tx` with the row lock `lock` (`FOR SHARE`, `FOR UPDATE`):
/// the query's error (a lost race, for the caller to map), else the drive or why its row
/// cannot be read.
async fn locked_drive(
    tx: &Transaction<'_>,
    flow: &FlowId,
    lock: &str,
) -> Result<Result<Option<Drive>, StoreError>, tokio_postgres::Error> {
    let row = tx
        .query_opt(
            &format!("SELECT {DRIVE_COLUMNS} FROM stratum_drives WHERE flow = $1 {lock}"),
            &[&flow.as_str()],
        )
        .await?;
    Ok(row.as_ref().map(drive_of).transpose())
}

/// [`locked_drive`] under `FOR UPDATE`, its errors as the store's.
async fn drive_for_update(
    tx: &Transaction<'_>,
    flow: &FlowId,
) -> Result<Option<Drive>, StoreError> {
    locked_drive(tx, flow, "FOR UPDATE")
        .await
        .map_err(failed("read a drive"))?
}

pub(crate) async fn read_drive(
    client: &impl GenericClient,
    flow: &FlowId,
) -> Result<Option<Drive>, StoreError> {
    let row = client
        .query_opt(
            &format!("SELECT {DRIVE_COLUMNS} FROM stratum_drives WHERE flow = $1"),
            &[&flow.as_str()],
        )
        .await
        .map_err(failed("read a drive"))?;
    row.as_ref().map(drive_of).transpose()
}

pub(crate) async fn all_drives(client: &impl GenericClient) -> Result<Vec<Drive>, StoreError> {
    let rows = client
        .query(
            &format!("SELECT {DRIVE_COLUMNS} FROM stratum_drives ORDER BY created_ms, flow"),
            &[],
        )
        .await
        .map_err(failed("list the drives"))?;
    rows.iter().map(drive_of).collect()
}

/// The fence of a command's changes, read `FOR SHARE` in its transaction: the row error (a
/// serialization failure when a claim committed after the snapshot) is the caller's to map.
pub(crate) async fn check_fence(
    tx: &Transaction<'_>,
    fence: &Fence,
) -> Result<Result<(), StoreError>, tokio_postgres::Error> {
    let drive = match locked_drive(tx, &fence.root, "FOR SHARE").await? {
        Ok(drive) => drive,
        Err(corrupt) => return Ok(Err(corrupt)),
    };
    Ok(match drive {
        Some(drive) if drive.fences_out(fence.driver.as_deref(), fence.now_ms) => {
            Err(StoreError::Leased {
                flow: fence.root.clone(),
                owner: drive.owner.unwrap_or_default(),
                expires_ms: drive.expires_ms,
            })
        }
        _ => Ok(()),
    })
}

pub(crate) async fn enroll(tx: &Transaction<'_>, drive: &Drive) -> Result<Enrolled, StoreError> {
    let kept = drive_for_update(tx, &drive.flow).await?;
    if let Some(kept) = kept
        && kept.state == DriveState::Active
    {
        return Ok(Enrolled::AlreadyActive(kept));
    }
    put_drive(tx, drive).await?;
    Ok(Enrolled::Enrolled(drive.clone()))
}

pub(crate) async fn claim(
    tx: &Transaction<'_>,
    owner: &str,
    now_ms: u64,
    lease_ms: u64,
    only: Option<&FlowId>,
) -> Result<Option<Drive>, StoreError> {
    let only = only.map(FlowId::as_str);
    let row = tx
        .query_opt(
            &format!(
                "SELECT {DRIVE_COLUMNS} FROM stratum_drives d WHERE d.state = 'active' \
                 AND (d.owner IS NULL OR d.expires_ms <= $1) \
                 AND ($2::TEXT IS NULL OR d.flow = $2) \
                 AND (d.parked_flow IS NULL \
                      OR (d.wake_ms IS NOT NULL AND d.wake_ms <= $1) \
                      OR d.parked_version IS DISTINCT FROM \
                         (SELECT f.version FROM stratum_flows f WHERE f.id = d.parked_flow)) \
                 ORDER BY d.turn_ms, d.flow LIMIT 1 FOR UPDATE OF d SKIP LOCKED"
            ),
            &[&int(now_ms), &only],
        )
        .await
        .map_err(failed("find a flow to drive"))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let mut drive = drive_of(&row)?;
    drive.owner = Some(owner.to_owned());
    drive.expires_ms = now_ms.saturating_add(lease_ms);
    drive.parked = None;
    drive.turn_ms = now_ms;
    put_drive(tx, &drive).await?;
    Ok(Some(drive))
}

pub(crate) async fn renew(
    client: &impl GenericClient,
    flow: &FlowId,
    owner: &str,
    now_ms: u64,
    lease_ms: u64,
) -> Result<bool, StoreError> {
    let changed = client
        .execute(
            "UPDATE stratum_drives SET expires_ms = $1 WHERE flow = $2 AND owner = $3 \
             AND state = 'active'",
            &[
                &int(now_ms.saturating_add(lease_ms)),
                &flow.as_str(),
                &owner,
            ],
        )
        .await
        .map_err(failed("renew a lease"))?;
    Ok(changed == 1)
}

pub(crate) async fn release(
    tx: &Transaction<'_>,
    flow: &FlowId,
    owner: &str,
    release: &Release,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let drive = drive_for_update(tx, flow).await?;
    match drive {
        Some(drive) if drive.owner.as_deref() == Some(owner) => {
            put_drive(tx, &released(drive, release, now_ms)).await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

pub(crate) async fn cancel(
    tx: &Transaction<'_>,
    flow: &FlowId,
    note: &str,
) -> Result<Option<Drive>, StoreError> {
    let before = drive_for_update(tx, flow).await?;
    let Some(before) = before else {
        return Ok(None);
    };
    if before.state == DriveState::Active {
        let mut cancelled = before.clone();
        cancelled.state = DriveState::Cancelled;
        cancelled.note = Some(note.to_owned());
        cancelled.parked = None;
        put_drive(tx, &cancelled).await?;
    }
    Ok(Some(before))
}

pub(crate) async fn put_run(client: &impl GenericClient, run: &AgentRun) -> Result<(), StoreError> {
    let body = encode(run)?;
    client
        .execute(
            "INSERT INTO stratum_agent_runs (id, flow, status, started_ms, finished_ms, body) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET status = \
             excluded.status, finished_ms = excluded.finished_ms, body = excluded.body",
            &[
                &run.id,
                &run.flow.as_ref().map(FlowId::as_str),
                &run.status.as_str(),
                &int(run.started_ms),
                &run.finished_ms.map(int),
                &body,
            ],
        )
        .await
        .map_err(failed("write an agent run"))?;
    Ok(())
}

fn run_of(row: &Row) -> Result<AgentRun, StoreError> {
    let body: String = get(row, 0)?;
    decode(&body, || "an agent run".to_owned())
}

pub(crate) async fn agent_run(
    client: &impl GenericClient,
    id: &str,
) -> Result<Option<AgentRun>, StoreError> {
    let row = client
        .query_opt("SELECT body FROM stratum_agent_runs WHERE id = $1", &[&id])
        .await
        .map_err(failed("read an agent run"))?;
    row.as_ref().map(run_of).transpose()
}

pub(crate) async fn agent_runs(
    client: &impl GenericClient,
    flow: Option<&FlowId>,
    limit: usize,
) -> Result<Vec<AgentRun>, StoreError> {
    let flow = flow.map(FlowId::as_str);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = client
        .query(
            "SELECT body FROM stratum_agent_runs WHERE ($1::TEXT IS NULL OR flow = $1) \
             ORDER BY started_ms DESC, id DESC LIMIT $2",
            &[&flow, &limit],
        )
        .await
        .map_err(failed("list agent runs"))?;
    rows.iter().map(run_of).collect()
}

/// The drives and runs of pruned flows, and runs of no flow that ended before the cut-off.
pub(crate) async fn prune(
    tx: &Transaction<'_>,
    doomed: &[&str],
    finished_before_ms: u64,
) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM stratum_drives WHERE flow = ANY($1)",
        "DELETE FROM stratum_agent_runs WHERE flow = ANY($1)",
    ] {
        tx.execute(sql, &[&doomed])
            .await
            .map_err(failed("delete a pruned flow's drive and runs"))?;
    }
    tx.execute(
        "DELETE FROM stratum_agent_runs WHERE flow IS NULL AND finished_ms < $1",
        &[&int(finished_before_ms)],
    )
    .await
    .map_err(failed("delete old agent runs"))?;
    Ok(())
}
