//! One HTTP connection's buffers and request handling, independent of how bytes move.
//!
//! Responses leave in request order. A request answered at once goes straight to the output
//! unless an earlier one is still waiting (for the database); then it waits in line behind
//! it, already written, and the line moves into the output as its front completes
//! ([`Connection::collect`], which the server calls only while the kernel is not sending
//! from the output).

use std::collections::VecDeque;
use std::time::Instant;

use super::{parse, ContentType, HttpDate, Parsed, Request, Response, Status};

/// Answers requests. Each worker thread owns one.
pub trait Handler {
    /// Appends the whole response to `request` to `out` and returns [`Reply::Now`], or starts
    /// work whose response arrives later through [`Connection::complete`] with `ticket`.
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        ticket: Ticket,
        out: &mut Vec<u8>,
    ) -> Reply;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    Now,
    Later,
}

/// Names one request that waits for its response: which connection (a slot index and the
/// slot's generation, so that a reused slot is not mistaken for its earlier peer) and which
/// request on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub slot: u32,
    pub generation: u32,
    pub seq: u32,
}

/// A response waiting in line: still in the works, or written and waiting for an earlier one.
struct Queued {
    response: Response,
    done: bool,
    bytes: Vec<u8>,
}

/// Requests waiting for responses above which no further requests are read.
const MAX_QUEUED: usize = 64;
/// Unsent output above which no further requests are read, so that a client that does
/// not read its responses cannot make the server buffer without bound.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;
/// Buffers that grew past this are given back when they empty.
const KEEP_CAPACITY: usize = 64 * 1024;

pub struct Connection {
    slot: u32,
    generation: u32,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Responses that cannot go to `output` yet; the front one has sequence number `front_seq`.
    queue: VecDeque<Queued>,
    front_seq: u32,
    /// Emptied buffers of `queue` entries, kept for the next ones.
    spare: Vec<Vec<u8>>,
    /// How much of `output` has been sent.
    sent: usize,
    /// No further requests will be answered: the last response closes the connection.
    closing: bool,
    /// The peer sent its last byte; the requests already in `input` are still answered.
    peer_eof: bool,
    /// Since when the client owes the rest of a request it has begun; `None` while there is
    /// no partial request, or while the server itself holds the input back.
    waiting_since: Option<Instant>,
    /// The last time a request was taken in or a response byte went out.
    last_active: Instant,
}

impl Connection {
    pub fn new(slot: u32, now: Instant) -> Self {
        Connection {
            slot,
            generation: 0,
            input: Vec::with_capacity(4096),
            output: Vec::with_capacity(4096),
            queue: VecDeque::new(),
            front_seq: 0,
            spare: Vec::new(),
            sent: 0,
            closing: false,
            peer_eof: false,
            waiting_since: None,
            last_active: now,
        }
    }

    /// Makes a closed connection's buffers ready for a new peer.
    pub fn reset(&mut self, now: Instant) {
        self.generation = self.generation.wrapping_add(1);
        self.input.clear();
        self.output.clear();
        while let Some(mut queued) = self.queue.pop_front() {
            queued.bytes.clear();
            self.spare.push(queued.bytes);
        }
        self.sent = 0;
        self.closing = false;
        self.peer_eof = false;
        self.waiting_since = None;
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
        let mut consumed = 0;
        let mut partial = false;
        while !self.closing && self.has_room() {
            match parse(&self.input[consumed..]) {
                Parsed::Complete { request, len } => {
                    consumed += len;
                    let response = Response::to(&request);
                    let ticket = Ticket {
                        slot: self.slot,
                        generation: self.generation,
                        seq: self.front_seq.wrapping_add(self.queue.len() as u32),
                    };
                    if self.queue.is_empty() {
                        let reply = handler.handle(&request, response, ticket, &mut self.output);
                        if reply == Reply::Later {
                            let bytes = self.spare.pop().unwrap_or_default();
                            self.queue.push_back(Queued {
                                response,
                                done: false,
                                bytes,
                            });
                        }
                    } else {
                        let mut bytes = self.spare.pop().unwrap_or_default();
                        let reply = handler.handle(&request, response, ticket, &mut bytes);
                        let done = reply == Reply::Now;
                        self.queue.push_back(Queued {
                            response,
                            done,
                            bytes,
                        });
                    }
                    self.closing = !response.keep_alive();
                }
                Parsed::Partial => {
                    partial = consumed < self.input.len();
                    break;
                }
                Parsed::Invalid(status) => {
                    self.fail(status, date);
                    consumed = self.input.len();
                }
            }
        }
        self.input.drain(..consumed);
        if consumed > 0 {
            self.last_active = now;
        }
        // A request the peer began but can no longer finish is dropped with the connection.
        if self.peer_eof && (partial || self.input.is_empty()) {
            self.closing = true;
        }
        if self.closing {
            self.input.clear();
            partial = false;
        }
        // The request timeout runs from the first byte of the request the client has not
        // finished; requests held back by the server do not count against the client.
        self.waiting_since = match partial {
            false => None,
            true if consumed > 0 => Some(now),
            true => self.waiting_since.or(Some(now)),
        };
    }

