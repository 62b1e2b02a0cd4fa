//! One HTTP connection's buffers and request handling, independent of how bytes move.
//!
//! Responses leave in request order. A request answered at once goes straight to the output
//! unless an earlier one is still waiting (for the database); then it waits in line behind
//! it, already written, and the line moves into the output as its front completes
//! ([`Connection::collect`], which the server calls only while the kernel is not sending
//! from the output).
//!
//! A piped body (an upstream's, arriving) is written after its head once its response is
//! at the front of the line, as it comes and as the output has room under its high-water
//! mark (chunked unless its length is known); one that fails closes the connection short
//! of its end, so that the client cannot take it for whole (or, if its head is still in
//! line, is answered 502 instead).
//!
//! The input and output buffers, and those of responses waiting in line, are lent by the
//! worker's [`BufferPool`] and go back to it as soon as they are empty: an idle connection
//! holds none.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Instant;

use super::{parse, Chunked, Framing, Parsed};
use crate::http::{
    lent, AltSvc, Answer, BufferPool, Flow, Handler, HttpDate, Pipe, Progress, Reply, SendBuffer,
    Status, Ticket, Timeouts, Wire,
};

/// A response waiting in line: still in the works, or written and waiting for an earlier one
/// (its head only, if its body is piped).
struct Queued {
    framing: Framing,
    done: bool,
    bytes: Vec<u8>,
    piped: Option<Piped>,
}

/// A piped body, written after its head as it arrives.
struct Piped {
    pipe: Pipe,
    /// In chunks (its length was not known when its head went), else as it comes.
    chunked: bool,
}

impl Piped {
    /// Writes what waits of the body to `out`, at most `room` bytes of it; its last chunk
    /// once it is all written.
    fn write(&self, out: &mut Vec<u8>, room: usize) -> Progress {
        self.pipe.take_body(|bytes, last| {
            let len = bytes.len().min(room);
            if len > 0 && self.chunked {
                // Writing to a Vec cannot fail.
                let _ = write!(out, "{len:x}\r\n");
                out.extend_from_slice(&bytes[..len]);
                out.extend_from_slice(b"\r\n");
            } else {
                out.extend_from_slice(&bytes[..len]);
            }
            if last && len == bytes.len() && self.chunked {
                out.extend_from_slice(b"0\r\n\r\n");
            }
            len
        })
    }
}

/// Requests waiting for responses above which no further requests are read.
const MAX_QUEUED: usize = 64;
/// Unsent output, with the finished responses waiting in line behind an unfinished one,
/// above which no further requests are read, so that a client that does not read its
/// responses cannot make the server buffer without bound. No more responses move from the
/// line to the output above it either: a connection holds at most this plus one response,
/// plus those still in the works when it was reached.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// Where a connection is in its life:
///
/// ```text
///   Reading <──(the output drained)──> Full      (reading stopped at the output's mark)
///      │  (either)
///      ├──(a 101 answered)──> Upgrading ──(it and every answer before it in the output:
///      │                                   the slot switches, protocol.rs)
///      └──(an answer without keep-alive, a malformed request, the peer's EOF)──> Closing
/// ```
///
/// `Upgrading` closes too on the peer's EOF. `Closing` answers nothing more: its last
/// answer closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reading,
    /// The output reached the high-water mark at the last [`Connection::process`]: reading
    /// stopped, and starts again once the output drains.
    Full,
    /// A `101` was written: the bytes after its request belong to the next protocol.
    Upgrading,
    /// `asked`: the client asked for the close (its last request said `Connection: close`,
    /// or was HTTP/1.0 without keep-alive) and sent nothing after that request; or the
    /// server drains a connection with nothing received unanswered.
    Closing {
        asked: bool,
    },
}

/// What the client owes of the request at the front of the input. Nothing, too, while the
/// server itself holds the input back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owed {
    Nothing,
    /// The rest of a request begun `since` then.
    Request {
        since: Instant,
    },
    /// The body of a request that asked for `100 Continue`, which went out.
    Body {
        since: Instant,
    },
}

