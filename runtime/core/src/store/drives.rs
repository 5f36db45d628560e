//! Unattended driving, as stored: a [`Drive`] per flow the runtime drives itself (the queue
//! workers take flows from, and the lease that makes one of them the flow's only driver), and
//! an [`AgentRun`] per agent process the runtime launched.
//!
//! A lease is a fence, not a lock held in memory: every command a driver sends names it (the
//! [`Context`](crate::Context)'s `driver`), and the store refuses, inside the command's own
//! transaction, a change to a flow whose live lease another owner holds
//! ([`StoreError::Leased`](super::StoreError::Leased)). A driver that stalled past its lease
//! and lost the flow to another therefore cannot apply a late result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::FlowId;

/// A flow enrolled for unattended driving.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Drive {
    /// The top-level flow (a driver drives its sub-flows too).
    pub flow: FlowId,
    /// The connector of steps that name no `agent` (`claude`, `codex`, `opencode`).
    pub agent: Option<String>,
    /// The model passed to the connector when the step names none.
    pub model: Option<String>,
    pub state: DriveState,
    /// The driver holding the lease, while one does.
    pub owner: Option<String>,
    /// Wall-clock milliseconds; the lease is void from then on, and any driver may claim the
    /// flow.
    pub expires_ms: u64,
    /// Parked at a gate: the flow (this one or a sub-flow) and the version it was parked at.
    /// The flow is not claimable until that flow's version changes (a person decided) or
    /// `wake_ms` passes (the gate's timeout).
    pub parked: Option<Parked>,
    /// When the flow was last claimed or enrolled: workers take the longest-waiting first.
    pub turn_ms: u64,
    pub created_ms: u64,
    /// Why the drive stopped (`complete`, `killed`, `handoff:iteration`, …).
    pub note: Option<String>,
}

/// Where a parked drive waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parked {
    pub flow: FlowId,
    pub version: u64,
    pub wake_ms: Option<u64>,
}

/// The life of a drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriveState {
    /// Wants a driver (or has one).
    Active,
    /// The flow finished; nothing is left to drive.
    Done,
    /// The driver stopped at something it does not drive (see the note); the flow is the
    /// agent's again.
    Stopped,
    /// An operator or agent cancelled the drive; the flow is the agent's again.
    Cancelled,
}

impl DriveState {
    pub fn as_str(self) -> &'static str {
        match self {
            DriveState::Active => "active",
            DriveState::Done => "done",
            DriveState::Stopped => "stopped",
            DriveState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<DriveState> {
        Some(match text {
            "active" => DriveState::Active,
            "done" => DriveState::Done,
            "stopped" => DriveState::Stopped,
            "cancelled" => DriveState::Cancelled,
            _ => return None,
        })
    }
}

impl Drive {
    /// A new active drive of `flow`, enrolled at `now_ms`.
    pub fn new(flow: FlowId, now_ms: u64) -> Drive {
        Drive {
            flow,
            agent: None,
            model: None,
            state: DriveState::Active,
            owner: None,
            expires_ms: 0,
            parked: None,
            turn_ms: now_ms,
            created_ms: now_ms,
            note: None,
        }
    }

    /// Whether `owner` may not act on the flow at `now_ms`: another driver's lease is live.
    pub fn fences_out(&self, owner: Option<&str>, now_ms: u64) -> bool {
        match &self.owner {
            Some(holder) => self.expires_ms > now_ms && Some(holder.as_str()) != owner,
            None => false,
        }
    }

