//! `stratum-runtime`: executes compiled Stratum plans for coding agents, durably.
//!
//! The agent does the work of each step; the runtime tells it what to do next, checks what it
//! submits (output schema, contract, guardrails, `ensure`s), retries, routes, waits at gates,
//! runs iterations and sub-flows, keeps checkpoints and budgets, and records an audit trail.
//!
//! The pieces, in the order a command meets them:
//!
//! 1. a [`Command`] (one per MCP tool) and its [`Context`] (time, entropy, settings);
//! 2. [`execute`]: one transaction of a [`Store`] around [`exec::run`], the pure core, which
//!    reads state through a [`Snapshot`](store::Snapshot) and returns [`Changes`](store::Changes);
//! 3. a [`Response`], serialising to the reference server's JSON shapes.
//!
//! [`Runtime`] bundles a store, the settings, a real clock and fresh entropy, for servers.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub mod command;
pub mod compile;
pub mod exec;
pub mod ids;
pub mod plan_cache;
pub mod response;
pub mod state;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

pub use command::{
    Command, Config, Context, GatePolicy, GateRule, ModelPrice, Pricing, TaskReport, Via,
};
pub use ids::FlowId;
pub use response::Response;
pub use store::{MemoryStore, Store, StoreError};

/// Runs one command in one transaction of `store`. The response is returned only after the
/// transaction committed: what it reports is durable.
pub fn execute(
    store: &dyn Store,
    command: &Command,
    ctx: &Context,
) -> Result<Response, StoreError> {
    let mut response = None;
    let outcome = if command.is_read_only() {
        store.read(&mut |snapshot| {
            let mut work = exec::Work::new(snapshot);
            response = Some(exec::run(&mut work, command, ctx)?);
            Ok(())
        })
    } else {
        store.transact(&mut |snapshot| {
            let mut work = exec::Work::new(snapshot);
            response = Some(exec::run(&mut work, command, ctx)?);
            Ok(work.into_changes(ctx.now_ms))
        })
    };
    match outcome {
        Err(StoreError::Leased {
            flow,
            owner,
            expires_ms,
        }) => Ok(leased(command, &flow, &owner, expires_ms, ctx.now_ms)),
        outcome => {
            outcome?;
            response
                .ok_or_else(|| StoreError::Database("the transaction ran no command".to_owned()))
        }
    }
}

/// `flow_leased`: the refusal of a change to a flow an unattended driver holds.
fn leased(command: &Command, root: &FlowId, owner: &str, expires_ms: u64, now_ms: u64) -> Response {
    let seconds = expires_ms.saturating_sub(now_ms).div_ceil(1000);
    let mut error = response::ErrorResponse::new(
        "flow_leased",
        format!(
            "flow {root} is being driven unattended by `{owner}` (its lease runs {seconds} s \
             more unless renewed): that driver reports its steps, so this call changed \
             nothing. Follow it with stratum_flow_bg_poll, decide its gates as usual, or take \
             the flow back with stratum_flow_cancel_bg."
        ),
    );
    error.flow_id = command.flow_id().map(str::to_owned);
    error.into_response()
}

/// Told of every command a [`Runtime`] ran and how it went: what a process measures (its
/// metrics) without the core knowing how they are kept.
pub trait Observer: Send + Sync {
    fn observe(
        &self,
        command: &Command,
        took: std::time::Duration,
        outcome: &Result<Response, StoreError>,
    );
}

/// A store with its settings, a real clock and fresh entropy: what a server holds.
#[derive(Clone)]
pub struct Runtime {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    observer: Option<Arc<dyn Observer>>,
}

impl Runtime {
    pub fn new(store: Arc<dyn Store>, config: Config) -> Runtime {
        Runtime {
            store,
            config: Arc::new(config),
            observer: None,
        }
    }

    /// The same runtime, telling `observer` of every command it runs.
    pub fn observed_by(mut self, observer: Arc<dyn Observer>) -> Runtime {
        self.observer = Some(observer);
        self
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Runs a command now.
    pub fn call(&self, command: &Command) -> Result<Response, StoreError> {
        let ctx = Context::new(now_ms(), fresh_seed(), self.config.clone());
        self.measured(command, || execute(self.store.as_ref(), command, &ctx))
    }

    /// Runs `run` (which executes `command`), telling the observer how long it took.
    fn measured(
        &self,
        command: &Command,
        run: impl FnOnce() -> Result<Response, StoreError>,
    ) -> Result<Response, StoreError> {
        let Some(observer) = &self.observer else {
            return run();
        };
        let started = std::time::Instant::now();
        let outcome = run();
        observer.observe(command, started.elapsed(), &outcome);
        outcome
    }

    /// Runs a command now, sent by the unattended driver `owner` (which holds, or held, the
    /// flow's lease).
    pub fn call_as_driver(&self, command: &Command, owner: &str) -> Result<Response, StoreError> {
        let ctx = Context::new(now_ms(), fresh_seed(), self.config.clone()).driven_by(owner);
        self.measured(command, || execute(self.store.as_ref(), command, &ctx))
    }
}

/// `ms` (Unix milliseconds) as an RFC 3339 UTC time to the second, `2026-11-26T01:41:01Z`.
pub fn utc(ms: u64) -> String {
    let seconds = ms / 1000;
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Howard Hinnant's civil-from-days, for days since 1970-01-01.
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

/// 128 bits no other call (in this process or another) is likely to see: the standard
/// library's per-process random hash keys, the time and a counter.
pub fn fresh_seed() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut halves = [0u64; 2];
    for (salt, half) in halves.iter_mut().enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(count);
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        hasher.write_usize(salt);
        *half = hasher.finish();
    }
    (u128::from(halves[0]) << 64) | u128::from(halves[1])
}
