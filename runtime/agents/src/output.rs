//! What a run keeps of its output: the last lines of the event log in a ring, the last bytes of
//! stderr, and counters of what was dropped.
//!
//! Invariant: however much an agent prints, a run holds at most `Limits::log_bytes` of events,
//! `Limits::stderr_bytes` of stderr and one line of at most `Limits::line_bytes` being read.
//! Every line is still shown to the event parser before the ring may drop it, so the final
//! event of a 50 MB run is seen.

use std::collections::VecDeque;

use serde::Serialize;

/// The bounds of one run's output. The defaults fit a run row in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The event log kept: the last lines whose bytes add up to at most this.
    pub log_bytes: usize,
    /// The stderr tail kept.
    pub stderr_bytes: usize,
    /// The longest stdout line read whole; a longer one is counted and skipped, unparsed.
    /// Claude's lines are at most 1 MiB and Codex's 4 MiB (reference §4).
    pub line_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            log_bytes: 256 * 1024,
            stderr_bytes: 16 * 1024,
            line_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The last lines of a run's stdout, within `Limits::log_bytes`, and what was dropped.
/// Byte counts are of line contents, without their newlines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventLog {
    #[serde(skip)]
    cap: usize,
    lines: VecDeque<String>,
    kept_bytes: usize,
    /// Lines read, oversized ones included.
    pub lines_seen: u64,
    /// Bytes read, oversized lines included.
    pub bytes_seen: u64,
    /// Lines read but no longer (or never) kept.
    pub lines_dropped: u64,
    /// Bytes read but no longer (or never) kept.
    pub bytes_dropped: u64,
    /// Lines over `Limits::line_bytes`: neither parsed nor kept.
    pub lines_oversized: u64,
}

impl EventLog {
    pub fn new(cap: usize) -> Self {
        EventLog {
            cap,
            ..EventLog::default()
        }
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }

    /// The bytes of the kept lines; never more than the cap.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes
    }

    pub(crate) fn push(&mut self, line: String) {
        self.lines_seen += 1;
        self.bytes_seen += line.len() as u64;
        if line.len() > self.cap {
            self.drop_bytes(line.len());
            return;
        }
        while self.kept_bytes + line.len() > self.cap {
            match self.lines.pop_front() {
                Some(old) => {
                    self.kept_bytes -= old.len();
                    self.drop_bytes(old.len());
                }
                None => break,
            }
        }
        self.kept_bytes += line.len();
        self.lines.push_back(line);
    }

    pub(crate) fn push_oversized(&mut self, len: usize) {
        self.lines_seen += 1;
        self.bytes_seen += len as u64;
        self.lines_oversized += 1;
        self.drop_bytes(len);
    }

    fn drop_bytes(&mut self, len: usize) {
        self.lines_dropped += 1;
        self.bytes_dropped += len as u64;
    }
}

/// The last bytes of a stream (stderr), and how many came before them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    cap: usize,
    bytes: VecDeque<u8>,
    /// Bytes read and no longer kept.
    pub bytes_dropped: u64,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            cap,
            ..Tail::default()
        }
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let skip = chunk.len().saturating_sub(self.cap);
        self.bytes_dropped += skip as u64;
        let chunk = chunk.get(skip..).unwrap_or_default();
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.cap);
        self.bytes.drain(..overflow);
        self.bytes_dropped += overflow as u64;
        self.bytes.extend(chunk);
    }

    /// The kept bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.to_bytes()).into_owned()
    }

    /// The kept bytes, exactly as read.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (front, back) = self.bytes.as_slices();
        let mut bytes = Vec::with_capacity(self.bytes.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        bytes
    }

    /// Whether any byte read is no longer kept.
    pub fn truncated(&self) -> bool {
        self.bytes_dropped > 0
    }
}

/// Splits a byte stream into lines without ever holding more than `max` bytes of one line.
#[derive(Debug)]
pub(crate) struct Lines {
    max: usize,
    current: Vec<u8>,
    /// The length of the current line once it went over `max` (its bytes are not kept).
    oversized: Option<usize>,
}

/// One line out of [`Lines`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    Whole(String),
    Oversized(usize),
}

impl Lines {
    pub(crate) fn new(max: usize) -> Self {
        Lines {
            max,
            current: Vec::new(),
            oversized: None,
        }
    }

    /// Feeds a chunk; calls `each` for every line it completes.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], each: &mut dyn FnMut(Line)) {
        while !chunk.is_empty() {
            let (part, rest, complete) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (
                    chunk.get(..at).unwrap_or_default(),
                    chunk.get(at + 1..).unwrap_or_default(),
                    true,
                ),
                None => (chunk, &[][..], false),
            };
            self.take(part);
            if complete {
                each(self.finish_line());
            }
            chunk = rest;
        }
    }

    /// The last line when the stream ends without a newline.
    pub(crate) fn end(&mut self, each: &mut dyn FnMut(Line)) {
        if !self.current.is_empty() || self.oversized.is_some() {
            each(self.finish_line());
        }
    }

    fn take(&mut self, part: &[u8]) {
        if let Some(len) = self.oversized.as_mut() {
            *len += part.len();
        } else if self.current.len() + part.len() > self.max {
            self.oversized = Some(self.current.len() + part.len());
            self.current = Vec::new();
        } else {
            self.current.extend_from_slice(part);
        }
    }

    fn finish_line(&mut self) -> Line {
        match self.oversized.take() {
            Some(len) => Line::Oversized(len),
            None => {
                let mut bytes = std::mem::take(&mut self.current);
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
                Line::Whole(match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_last_lines_within_its_cap() {
        let mut log = EventLog::new(10);
        for line in ["aaaa", "bbbb", "cccc", "dddddddddddd", "ee"] {
            log.push(line.to_owned());
        }
        assert_eq!(
            log.lines().collect::<Vec<_>>(),
            ["bbbb", "cccc", "ee"][..].to_vec()
        );
        assert!(log.kept_bytes() <= 10);
        assert_eq!((log.lines_seen, log.bytes_seen), (5, 26));
        assert_eq!((log.lines_dropped, log.bytes_dropped), (2, 16));
    }

    #[test]
    fn the_tail_keeps_the_last_bytes() {
        let mut tail = Tail::new(4);
        tail.push(b"abc");
        tail.push(b"defghij");
        tail.push(b"k");
        assert_eq!(tail.text(), "hijk");
        assert_eq!(tail.bytes_dropped, 7);
    }

    #[test]
    fn lines_over_the_limit_are_counted_not_kept() {
        let mut lines = Lines::new(4);
        let mut out = Vec::new();
        lines.feed(b"ab\r\nabcdef", &mut |line| out.push(line));
        lines.feed(b"gh\nxy", &mut |line| out.push(line));
        lines.end(&mut |line| out.push(line));
        assert_eq!(
            out,
            vec![
                Line::Whole("ab".into()),
                Line::Oversized(8),
                Line::Whole("xy".into())
            ]
        );
    }
}