impl Owed {
    fn since(self) -> Option<Instant> {
        match self {
            Owed::Nothing => None,
            Owed::Request { since } | Owed::Body { since } => Some(since),
        }
    }
}

pub struct Connection {
    slot: u32,
    generation: u32,
    /// Received bytes not answered yet; without a buffer (capacity 0) while empty.
    input: Vec<u8>,
    /// Responses to send; without a buffer while everything is sent.
    output: SendBuffer,
    /// Responses that cannot go to `output` yet; the front one has sequence number `front_seq`.
    queue: VecDeque<Queued>,
    front_seq: u32,
    /// The bytes of the finished responses in `queue`, and the capacity of their buffers
    /// (u32: a connection's slot stays small, and the line holds far less than 4 GiB).
    queued_len: u32,
    queued_capacity: u32,
    /// How many responses in line have a piped body (at most [`MAX_QUEUED`]; a byte, in
    /// the padding).
    piping: u8,
    phase: Phase,
    /// The peer sent its last byte; the requests already in `input` are still answered.
    peer_eof: bool,
    /// How far the chunked body of the request at the front of the input is decoded (in
    /// the input itself) while it has not all arrived.
    chunked: Chunked,
    /// What the client owes of a request it has begun.
    owed: Owed,
    /// The last time a request was taken in or a response byte went out.
    last_active: Instant,
    /// The server drains: the next request taken is the last, its answer says `Connection:
    /// close` (see [`Wire::drain`]).
    draining: bool,
    /// Over TLS, where the server also answers over HTTP/3: its first answer says so.
    alt_svc: Option<AltSvc>,
}

impl Connection {
    pub fn new(slot: u32, now: Instant) -> Self {
        Connection {
            slot,
            generation: 0,
            input: Vec::new(),
            output: SendBuffer::default(),
            queue: VecDeque::new(),
            front_seq: 0,
            queued_len: 0,
            queued_capacity: 0,
            piping: 0,
            phase: Phase::Reading,
            peer_eof: false,
            chunked: Chunked::default(),
            owed: Owed::Nothing,
            last_active: now,
            draining: false,
            alt_svc: None,
        }
    }

    /// Makes a closed connection (see [`Connection::give_back_all`]) ready for a new peer,
    /// whose answers name `alt_svc`.
    pub fn reset(&mut self, alt_svc: Option<AltSvc>, now: Instant) {
        self.alt_svc = alt_svc;
        self.generation = self.generation.wrapping_add(1);
        self.phase = Phase::Reading;
        self.peer_eof = false;
        self.owed = Owed::Nothing;
        self.last_active = now;
        self.draining = false;
        // Counted from the new peer's first byte (`first_bytes` looks for none sent).
        self.output = SendBuffer::default();
    }

    /// Answers every complete request in the input, in order, through `handler`, as long
    /// as the client keeps reading its answers. A malformed request is answered with its
    /// error status and ends the connection. A request whose client waits for `100
    /// Continue` before sending the body gets it, once, when no earlier answer is still
    /// waiting in line (the client sends the body anyway after a pause). Bodies of more
    /// than `max_body` bytes are answered 413 and close the connection. A `101` answered
    /// now ends the reading: the bytes after its request are the next protocol's.
    pub fn process(
        &mut self,
        handler: &mut impl Handler,
        max_body: usize,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
    ) {
        self.process_within(handler, max_body, date, now, buffers, usize::MAX);
    }