    /// Whether a driver may claim it at `now_ms`, given the version of the flow it is parked
    /// on (`None` when it is not parked or that flow is gone).
    pub fn claimable(&self, now_ms: u64, parked_flow_version: Option<u64>) -> bool {
        let free = self.owner.is_none() || self.expires_ms <= now_ms;
        let awake = match &self.parked {
            None => true,
            Some(parked) => {
                parked_flow_version != Some(parked.version)
                    || parked.wake_ms.is_some_and(|wake| wake <= now_ms)
            }
        };
        self.state == DriveState::Active && free && awake
    }
}

/// What a driver does with a flow it lets go of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// Back in the queue, behind every flow that waited longer (a worker's turn is over).
    Requeue,
    /// Waiting for a person: claimable once the parked flow changes or the wake time passes.
    Park(Parked),
    /// Nothing more to drive: the drive ends in this state, with this note.
    End { state: DriveState, note: String },
}

/// What [`Store::enroll`](super::Store::enroll) found.
#[derive(Clone, Debug, PartialEq)]
pub enum Enrolled {
    /// The flow is now enrolled (new, or an ended drive started again).
    Enrolled(Drive),
    /// It was already enrolled and active.
    AlreadyActive(Drive),
}

/// Applies a release to a stored drive; shared by every store so that they agree.
pub fn released(mut drive: Drive, release: &Release, now_ms: u64) -> Drive {
    drive.owner = None;
    drive.expires_ms = 0;
    match release {
        Release::Requeue => {
            drive.parked = None;
            drive.turn_ms = now_ms;
        }
        Release::Park(parked) => drive.parked = Some(parked.clone()),
        Release::End { state, note } => {
            drive.parked = None;
            drive.state = *state;
            drive.note = Some(note.clone());
        }
    }
    drive
}

/// One agent process the runtime launched (for an unattended step, or `stratum_agent_run`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    /// Minted by the runtime ([`mint_run_id`]): 16 lower-case hex digits.
    pub id: String,
    pub flow: Option<FlowId>,
    pub step: Option<String>,
    /// The step's attempt this run answers (1 for the first).
    pub attempt: Option<u32>,
    /// `claude`, `codex` or `opencode`.
    pub agent: String,
    pub model: Option<String>,
    /// Who launched it: a driver's owner id, or the server's.
    pub owner: String,
    /// The machine it runs on, and its process (the group leader) once it started: with the
    /// start time (clock ticks since boot, from `/proc`), so a recycled pid is never taken
    /// for it.
    pub host: String,
    pub pid: Option<u32>,
    pub process_start: Option<u64>,
    pub started_ms: u64,
    pub deadline_ms: u64,
    pub updated_ms: u64,
    pub finished_ms: Option<u64>,
    pub status: RunStatus,
    /// A one-line explanation of a status other than `answered`.
    pub reason: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Tokens and model as the agent's CLI reported them.
    pub usage: Value,
    /// The JSON object the agent answered with.
    pub result: Option<Value>,
    /// The end of the agent's final text (at most [`TEXT_TAIL_CHARS`]).
    pub text_tail: String,
    /// The end of its standard error.
    pub stderr_tail: String,
    /// The last lines of its event stream (at most [`STORED_EVENT_BYTES`]), and how many
    /// lines and bytes it printed in all.
    pub events: Vec<String>,
    pub events_seen: u64,
    pub bytes_seen: u64,
}

impl AgentRun {
    /// A run about to start: `running`, with no process, result or output yet, and its
    /// deadline `deadline_ms` (set it once known).
    pub fn starting(id: String, agent: &str, owner: &str, host: &str, now_ms: u64) -> AgentRun {
        AgentRun {
            id,
            flow: None,
            step: None,
            attempt: None,
            agent: agent.to_owned(),
            model: None,
            owner: owner.to_owned(),
            host: host.to_owned(),
            pid: None,
            process_start: None,
            started_ms: now_ms,
            deadline_ms: now_ms,
            updated_ms: now_ms,
            finished_ms: None,
            status: RunStatus::Running,
            reason: None,
            exit_code: None,
            signal: None,
            usage: Value::Object(serde_json::Map::new()),
            result: None,
            text_tail: String::new(),
            stderr_tail: String::new(),
            events: Vec::new(),
            events_seen: 0,
            bytes_seen: 0,
        }
    }
}

