//! One stream of an HTTP/2 connection, from its request's HEADERS to its answer's last
//! frame. A stream that is idle or closed is not kept: the connection tells those apart
//! by their identifiers and the few it remembers ([`Closed`]).

use super::frame::{self, ErrorCode, HEAD_LEN};
use super::hpack::RequestHead;
use crate::http::{Method, Pipe, Progress, Request};

/// Streams closed lately that are remembered: frames still in flight on one the server
/// reset are ignored, and HEADERS on one closed otherwise is STREAM_CLOSED rather than a
/// stream identifier never used (RFC 9113, 5.1 and 5.1.1).
const RECENTLY_CLOSED: usize = 32;

/// A complete request handed out, which its stream no longer holds.
pub struct Taken {
    pub stream: u32,
    head: RequestHead,
    pub body: Vec<u8>,
}

impl Taken {
    /// The request as the application reads it.
    pub fn request(&self) -> Request<'_> {
        self.head.request(&self.body)
    }
}

pub struct Stream {
    pub id: u32,
    /// What the peer lets the server send on this stream; negative when the peer lowered
    /// SETTINGS_INITIAL_WINDOW_SIZE below what was already sent (RFC 9113, 6.9.2).
    pub send_window: i64,
    /// What the server lets the peer send and it has not used yet.
    pub recv_window: i64,
    /// When the request's first frame came: it must be all in within the request timeout.
    pub opened: std::time::Instant,
    pub state: State,
}

pub enum State {
    /// The request's head is in and its body is arriving ("open").
    Receiving { head: RequestHead, body: Vec<u8> },
    /// The whole request is in ("half-closed (remote)"), waiting to be handed to the
    /// server.
    Request { head: RequestHead, body: Vec<u8> },
    /// Handed out, waiting for its answer (which has no body if it answers a HEAD).
    Answering { head_only: bool },
    /// The answer's HEADERS are out; its body from `at`, then what comes through its
    /// `pipe` (an upstream's body, as it arrives), and its trailer block wait for
    /// flow-control window or room in the output. `reset_after`: the peer was still sending
    /// when the server answered (413, 431), and is told to stop (RST_STREAM NO_ERROR) once
    /// the answer is out; until then what it sends is dropped.
    Sending {
        data: Vec<u8>,
        at: usize,
        pipe: Option<Pipe>,
        trailers: Vec<u8>,
        reset_after: bool,
    },
}

/// How much of an answer [`Stream::write_answer`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// All of it, trailers included: the stream is done.
    All,
    /// Some is left, waiting for window, room, or more of its piped body.
    Waiting,
    /// Its piped body failed: the stream is reset (INTERNAL_ERROR), not ended.
    Failed,
}

impl Stream {
    /// The request is all in: its body must be as long as it said.
    pub fn complete(&mut self) -> Result<(), ErrorCode> {
        let State::Receiving { head, body } = &mut self.state else {
            return Err(ErrorCode::StreamClosed);
        };
        if head
            .content_length
            .is_some_and(|length| length != body.len() as u64)
        {
            return Err(ErrorCode::Protocol);
        }
        self.state = State::Request {
            head: std::mem::take(head),
            body: std::mem::take(body),
        };
        Ok(())
    }

    /// Hands the request out, if it is complete and not yet handed out: the stream then
    /// waits for its answer.
    pub fn take_request(&mut self) -> Option<Taken> {
        let State::Request { head, .. } = &self.state else {
            return None;
        };
        let head_only = head.method() == Method::Head;
        match std::mem::replace(&mut self.state, State::Answering { head_only }) {
            State::Request { head, body } => Some(Taken {
                stream: self.id,
                head,
                body,
            }),
            _ => None,
        }
    }