    /// [`Connection::process`], with the high-water mark lowered to `share` (the worker's
    /// budget shared among its connections, once it is spent).
    pub fn process_within(
        &mut self,
        handler: &mut impl Handler,
        max_body: usize,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
        share: usize,
    ) {
        let high_water = share.min(OUTPUT_HIGH_WATER);
        let mut consumed = 0;
        let mut partial = false;
        while self.reading() && self.has_room(high_water) {
            match parse(&self.input[consumed..], max_body, &self.chunked) {
                Parsed::Complete {
                    request,
                    len,
                    keep_alive,
                } => {
                    consumed += len;
                    self.owed = Owed::Nothing;
                    let keep_alive = keep_alive && !self.draining;
                    // `Alt-Svc` once per connection, as HTTP/2 says it.
                    let framing = Framing::to(&request, keep_alive, self.alt_svc.take());
                    let ticket = Ticket {
                        slot: self.slot,
                        generation: self.generation,
                        seq: self.front_seq.wrapping_add(self.queue.len() as u32),
                    };
                    let mut switched = false;
                    match &handler.handle(&request, ticket) {
                        Reply::Now(answer) => {
                            switched = answer.status == Status::SwitchingProtocols;
                            if self.queue.is_empty() {
                                framing.write(self.output.lend(buffers), date, answer);
                            } else {
                                let mut bytes = buffers.take();
                                framing.write(&mut bytes, date, answer);
                                self.enqueue(framing, true, bytes);
                            }
                        }
                        // No buffer until the answer comes: a request held for seconds (a
                        // timer, a slow query) costs its entry alone.
                        Reply::Later => self.enqueue(framing, false, Vec::new()),
                    }
                    if switched {
                        self.phase = Phase::Upgrading;
                    } else if !framing.keep_alive() {
                        let asked = consumed == self.input.len();
                        self.phase = Phase::Closing { asked };
                    }
                    self.chunked = Chunked::default();
                }
                Parsed::ChunkedBody { body_at } => {
                    let body = &mut self.input[consumed + body_at..];
                    match self.chunked.decode(body, max_body) {
                        // All of it is in: parse again, to take the request.
                        Ok(true) => {}
                        Ok(false) => {
                            partial = true;
                            break;
                        }
                        Err(status) => {
                            self.fail(status, date, buffers);
                            consumed = self.input.len();
                        }
                    }
                }
                Parsed::Partial => {
                    partial = consumed < self.input.len();
                    break;
                }
                Parsed::ExpectsContinue => {
                    let continued = matches!(self.owed, Owed::Body { .. });
                    if !continued && self.queue.is_empty() {
                        self.output
                            .lend(buffers)
                            .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        let since = self.owed.since().unwrap_or(now);
                        self.owed = Owed::Body { since };
                    }
                    partial = true;
                    break;
                }
                Parsed::Invalid(status) => {
                    self.fail(status, date, buffers);
                    consumed = self.input.len();
                }
            }
        }
        if self.closing() {
            self.chunked = Chunked::default();
        }
        self.input.drain(..consumed);
        if consumed > 0 {
            self.last_active = now;
        }
        // A request the peer began but can no longer finish is dropped with the connection.
        if self.peer_eof && (partial || self.input.is_empty()) {
            self.close();
        }
        if self.closing() {
            self.input.clear();
            partial = false;
        }
        // The request timeout runs from the first byte of the request the client has not
        // finished; requests held back by the server do not count against the client.
        let since = |since: Instant| if consumed > 0 { now } else { since };
        self.owed = match (partial, self.owed) {
            (false, _) => Owed::Nothing,
            (true, Owed::Nothing) => Owed::Request { since: now },
            (true, Owed::Request { since: at }) => Owed::Request { since: since(at) },
            (true, Owed::Body { since: at }) => Owed::Body { since: since(at) },
        };
        if self.reading() {
            self.phase = match self.has_room(high_water) {
                true => Phase::Reading,
                false => Phase::Full,
            };
        }
        self.output.owe_progress(now);
    }

    /// Puts a response in line: in the works (`done` false, no buffer), or written.
    fn enqueue(&mut self, framing: Framing, done: bool, bytes: Vec<u8>) {
        self.queued_len += bytes.len() as u32;
        self.queued_capacity += bytes.capacity() as u32;
        self.queue.push_back(Queued {
            framing,
            done,
            bytes,
            piped: None,
        });
    }