/// The most characters of an agent's final text a run keeps.
pub const TEXT_TAIL_CHARS: usize = 20_000;

/// The most bytes of event lines a stored run keeps (its last ones): a run's row is read by
/// every console page and poll that shows it, so it stays small whatever the agent printed.
pub const STORED_EVENT_BYTES: usize = 32 * 1024;

/// The last lines of `lines` that fit in [`STORED_EVENT_BYTES`], oldest first.
pub fn stored_events<'l>(lines: impl DoubleEndedIterator<Item = &'l str>) -> Vec<String> {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for line in lines.rev() {
        bytes += line.len();
        if bytes > STORED_EVENT_BYTES {
            break;
        }
        kept.push(line.to_owned());
    }
    kept.reverse();
    kept
}

/// How an agent run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// It ended with a JSON object.
    Answered,
    /// It ended without one.
    NoJson,
    /// Its CLI reported an error.
    AgentError,
    /// It exited abnormally.
    Crashed,
    /// Its deadline passed; its process group was ended.
    TimedOut,
    /// It was cancelled; its process group was ended.
    Cancelled,
    /// Its driver died; the process group was ended by the driver that took the flow over
    /// (or left to its deadline on another machine).
    Abandoned,
    /// The server stopped while it ran and ended it.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Answered => "answered",
            RunStatus::NoJson => "no_json",
            RunStatus::AgentError => "agent_error",
            RunStatus::Crashed => "crashed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Abandoned => "abandoned",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn is_finished(self) -> bool {
        self != RunStatus::Running
    }
}

/// A new run id from 64 bits of `seed`: 16 lower-case hex digits.
pub fn mint_run_id(seed: u128) -> String {
    format!("{:016x}", (seed >> 64) as u64 ^ seed as u64)
}

/// Whether `text` is a run id as [`mint_run_id`] makes them (checked before any lookup).
pub fn is_run_id(text: &str) -> bool {
    text.len() == 16
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// The fence a command's changes carry: the top-level flow they touch, and the driver the
/// command came from (`None`: an agent or a person).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub root: FlowId,
    pub driver: Option<String>,
    pub now_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> FlowId {
        FlowId::derive(1, 0)
    }

    #[test]
    fn a_live_lease_fences_out_everyone_but_its_owner() {
        let mut drive = Drive::new(flow(), 0);
        assert!(!drive.fences_out(None, 10));
        drive.owner = Some("w1".to_owned());
        drive.expires_ms = 100;
        assert!(drive.fences_out(None, 10));
        assert!(drive.fences_out(Some("w2"), 10));
        assert!(!drive.fences_out(Some("w1"), 10));
        assert!(
            !drive.fences_out(None, 100),
            "an expired lease fences nobody"
        );
    }

    #[test]
    fn a_parked_drive_wakes_on_a_new_version_or_its_wake_time() {
        let mut drive = Drive::new(flow(), 0);
        drive.parked = Some(Parked {
            flow: flow(),
            version: 4,
            wake_ms: Some(50),
        });
        assert!(!drive.claimable(10, Some(4)));
        assert!(drive.claimable(10, Some(5)));
        assert!(drive.claimable(50, Some(4)));
        drive.state = DriveState::Done;
        assert!(!drive.claimable(50, Some(5)));
    }

    #[test]
    fn stored_events_keep_the_last_lines_within_the_cap() {
        let long = "x".repeat(STORED_EVENT_BYTES / 2 + 1);
        let lines = ["first", long.as_str(), long.as_str(), "last"];
        assert_eq!(stored_events(lines.into_iter()), [long.as_str(), "last"]);
        assert!(stored_events(std::iter::empty()).is_empty());
    }

    #[test]
    fn run_ids_are_sixteen_hex_digits() {
        let id = mint_run_id(u128::MAX - 7);
        assert!(is_run_id(&id), "{id}");
        for bad in [
            "",
            "../../etc/passwd",
            "ABCDEFABCDEFABCD",
            "0123456789abcde",
        ] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }
}
