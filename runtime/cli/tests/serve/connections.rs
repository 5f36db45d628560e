//! What `serve` does with connections themselves: the addresses it listens on (its own printed
//! URL answered over IPv6), how long a slow or idle client may hold a connection, and how many
//! connections it holds at once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use super::serve::{Serve, State, http};

#[tokio::test]
async fn an_ipv6_loopback_server_answers_its_own_url() {
    // No skip when ::1 is missing: the test fails, saying so (the case is `[::1]`).
    let state = State::new();
    let secret = state.token("alice", false);
    let serve = Serve::start_on(&state, "[::1]:0", &[]);
    assert!(serve.address.is_ipv6(), "{}", serve.address);
    let url = serve.url("/");
    assert!(url.starts_with("http://[::1]:"), "{url}");
    let answer = http().get(&url).bearer_auth(&secret).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK, "{url}");
    // The expanded spelling of the same address is the same host.
    let answer = http()
        .get(&url)
        .bearer_auth(&secret)
        .header(
            "host",
            format!("[0:0:0:0:0:0:0:1]:{}", serve.address.port()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    // Another name is still refused.
    let answer = http()
        .get(&url)
        .bearer_auth(&secret)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
}

/// Reads until the server closes the connection (true) or `wait` passes (false); what came.
fn read_until_closed(stream: &mut TcpStream, wait: Duration) -> (bool, String) {
    let until = Instant::now() + wait;
    let mut reply = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (false, String::from_utf8_lossy(&reply).into_owned());
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return (true, String::from_utf8_lossy(&reply).into_owned()),
            Ok(n) => reply.extend_from_slice(&buffer[..n]),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (false, String::from_utf8_lossy(&reply).into_owned());
            }
            // Reset by the server: closed.
            Err(_) => return (true, String::from_utf8_lossy(&reply).into_owned()),
        }
    }
}

fn connect(address: SocketAddr) -> TcpStream {
    TcpStream::connect(address).unwrap()
}

const SIGNIN: &str = "GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

#[test]
fn a_half_sent_request_is_closed_after_the_header_timeout() {
    let state = State::new();
    let serve = Serve::start(&state, &["--header-timeout", "1", "--idle-timeout", "30"]);
    let mut slow = connect(serve.address);
    let started = Instant::now();
    slow.write_all(b"GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let (closed, reply) = read_until_closed(&mut slow, Duration::from_secs(10));
    let waited = started.elapsed();
    assert!(closed, "still open after {waited:?}: {reply}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "closed after {waited:?}"
    );
    // A client that sends its request in time is answered.
    let mut prompt = connect(serve.address);
    prompt.write_all(SIGNIN.as_bytes()).unwrap();
    let (_, reply) = read_until_closed(&mut prompt, Duration::from_millis(500));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let state = State::new();
    let serve = Serve::start(&state, &["--header-timeout", "30", "--idle-timeout", "1"]);
    let mut idle = connect(serve.address);
    idle.write_all(SIGNIN.as_bytes()).unwrap();
    let started = Instant::now();
    let (closed, reply) = read_until_closed(&mut idle, Duration::from_secs(10));
    let waited = started.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(closed, "still open after {waited:?}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "closed after {waited:?}"
    );
}

#[test]
fn connections_beyond_the_cap_wait_until_one_closes() {
    let state = State::new();
    let serve = Serve::start(&state, &["--max-connections", "1", "--idle-timeout", "30"]);
    let holder = connect(serve.address);
    // Accepted by the kernel, not by the server: no answer while the first one is open.
    let mut waiting = connect(serve.address);
    waiting.write_all(SIGNIN.as_bytes()).unwrap();
    let (closed, reply) = read_until_closed(&mut waiting, Duration::from_secs(1));
    assert!(
        !closed && reply.is_empty(),
        "answered beyond the cap: {reply}"
    );
    drop(holder);
    let (_, reply) = read_until_closed(&mut waiting, Duration::from_secs(5));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}