    /// Answers with an error status and closes once it is sent.
    fn fail(&mut self, status: Status, date: &HttpDate, buffers: &mut BufferPool) {
        let (framing, answer) = (Framing::closing(), Answer::error(status));
        if self.queue.is_empty() {
            framing.write(self.output.lend(buffers), date, &answer);
        } else {
            let mut bytes = buffers.take();
            framing.write(&mut bytes, date, &answer);
            self.enqueue(framing, true, bytes);
        }
        self.close();
    }

    /// Whether requests are still read (the output may be full).
    fn reading(&self) -> bool {
        matches!(self.phase, Phase::Reading | Phase::Full)
    }

    fn closing(&self) -> bool {
        matches!(self.phase, Phase::Closing { .. })
    }

    /// Answers nothing more: the last answer closes the connection.
    fn close(&mut self) {
        if !self.closing() {
            self.phase = Phase::Closing { asked: false };
        }
    }

    /// Writes the answer for `ticket` into its place in line, in a buffer lent from
    /// `buffers`; [`Connection::collect`] moves it to the output once every answer before
    /// it is there too (and a piped body after it, as it comes). A ticket of an earlier peer
    /// of this slot, or one already answered, is ignored. (An answer given now never has a
    /// piped body: an upstream's comes later.)
    pub fn complete(
        &mut self,
        ticket: Ticket,
        answer: &Answer<'_>,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
    ) {
        if ticket.slot != self.slot || ticket.generation != self.generation {
            return;
        }
        let index = ticket.seq.wrapping_sub(self.front_seq) as usize;
        let Some(queued) = self.queue.get_mut(index).filter(|queued| !queued.done) else {
            return;
        };
        let bytes = lent(&mut queued.bytes, buffers);
        let mut closes = false;
        match answer.body.pipe() {
            Some(pipe) => {
                let chunked = queued.framing.write_piped_head(bytes, date, answer);
                closes = !queued.framing.keep_alive();
                queued.piped = chunked.map(|chunked| Piped {
                    pipe: pipe.clone(),
                    chunked,
                });
                self.piping += u8::from(queued.piped.is_some());
            }
            None => queued.framing.write(bytes, date, answer),
        }
        let (len, capacity) = (bytes.len(), bytes.capacity());
        queued.done = true;
        self.queued_len += len as u32;
        self.queued_capacity += capacity as u32;
        self.last_active = now;
        if closes {
            // Its body runs to the close: nothing may follow it.
            self.drop_queue_from(index + 1, buffers);
            self.close();
        }
    }

    /// Drops the responses in line from `index` on, and their buffers.
    fn drop_queue_from(&mut self, index: usize, buffers: &mut BufferPool) {
        for queued in self.queue.drain(index.min(self.queue.len())..) {
            self.queued_len -= queued.bytes.len() as u32;
            self.queued_capacity -= queued.bytes.capacity() as u32;
            self.piping -= u8::from(queued.piped.is_some());
            buffers.give_back(queued.bytes);
        }
    }

