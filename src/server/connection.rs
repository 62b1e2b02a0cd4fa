//! One HTTP connection's buffers and request handling, independent of how bytes move.

use std::time::Instant;

use crate::http::{parse, HttpDate, Parsed, Request, Response, Status};

/// Answers requests. Each worker thread owns one.
pub trait Handler {
    /// Appends the whole response to `request` to `out`.
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        out: &mut Vec<u8>,
        date: &HttpDate,
    );
}

/// Unsent output above which no further requests are read, so that a client that does
/// not read its responses cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;
/// Buffers that grew past this are given back when they empty.
const KEEP_CAPACITY: usize = 64 * 1024;

pub struct Connection {
    input: Vec<u8>,
    output: Vec<u8>,
    /// How much of `output` has been sent.
    sent: usize,
    /// No further requests will be read: the last response closes the connection.
    closing: bool,
    /// When the oldest unanswered byte of `input` arrived.
    partial_since: Option<Instant>,
    last_active: Instant,
}

impl Connection {
    pub fn new(now: Instant) -> Self {
        Connection {
            input: Vec::with_capacity(4096),
            output: Vec::with_capacity(4096),
            sent: 0,
            closing: false,
            partial_since: None,
            last_active: now,
        }
    }

    /// Makes a closed connection's buffers ready for a new peer.
    pub fn reset(&mut self, now: Instant) {
        self.input.clear();
        self.output.clear();
        self.sent = 0;
        self.closing = false;
        self.partial_since = None;
        self.last_active = now;
    }

    /// The buffer that received bytes are appended to.
    pub fn input(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }

    /// Answers every complete request in the input, in order, as long as the client keeps
    /// reading its responses. A malformed request is answered with its error status and
    /// ends the connection.
    pub fn process(&mut self, handler: &mut impl Handler, date: &HttpDate, now: Instant) {
        self.last_active = now;
        let mut consumed = 0;
        while !self.closing && self.output.len() - self.sent < OUTPUT_HIGH_WATER {
            match parse(&self.input[consumed..]) {
                Parsed::Complete { request, len } => {
                    consumed += len;
                    let response = Response::to(&request);
                    handler.handle(&request, response, &mut self.output, date);
                    self.closing = !response.keep_alive();
                }
                Parsed::Partial => break,
                Parsed::Invalid(status) => {
                    self.fail(status, date);
                    consumed = self.input.len();
                }
            }
        }
        self.input.drain(..consumed);
        if self.closing {
            self.input.clear();
        }
        self.partial_since = match self.input.is_empty() {
            true => None,
            false => self.partial_since.or(Some(now)),
        };
    }

    /// Answers with an error status and closes once it is sent.
    pub fn fail(&mut self, status: Status, date: &HttpDate) {
        Response::closing().write_error(&mut self.output, date, status);
        self.closing = true;
    }

    /// The peer sent its last byte: answer what was complete, then close.
    pub fn peer_closed(&mut self) {
        self.closing = true;
        self.input.clear();
        self.partial_since = None;
    }

    pub fn unsent(&self) -> &[u8] {
        &self.output[self.sent..]
    }

    pub fn mark_sent(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.output.len() {
            self.output.clear();
            self.sent = 0;
            if self.output.capacity() > KEEP_CAPACITY {
                self.output.shrink_to(KEEP_CAPACITY);
            }
            if self.input.is_empty() && self.input.capacity() > KEEP_CAPACITY {
                self.input.shrink_to(KEEP_CAPACITY);
            }
        }
    }

    /// Whether the server should read more from this peer now.
    pub fn wants_input(&self) -> bool {
        !self.closing && self.output.len() - self.sent < OUTPUT_HIGH_WATER
    }

    /// Requests are waiting in the input for the output to drain.
    pub fn has_backlog(&self) -> bool {
        !self.closing && !self.input.is_empty()
    }

    /// Everything is answered and sent and no more will be read.
    pub fn is_finished(&self) -> bool {
        self.closing && self.sent == self.output.len()
    }

    /// Whether the connection has been idle, or stuck in one request, for too long.
    pub fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool {
        if let Some(since) = self.partial_since {
            return now.duration_since(since) > limits.request;
        }
        self.sent == self.output.len() && now.duration_since(self.last_active) > limits.idle
    }
}

pub struct Timeouts {
    /// Longest time a request may take to arrive once its first byte has.
    pub request: std::time::Duration,
    /// Longest keep-alive pause between requests.
    pub idle: std::time::Duration,
}

pub const TIMEOUTS: Timeouts = Timeouts {
    request: std::time::Duration::from_secs(10),
    idle: std::time::Duration::from_secs(60),
};