    /// Writes what is left of the answer as the windows (the connection's,
    /// `connection_window`, and the stream's) and `room` in the output allow, in frames of
    /// at most `max_frame`: its bytes, then what its pipe holds, as far as it has arrived.
    pub fn write_answer(
        &mut self,
        out: &mut Vec<u8>,
        connection_window: &mut i64,
        max_frame: usize,
        room: usize,
    ) -> Sent {
        let State::Sending {
            data,
            at,
            pipe,
            trailers,
            ..
        } = &mut self.state
        else {
            return Sent::Waiting;
        };
        let (id, before) = (self.id, out.len());
        let windows = (&mut *connection_window, &mut self.send_window);
        let end = trailers.is_empty() && pipe.is_none();
        *at += write_data(out, id, &data[*at..], end, windows, max_frame, room);
        if *at < data.len() {
            return Sent::Waiting;
        }
        if let Some(pipe) = pipe {
            let room = room.saturating_sub(out.len() - before);
            let windows = (connection_window, &mut self.send_window);
            let progress = pipe.take_body(|bytes, last| {
                let end = last && trailers.is_empty();
                if end && bytes.is_empty() {
                    // Nothing left but the end: an empty DATA frame says it.
                    frame::write_data(out, id, &[], true);
                }
                write_data(out, id, bytes, end, windows, max_frame, room)
            });
            match progress {
                Progress::More => return Sent::Waiting,
                Progress::Failed => return Sent::Failed,
                Progress::Whole => {}
            }
        }
        if !trailers.is_empty() {
            frame::write_headers(out, self.id, trailers, true, max_frame);
        }
        Sent::All
    }

    /// The answer's DATA bytes still to write (those its pipe holds too).
    pub fn data_left(&self) -> usize {
        match &self.state {
            State::Sending { data, at, pipe, .. } => {
                data.len() - at + pipe.as_ref().map_or(0, Pipe::waiting)
            }
            _ => 0,
        }
    }

    /// What its answer's pipe holds, if it has one: (the memory, the bytes waiting).
    pub fn piped(&self) -> (usize, usize) {
        match &self.state {
            State::Sending {
                pipe: Some(pipe), ..
            } => (pipe.held(), pipe.waiting()),
            _ => (0, 0),
        }
    }

    /// The bytes this stream holds in its buffers (not its pipe's: [`Stream::piped`]).
    pub fn held(&self) -> usize {
        match &self.state {
            State::Receiving { head, body } | State::Request { head, body, .. } => {
                head.capacity() + body.capacity()
            }
            State::Answering { .. } => 0,
            State::Sending { data, trailers, .. } => data.capacity() + trailers.capacity(),
        }
    }

    /// The request body bytes it holds (what the body budget counts).
    pub fn body_len(&self) -> usize {
        match &self.state {
            State::Receiving { body, .. } | State::Request { body, .. } => body.len(),
            State::Answering { .. } | State::Sending { .. } => 0,
        }
    }
}

/// Writes `data` on `stream` in DATA frames of at most `max_frame` bytes while both
/// `windows` (the connection's and the stream's, which it takes from) and `room` in the
/// output last; the last frame ends the stream if `end` and it is all written. Returns how
/// much was written.
pub fn write_data(
    out: &mut Vec<u8>,
    stream: u32,
    data: &[u8],
    end: bool,
    windows: (&mut i64, &mut i64),
    max_frame: usize,
    room: usize,
) -> usize {
    let (connection_window, stream_window) = windows;
    let mut at = 0;
    let mut room = room;
    while at < data.len() {
        let window = (*connection_window).min(*stream_window).max(0) as usize;
        let len = (data.len() - at).min(window).min(max_frame).min(room);
        if len == 0 {
            break;
        }
        let last = end && at + len == data.len();
        frame::write_data(out, stream, &data[at..at + len], last);
        at += len;
        room = room.saturating_sub(HEAD_LEN + len);
        *connection_window -= len as i64;
        *stream_window -= len as i64;
    }
    at
}

/// Marks a remembered stream as reset by the server: stream identifiers have 31 bits.
const BY_RESET: u32 = 1 << 31;

/// The streams closed lately, each with [`BY_RESET`] if the server's RST_STREAM closed it
/// (one word each: this is in every connection).
#[derive(Default)]
pub struct Closed {
    streams: [u32; RECENTLY_CLOSED],
    next: u8,
}

impl Closed {
    pub fn remember(&mut self, stream: u32, by_reset: bool) {
        let mark = if by_reset { BY_RESET } else { 0 };
        self.streams[self.next as usize] = stream | mark;
        self.next = (self.next + 1) % RECENTLY_CLOSED as u8;
    }

    /// Whether the server reset `stream` lately.
    pub fn by_reset(&self, stream: u32) -> bool {
        self.streams.contains(&(stream | BY_RESET))
    }

    /// Whether `stream` closed lately otherwise (both ends done, or the peer's reset).
    pub fn otherwise(&self, stream: u32) -> bool {
        self.streams.contains(&stream)
    }
}