    /// Moves the finished responses at the front of the line to the output, while it is
    /// under the high-water mark (lowered to `share`, as for
    /// [`Connection::process_within`]); a piped body as far as it has arrived. One that
    /// failed before its head went is answered 502 instead, as a failure before the head
    /// is; after, it ends the connection there: what was written of it goes, then the close.
    pub fn collect(&mut self, date: &HttpDate, buffers: &mut BufferPool, share: usize) {
        let high_water = share.min(OUTPUT_HIGH_WATER);
        while let Some(front) = self.queue.front_mut() {
            if !front.done || self.output.unsent().len() >= high_water {
                break;
            }
            if !front.bytes.is_empty() || front.piped.is_none() {
                let mut bytes = std::mem::take(&mut front.bytes);
                self.queued_len -= bytes.len() as u32;
                self.queued_capacity -= bytes.capacity() as u32;
                let failed = |piped: &Piped| piped.pipe.flow() == Flow::Failed;
                if front.piped.take_if(|piped| failed(piped)).is_some() {
                    self.piping -= 1;
                    bytes.clear();
                    let answer = Answer::error(Status::BadGateway);
                    front.framing.write(&mut bytes, date, &answer);
                }
                self.output.append(bytes, buffers);
            }
            if let Some(piped) = &front.piped {
                let room = high_water.saturating_sub(self.output.unsent().len());
                match piped.write(self.output.lend(buffers), room) {
                    Progress::More => break,
                    Progress::Whole => self.piping -= 1,
                    Progress::Failed => {
                        self.drop_queue_from(0, buffers);
                        self.close();
                        break;
                    }
                }
            }
            self.queue.pop_front();
            self.front_seq = self.front_seq.wrapping_add(1);
        }
    }

    /// What the piped bodies in line hold: (the memory, the bytes waiting). Each holds a
    /// window at most (`http::WINDOW`); a walk only while some response has one.
    fn piped(&self) -> (usize, usize) {
        if self.piping == 0 {
            return (0, 0);
        }
        let pipes = self.queue.iter().filter_map(|queued| queued.piped.as_ref());
        pipes.fold((0, 0), |(held, waiting), piped| {
            (held + piped.pipe.held(), waiting + piped.pipe.waiting())
        })
    }

    /// Whether the client asked for the close and sent nothing after: RFC 9112 9.6 forbids
    /// it to send more, so the connection may close at once instead of lingering for the
    /// client's EOF (what nginx does too).
    pub fn close_asked(&self) -> bool {
        matches!(self.phase, Phase::Closing { asked: true })
    }

    /// Tells this peer's tickets (and a backend's operations for it) from those of the
    /// slot's earlier peers.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether more responses may be produced now: the client is reading them.
    fn has_room(&self, high_water: usize) -> bool {
        self.output.unsent().len() + (self.queued_len as usize) + self.piped().1 < high_water
            && self.queue.len() < MAX_QUEUED
    }

    /// Whether the connection is ready to switch protocols: its `101` and every answer
    /// before it are in the output.
    pub fn upgraded(&self) -> bool {
        self.phase == Phase::Upgrading && self.queue.is_empty()
    }

    /// The bytes received and not read yet: a connection's first bytes, while its version
    /// is read (they may be HTTP/2's preface instead of a request).
    pub fn first_bytes(&self) -> &[u8] {
        &self.input
    }

    /// What its answers say of HTTP/3 (`Alt-Svc`), which HTTP/2 says too if it takes over.
    pub fn alt_svc(&self) -> Option<AltSvc> {
        self.alt_svc
    }

    /// Hands over, for the protocol switched to: the generation, the input (the bytes after
    /// the handshake) and the output. The connection is done with.
    pub fn hand_over(&mut self) -> (u32, Vec<u8>, SendBuffer) {
        let (input, output) = (
            std::mem::take(&mut self.input),
            std::mem::take(&mut self.output),
        );
        (self.generation, input, output)
    }

    /// A connection for the slot's next peer after one that switched protocols: its
    /// generation carries on from `generation` ([`Connection::reset`] moves it on).
    pub fn following(slot: u32, generation: u32, now: Instant) -> Self {
        Connection {
            generation,
            ..Connection::new(slot, now)
        }
    }
}