    /// Answers with an error status and closes once it is sent.
    pub fn fail(&mut self, status: Status, date: &HttpDate) {
        if self.queue.is_empty() {
            Response::closing().write_error(&mut self.output, date, status);
        } else {
            let mut bytes = self.spare.pop().unwrap_or_default();
            Response::closing().write_error(&mut bytes, date, status);
            self.queue.push_back(Queued {
                response: Response::closing(),
                done: true,
                bytes,
            });
        }
        self.closing = true;
    }

    /// Writes the response for `ticket` into its place in line; [`Connection::collect`]
    /// moves it to the output once every response before it is there too. A ticket of an
    /// earlier peer of this slot, or one already answered, is ignored.
    pub fn complete(
        &mut self,
        ticket: Ticket,
        date: &HttpDate,
        status: Status,
        content_type: ContentType,
        body: &[u8],
        now: Instant,
    ) {
        if ticket.slot != self.slot || ticket.generation != self.generation {
            return;
        }
        let index = ticket.seq.wrapping_sub(self.front_seq) as usize;
        let Some(queued) = self.queue.get_mut(index).filter(|queued| !queued.done) else {
            return;
        };
        queued
            .response
            .write(&mut queued.bytes, date, status, content_type, body);
        queued.done = true;
        self.last_active = now;
    }

    /// Moves every finished response at the front of the line to the output.
    pub fn collect(&mut self) {
        while self.queue.front().is_some_and(|queued| queued.done) {
            let Some(mut queued) = self.queue.pop_front() else {
                break;
            };
            self.output.extend_from_slice(&queued.bytes);
            queued.bytes.clear();
            self.spare.push(queued.bytes);
            self.front_seq = self.front_seq.wrapping_add(1);
        }
    }

    /// The peer sent its last byte: answer the complete requests already received, then
    /// close.
    pub fn peer_closed(&mut self) {
        self.peer_eof = true;
        if self.input.is_empty() {
            self.closing = true;
        }
    }

    /// Received bytes not answered yet.
    pub fn buffered_input(&self) -> usize {
        self.input.len()
    }

    pub fn unsent(&self) -> &[u8] {
        &self.output[self.sent..]
    }

    pub fn mark_sent(&mut self, n: usize, now: Instant) {
        self.sent += n;
        if n > 0 {
            self.last_active = now;
        }
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

    /// Whether more responses may be produced now: the client is reading them.
    fn has_room(&self) -> bool {
        self.output.len() - self.sent < OUTPUT_HIGH_WATER && self.queue.len() < MAX_QUEUED
    }

    /// Whether the server should read more from this peer now.
    pub fn wants_input(&self) -> bool {
        !self.closing && !self.peer_eof && self.has_room()
    }

    /// Complete requests wait in the input for the output to drain.
    pub fn has_backlog(&self) -> bool {
        !self.closing && !self.input.is_empty() && self.waiting_since.is_none()
    }

    /// Everything is answered and sent and no more will be read.
    pub fn is_finished(&self) -> bool {
        self.closing && self.queue.is_empty() && self.sent == self.output.len()
    }

    /// Whether the client took too long to send a request it began, or nothing moved in
    /// either direction for too long (an idle keep-alive connection, or a client that does
    /// not read its responses).
    pub fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool {
        if let Some(since) = self.waiting_since {
            return now.duration_since(since) > limits.request;
        }
        now.duration_since(self.last_active) > limits.idle
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
