//! A call's link back to its client: MCP progress notifications, the client's cancellation,
//! and the peer a call may ask (elicitation). Progress notifications from a long call: a call that waits (a fan-out running on the
//! server, a judge asking agents) tells its client how far it got and that it is alive, so a
//! client that resets its idle timeout on progress (Claude Code does) keeps waiting, and a
//! person sees what happens.
//!
//! A call reports only when its request carried a `progressToken` (`_meta`); the notifications
//! go out from the async side through a channel, so the blocking call that reports never waits
//! on the client. The protocol wants `progress` to increase with every notification, even a
//! heartbeat that has nothing new: a heartbeat adds a fraction, below the next whole step.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken, ProtocolVersion};
use rmcp::service::{Peer, RequestContext};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

/// How often a waiting call says it is alive when nothing changed.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Where one call's progress goes: its client (with the request's token), or nowhere.
#[derive(Default)]
pub struct Progress {
    /// The client, when the server may ask it something during the call (stdio).
    peer: Option<Peer<RoleServer>>,
    /// The request is on 2026-07-28 or later and its client shows forms: the server asks by
    /// answering `input_required` (the multi-round-trip form), on any transport.
    round_trip: bool,
    /// The client's name and version, as the request or the handshake declared them.
    client: Option<String>,
    sink: Option<UnboundedSender<ProgressNotificationParam>>,
    /// The task that sends what `sink` takes, awaited by [`Progress::finish`].
    forwarder: Option<tokio::task::JoinHandle<()>>,
    token: Option<ProgressToken>,
    cancelled: Option<CancellationToken>,
    last: Mutex<Last>,
}

/// What was sent last, so the next value is larger.
#[derive(Default)]
struct Last {
    whole: f64,
    heartbeats: u32,
}

impl Progress {
    /// A call that reports nothing and is never cancelled (the operator CLI, tests).
    pub fn none() -> Progress {
        Progress::default()
    }

    /// The progress of the request `context` belongs to: notifications go to its peer when
    /// the request asked for them, and [`Progress::cancelled`] follows the client's
    /// `notifications/cancelled`.
    pub fn of(context: &RequestContext<RoleServer>) -> Progress {
        let token = context.meta.get_progress_token();
        let (sink, forwarder) = match token {
            Some(_) => forward_to(context.peer.clone()),
            None => (None, None),
        };
        let round_trip = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
            && context
                .client_capabilities()
                .and_then(|capabilities| capabilities.elicitation)
                // A client that names neither mode shows forms (the protocol's default).
                .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
        let client = context
            .client_info()
            .map(|info| format!("{} {}", info.name.trim(), info.version.trim()));
        Progress {
            peer: Some(context.peer.clone()),
            round_trip,
            client,
            sink,
            forwarder,
            token,
            cancelled: Some(context.ct.clone()),
            last: Mutex::default(),
        }
    }

    /// The same, for a transport whose server cannot send the client a request during a call
    /// (stateless HTTP): nothing is asked.
    pub fn without_asking(mut self) -> Progress {
        self.peer = None;
        self
    }

    /// The client to ask, when the transport lets the server ask during the call.
    pub fn peer(&self) -> Option<&Peer<RoleServer>> {
        self.peer.as_ref()
    }

    /// Whether the server asks this request's client with an `input_required` answer (2026-07-28
    /// and later, a client that shows forms) rather than a request during the call.
    pub fn asks_by_round_trip(&self) -> bool {
        self.round_trip
    }

    /// The client's name and version, as it declared them.
    pub fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }

    /// Sends what was reported and not sent yet, so that every notification of a call goes
    /// out before its answer.
    pub async fn finish(mut self) {
        self.sink = None;
        if let Some(forwarder) = self.forwarder.take() {
            let _ = forwarder.await;
        }
    }

    /// Whether the client asked for progress.
    pub fn wanted(&self) -> bool {
        self.sink.is_some()
    }

    /// Whether the client cancelled the request: a waiting call stops waiting.
    pub fn cancelled(&self) -> bool {
        self.cancelled
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// `done` of `total` (when known), with a short message. A value no larger than the last
    /// one is sent as a heartbeat of it.
    pub fn report(&self, done: u64, total: Option<u64>, message: &str) {
        let (Some(sink), Some(token)) = (&self.sink, &self.token) else {
            return;
        };
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let whole = done as f64;
        let progress = if whole > last.whole {
            last.whole = whole;
            last.heartbeats = 0;
            whole
        } else {
            // Always growing, and always below the next whole step.
            last.heartbeats = last.heartbeats.saturating_add(1);
            let beats = f64::from(last.heartbeats);
            last.whole + beats / (beats + 1.0) * 0.999
        };
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        param.total = total.map(|total| total as f64);
        param.message = Some(message.to_owned());
        // The client may be gone: its notification has nowhere to go, and the call goes on.
        let _ = sink.send(param);
    }
}

/// A task that sends what the channel receives to `peer`, in order, until the call's
/// [`Progress`] is finished or dropped; no channel outside a tokio runtime.
#[allow(clippy::type_complexity)]
fn forward_to(
    peer: Peer<RoleServer>,
) -> (
    Option<UnboundedSender<ProgressNotificationParam>>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return (None, None);
    };
    let (sender, mut receiver) = unbounded_channel::<ProgressNotificationParam>();
    let forwarder = runtime.spawn(async move {
        while let Some(param) = receiver.recv().await {
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    });
    (Some(sender), Some(forwarder))
}