impl Wire for Connection {
    /// The buffer that received bytes are appended to, lent from `buffers` if the
    /// connection has none.
    fn input(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8> {
        lent(&mut self.input, buffers)
    }

    /// Received bytes not answered yet.
    fn buffered_input(&self) -> usize {
        self.input.len()
    }

    /// The peer sent its last byte: answer the complete requests already received, then
    /// close.
    fn peer_closed(&mut self) {
        self.peer_eof = true;
        if self.input.is_empty() {
            self.close();
        }
    }

    /// Whether the peer has sent its last byte.
    fn peer_eof(&self) -> bool {
        self.peer_eof
    }

    fn unsent(&self) -> &[u8] {
        self.output.unsent()
    }

    /// `n` bytes of [`Connection::unsent`] went out; the kernel is done with them.
    fn mark_sent(&mut self, n: usize, now: Instant) {
        self.output.sent(n, now);
        if n > 0 {
            self.last_active = now;
        }
    }

    /// Whether the server should read more from this peer now (not while a switch waits
    /// for the answers before it).
    fn wants_input(&self) -> bool {
        self.reading() && !self.peer_eof && self.has_room(OUTPUT_HIGH_WATER)
    }

    /// Complete requests wait in the input, or finished responses in line (a piped body's
    /// head not yet in the output, or its body with something to write), for the output to
    /// drain; or reading stopped while it was full.
    fn has_backlog(&self) -> bool {
        let requests = !self.closing() && !self.input.is_empty() && self.owed == Owed::Nothing;
        let front = self.queue.front().is_some_and(|queued| {
            let to_write =
                |piped: &Piped| piped.pipe.waiting() > 0 || piped.pipe.flow() != Flow::Open;
            queued.done && (!queued.bytes.is_empty() || queued.piped.as_ref().is_none_or(to_write))
        });
        requests || self.phase == Phase::Full || front
    }

    /// Everything is answered and sent and no more will be read.
    fn is_finished(&self) -> bool {
        self.closing() && self.queue.is_empty() && self.output.is_drained()
    }

    /// Whether the client took too long to send a request it began, or to read what was
    /// unsent at some instant (a client that reads a few bytes now and then), or nothing
    /// moved in either direction for too long (an idle keep-alive connection). A connection
    /// that waits for an answer the server owes it (a timer, the database) is not idle.
    fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool {
        if self.output.late(now, limits.send) {
            return true;
        }
        if let Some(since) = self.owed.since() {
            return now.duration_since(since) > limits.request;
        }
        self.queue.is_empty() && now.duration_since(self.last_active) > limits.idle
    }

    /// The last answer says `Connection: close` and the connection closes once it is sent:
    /// the last answer in the works when there is one (those after it in the input are
    /// dropped, as at any close: the client retries them), else the next request's (one
    /// the client is still sending may finish); an idle connection, with nothing received
    /// that is not answered, is done once its output is sent, and closes at once as when
    /// the client asked for the close (no answer it could lose).
    fn drain(&mut self, _: &mut BufferPool) {
        self.draining = true;
        if !self.reading() {
            return;
        }
        if let Some(last) = self.queue.back_mut().filter(|queued| !queued.done) {
            last.framing = last.framing.closing_after();
            self.phase = Phase::Closing { asked: false };
        } else if self.input.is_empty() && self.owed == Owed::Nothing {
            self.phase = Phase::Closing { asked: true };
        }
    }

    /// The bytes of buffer memory the connection holds: its input, its output and the
    /// responses waiting in line, their piped bodies too.
    fn held(&self) -> usize {
        self.input.capacity()
            + self.output.capacity()
            + self.queued_capacity as usize
            + self.piped().0
    }

    /// Gives back the buffers that are empty: the input once every request in it is
    /// answered, the output once it is all sent (so the kernel is not sending from it).
    fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        if self.input.is_empty() && self.input.capacity() > 0 {
            buffers.give_back(std::mem::take(&mut self.input));
        }
        self.output.give_back_idle(buffers);
    }

    /// Gives every buffer back: the connection is closed, and the kernel no longer sends
    /// from its output.
    fn give_back_all(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.input));
        self.output.give_back_all(buffers);
        for queued in self.queue.drain(..) {
            buffers.give_back(queued.bytes);
        }
        (self.queued_len, self.queued_capacity, self.piping) = (0, 0, 0);
        self.chunked = Chunked::default();
    }
}

#[cfg(test)]
mod tests;
