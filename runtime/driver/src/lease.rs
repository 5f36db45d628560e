//! Keeping a lease: a thread renews it every third of its length while the driver works,
//! and cancels the driver's agent run the moment the lease is lost (taken over after a
//! stall, or the drive cancelled), so that a driver never works on a flow it no longer holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use stratum_runtime::ids::FlowId;
use stratum_runtime::{Store, now_ms};
use tokio_util::sync::CancellationToken;

pub struct LeaseKeeper {
    lost: Arc<AtomicBool>,
    cancel: CancellationToken,
    done: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LeaseKeeper {
    /// Renews `owner`'s lease on `flow` (held until `expires_ms`) every third of `lease`.
    /// The runs it guards are cancelled when it is lost, or when `urgent` is.
    pub fn start(
        store: Arc<dyn Store>,
        flow: FlowId,
        owner: String,
        lease: Duration,
        expires_ms: u64,
        urgent: &CancellationToken,
    ) -> LeaseKeeper {
        let lost = Arc::new(AtomicBool::new(false));
        let cancel = urgent.child_token();
        let (done, stopped) = mpsc::channel::<()>();
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let every = lease / 3;
        let thread = {
            let (lost, cancel) = (lost.clone(), cancel.clone());
            std::thread::spawn(move || {
                let mut held_until = expires_ms;
                loop {
                    match stopped.recv_timeout(every) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let now = now_ms();
                    match store.renew(&flow, &owner, now, lease_ms) {
                        Ok(true) => held_until = now.saturating_add(lease_ms),
                        // A store that cannot be reached: the lease holds until it expires.
                        Err(_) if now < held_until => continue,
                        Ok(false) | Err(_) => {
                            lost.store(true, Ordering::SeqCst);
                            cancel.cancel();
                            return;
                        }
                    }
                }
            })
        };
        LeaseKeeper {
            lost,
            cancel,
            done: Some(done),
            thread: Some(thread),
        }
    }

    /// Whether the lease was lost (the driver must stop without writing).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Cancelled when the lease is lost or the driver must stop now: what the driver's agent
    /// run listens to.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
