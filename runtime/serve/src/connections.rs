//! The connections `serve` holds, bounded in number and in how long a client may keep one
//! without using it: [`Connections`] is the listener (it accepts a connection only while fewer
//! than `max_connections` are open: the others wait in the kernel's queue, unanswered, until
//! one closes), and each accepted [`Connection`] closes itself when its client is too slow:
//!
//! - a request whose headers are not complete `header_timeout` after its first byte arrived
//!   (a half-sent request; "slowloris");
//! - a connection with no request in progress and nothing sent either way for `idle_timeout`
//!   (a keep-alive left open). A request being answered is never cut, however long it runs:
//!   the timeouts apply only while no request is in progress, which [`track_requests`] tells
//!   the connection. A console event stream sends a keep-alive comment every 15 s, which
//!   counts as activity; an answer the client stops reading counts as idle.
//!
//! Without these a client without any token could hold a descriptor per connection for
//! minutes, and enough of them stop the server from accepting anyone (the descriptor limit).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// How long a request's headers may take to arrive, from their first byte.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may stay open with no request in progress and nothing sent.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How many connections `serve` holds open at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The bounds on connections (the flags `--header-timeout`, `--idle-timeout`,
/// `--max-connections`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The listening socket, accepting at most `max_connections` connections at once.
pub struct Connections {
    listener: TcpListener,
    limits: ConnectionLimits,
    open: Arc<Semaphore>,
}

impl Connections {
    pub fn new(listener: TcpListener, limits: ConnectionLimits) -> Connections {
        Connections {
            listener,
            limits,
            open: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        }
    }
}

impl axum::serve::Listener for Connections {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        // The permit is taken before the connection is accepted, so that beyond the cap the
        // clients wait in the kernel's queue rather than holding a descriptor of ours.
        let Ok(permit) = self.open.clone().acquire_owned().await else {
            // The semaphore is never closed; were it, accept nothing more.
            return std::future::pending().await;
        };
        loop {
            match self.listener.accept().await {
                Ok((stream, address)) => {
                    return (Connection::new(stream, self.limits, permit), address);
                }
                Err(error) => {
                    // As axum's own listener: out of descriptors (or another passing error),
                    // wait a moment instead of spinning.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// What a connection and the requests on it share: whether a request is in progress, and
/// since when the connection has been quiet or a request's headers have been arriving.
#[derive(Debug)]
struct Activity {
    in_progress: usize,
    /// When the last byte was sent either way, or the last request finished.
    quiet_since: Instant,
    /// When the first byte of a request whose headers are not complete yet arrived.
    head_since: Option<Instant>,
    /// The connection's task, waiting to read: woken when a request ends, so that it arms
    /// the idle timer (no timer runs while a request is in progress).
    reader: Option<Waker>,
}

/// A connection's activity, as a request's [`ConnectInfo`] carries it to [`track_requests`].
#[derive(Clone, Debug)]
pub struct ConnectionActivity(Arc<Mutex<Activity>>);

impl ConnectionActivity {
    fn update<T>(&self, change: impl FnOnce(&mut Activity) -> T) -> T {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Connected<IncomingStream<'_, Connections>> for ConnectionActivity {
    fn connect_info(stream: IncomingStream<'_, Connections>) -> ConnectionActivity {
        stream.io().activity.clone()
    }
}

/// Marks a request in progress on its connection from its handler's start to its end (or
/// its cancellation), so that no timeout cuts it.
pub async fn track_requests(request: Request, next: Next) -> Response {
    let activity = request
        .extensions()
        .get::<ConnectInfo<ConnectionActivity>>()
        .map(|ConnectInfo(activity)| activity.clone());
    let Some(activity) = activity else {
        return next.run(request).await;
    };
    activity.update(|activity| {
        activity.in_progress += 1;
        activity.head_since = None;
    });
    let _finished = Finished(activity);
    next.run(request).await
}

/// Ends a request's progress when dropped: when its handler returns or is cancelled.
struct Finished(ConnectionActivity);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.update(|activity| {
            activity.in_progress = activity.in_progress.saturating_sub(1);
            activity.quiet_since = Instant::now();
            if let Some(reader) = activity.reader.take() {
                reader.wake();
            }
        });
    }
}

/// An accepted connection: the socket, with its timeouts, holding its place under the cap
/// until it is dropped.
pub struct Connection {
    stream: TcpStream,
    limits: ConnectionLimits,
    activity: ConnectionActivity,
    timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    fn new(stream: TcpStream, limits: ConnectionLimits, permit: OwnedSemaphorePermit) -> Self {
        let now = Instant::now();
        Connection {
            stream,
            limits,
            activity: ConnectionActivity(Arc::new(Mutex::new(Activity {
                in_progress: 0,
                quiet_since: now,
                head_since: None,
                reader: None,
            }))),
            timer: Box::pin(tokio::time::sleep_until(now + limits.idle_timeout)),
            _permit: permit,
        }
    }

    /// When the connection is closed if nothing happens: none while a request is in
    /// progress.
    fn deadline(&self) -> Option<(Instant, &'static str)> {
        let limits = self.limits;
        self.activity.update(|activity| {
            if activity.in_progress > 0 {
                return None;
            }
            Some(match activity.head_since {
                Some(since) => (
                    since + limits.header_timeout,
                    "the request's headers did not arrive in time",
                ),
                None => (
                    activity.quiet_since + limits.idle_timeout,
                    "the connection stayed idle",
                ),
            })
        })
    }

    /// `Err` once the deadline passed; else arms the timer to wake the reader at it.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some((deadline, why)) = self.deadline() else {
            return Ok(());
        };
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(io::ErrorKind::TimedOut, why)),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let now = Instant::now();
                    self.activity.update(|activity| {
                        activity.quiet_since = now;
                        if activity.in_progress == 0 && activity.head_since.is_none() {
                            activity.head_since = Some(now);
                        }
                    });
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                let waker = cx.waker().clone();
                self.activity
                    .update(|activity| activity.reader = Some(waker));
                match self.check_deadline(cx) {
                    Ok(()) => Poll::Pending,
                    Err(timed_out) => {
                        tracing::debug!("closing a connection: {timed_out}");
                        Poll::Ready(Err(timed_out))
                    }
                }
            }
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, bytes);
        match written {
            Poll::Ready(Ok(n)) if n > 0 => {
                self.activity
                    .update(|activity| activity.quiet_since = Instant::now());
            }
            // A client that stops reading an answer holds the connection as an idle one does.
            Poll::Pending => {
                if let Err(timed_out) = self.check_deadline(cx) {
                    tracing::debug!("closing a connection: {timed_out}");
                    return Poll::Ready(Err(timed_out));
                }
            }
            _ => {}
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
