//! Workers: threads that take runnable flows from the store's queue, the longest-waiting
//! first, one step per turn (so that every flow gets its turn), and stop gracefully: a stop
//! lets the current agent finish its step, or, when the caller cannot wait, ends it and hands
//! the flow back (`stratum-mcp worker` on SIGTERM, then SIGINT).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use stratum_runtime::now_ms;
use tokio_util::sync::CancellationToken;

use crate::drive::{Ended, Turn};
use crate::{DriveError, Driver};

/// Asks drivers to stop: [`StopSignal::stop`] between steps (the step under way finishes and
/// is reported, then the flow is handed back), [`StopSignal::stop_now`] at once (the agent
/// run under way is ended and the flow handed back; the step runs again elsewhere).
#[derive(Clone, Default)]
pub struct StopSignal {
    requested: Arc<AtomicBool>,
    now: CancellationToken,
}

impl StopSignal {
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    pub fn stop(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }

    pub fn stop_now(&self) {
        self.stop();
        self.now.cancel();
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Cancelled by [`StopSignal::stop_now`].
    pub fn urgent(&self) -> &CancellationToken {
        &self.now
    }

    /// Sleeps up to `duration`, waking early once a stop is requested.
    pub fn sleep(&self, duration: Duration) {
        let until = std::time::Instant::now() + duration;
        while !self.requested() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20).min(duration));
        }
    }
}

/// A pool of driving threads on one store.
pub struct Worker {
    threads: Vec<JoinHandle<WorkerTally>>,
    stop: StopSignal,
}

/// What one worker thread did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerTally {
    pub turns: u64,
    pub finished: u64,
    pub errors: Vec<String>,
}

/// How long an idle worker waits before it looks at the queue again (PostgreSQL wakes it
/// sooner when a flow changes).
const IDLE_WAIT: Duration = Duration::from_millis(250);

impl Worker {
    /// Starts `concurrency` driving threads.
    pub fn start(driver: Driver, concurrency: usize) -> Worker {
        let stop = StopSignal::new();
        let threads = (0..concurrency.max(1))
            .map(|_| {
                let (driver, stop) = (driver.clone(), stop.clone());
                std::thread::spawn(move || work(&driver, &stop))
            })
            .collect();
        Worker { threads, stop }
    }

    pub fn stop_signal(&self) -> &StopSignal {
        &self.stop
    }

    /// Asks every thread to stop after its current step, and waits for them.
    pub fn stop_and_join(self) -> Vec<WorkerTally> {
        self.stop.stop();
        self.threads
            .into_iter()
            .map(|thread| thread.join().unwrap_or_default())
            .collect()
    }
}

fn work(driver: &Driver, stop: &StopSignal) -> WorkerTally {
    let mut tally = WorkerTally::default();
    let store = driver.runtime.store().clone();
    while !stop.requested() {
        let owner = driver.new_owner();
        let claimed = store.claim(&owner, now_ms(), driver.lease_ms(), None);
        let drive = match claimed {
            Ok(Some(drive)) => drive,
            Ok(None) => {
                let _ = store.wait_for_change(IDLE_WAIT);
                stop.sleep(Duration::from_millis(10));
                continue;
            }
            Err(error) => {
                record(&mut tally, &DriveError::from(error));
                stop.sleep(IDLE_WAIT);
                continue;
            }
        };
        tally.turns += 1;
        match driver.drive_claimed(&drive, &owner, Turn::OneStep, stop, &mut ()) {
            Ok(Ended::Finished { .. }) => tally.finished += 1,
            Ok(_) => {}
            Err(error) => {
                record(&mut tally, &error);
                stop.sleep(IDLE_WAIT);
            }
        }
    }
    tally
}

fn record(tally: &mut WorkerTally, error: &DriveError) {
    if tally.errors.len() < 100 {
        tally.errors.push(error.to_string());
    }
}
