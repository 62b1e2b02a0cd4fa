//! One keep-alive HTTP/1.1 connection to the upstream, without I/O: the requests written for
//! it and not yet answered, its responses read and passed on as they arrive (the head, then
//! the body through its pipe, read no further while the pipe is full), and what its failure
//! does to its requests. Its link (`crate::link::Link`) moves its bytes; the pool
//! (`super::Upstream`) chooses it for requests and places again those it hands back.

use std::collections::VecDeque;
use std::io;
use std::time::Instant;

use super::{Around, Event, Failure, Queued, Response, Settings, Sink};
use crate::h1::client::{Awaited, Event as Read, ResponseReader};
use crate::http::{FieldLines, Pipe};
use crate::link::{self, Address, Driven, Input, Step};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No socket; a request opens one (`start`).
    Idle,
    /// A socket is wanted.
    Connect,
    /// The connect is under way and must end by `deadline`.
    Connecting {
        deadline: Instant,
    },
    Open,
}

/// A request written on the connection whose response is not all in.
struct InFlight {
    token: u64,
    /// A HEAD request: its response has no body.
    head: bool,
    idempotent: bool,
    /// Sent once already on a connection that failed.
    retried: bool,
    deadline: Instant,
    /// Its bytes at the front of what `requests` holds of the requests not begun.
    len: usize,
    /// Its response has begun: it cannot be sent again.
    begun: bool,
    /// Its client has its answer, or its failure, from elsewhere: it waited behind a body
    /// streaming to a slow client (sent again on another connection, or timed out). Its
    /// response here is read and dropped.
    dropped: bool,
}

impl InFlight {
    /// The request, its `bytes`, handed back to the pool to be placed again; `sent`: it
    /// went out on this connection, so it counts as sent again from then on.
    fn again(&self, bytes: &[u8], sent: bool) -> Queued {
        Queued {
            token: self.token,
            head: self.head,
            idempotent: self.idempotent,
            retried: self.retried || sent,
            deadline: self.deadline,
            bytes: bytes.to_vec(),
        }
    }
}

/// What an event of the reader asks of the connection once it is read.
enum Next {
    /// An interim response.
    Begun,
    /// The final response's head.
    Head,
    Body,
    Ended {
        keep_alive: bool,
    },
}

pub struct Conn {
    address: Address,
    settings: Settings,
    phase: Phase,
    /// Changes whenever the socket is given up.
    generation: u64,
    /// The bytes of the requests in flight whose responses have not begun, in order (kept to
    /// send them again); `requests[given..]` is not taken by the link yet.
    requests: Vec<u8>,
    given: usize,
    in_flight: VecDeque<InFlight>,
    /// Received, not read yet.
    input: Input,
    reader: ResponseReader,
    /// The response being read: its status and fields, and its body's pipe.
    status: u16,
    fields: Vec<u8>,
    pipe: Option<Pipe>,
    /// Its head was handed out: its body streams to the client.
    passed: bool,
    /// Bytes of its body came since the last [`Event::Moved`].
    moved: bool,
    /// What its client had taken of its body when its deadline was last looked at.
    seen_taken: u64,
    /// The upstream closes after the response being read: no more requests here.
    retiring: bool,
    /// It streamed a body (held by its client meanwhile, so that another may have opened
    /// in its place) and the pool has not looked since whether it needs it still.
    streamed: bool,
}

impl Conn {
    pub(super) fn new(address: Address, settings: Settings) -> Conn {
        Conn {
            address,
            settings,
            phase: Phase::Idle,
            generation: 0,
            requests: Vec::new(),
            given: 0,
            in_flight: VecDeque::new(),
            input: Input::default(),
            reader: ResponseReader::default(),
            status: 0,
            fields: Vec::new(),
            pipe: None,
            passed: false,
            moved: false,
            seen_taken: 0,
            retiring: false,
            streamed: false,
        }
    }

    /// Requests written on it whose responses are not all in.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// Without a socket, and not wanting one.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// Whether it takes requests: open or opening, not closing after a response, and not
    /// streaming a body (which waits on its client: a request behind it would too).
    pub(super) fn accepting(&self) -> bool {
        self.phase != Phase::Idle && !self.retiring && !self.passed
    }

    /// Whether it waits on a slow client: the body it streams fills its pipe.
    pub(super) fn held(&self) -> bool {
        self.passed
            && self
                .pipe
                .as_ref()
                .is_some_and(|pipe| pipe.is_full() && !pipe.abandoned())
    }

    /// Whether it counts in the pool: live, not closing, and not held by a slow client.
    pub(super) fn pooled(&self) -> bool {
        self.phase != Phase::Idle && !self.retiring && !self.held()
    }

    /// An idle connection wants a socket.
    pub(super) fn start(&mut self) {
        if self.phase == Phase::Idle {
            self.phase = Phase::Connect;
        }
    }

    /// Adds a request that `write` appends (or fails to, appending nothing).
    pub(super) fn push<E>(
        &mut self,
        request: Queued,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let before = self.requests.len();
        write(&mut self.requests)?;
        self.in_flight.push_back(InFlight {
            token: request.token,
            head: request.head,
            idempotent: request.idempotent,
            retried: request.retried,
            deadline: request.deadline,
            len: self.requests.len() - before,
            begun: false,
            dropped: false,
        });
        Ok(())
    }

    /// When `on_timer` must run: the connect's deadline, the earliest request's.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let connect = match self.phase {
            Phase::Connecting { deadline } => Some(deadline),
            _ => None,
        };
        let requests = self.waiting().map(|request| request.deadline).min();
        connect.into_iter().chain(requests).min()
    }

    /// The requests in flight whose clients wait on this connection.
    fn waiting(&self) -> impl Iterator<Item = &InFlight> {
        self.in_flight.iter().filter(|request| !request.dropped)
    }

    /// A connect past its deadline fails as a refused one would; a request past its
    /// deadline fails with [`Failure::TimedOut`], and the connection with it (its response
    /// may still come: the line of responses would be out of step). A body passed on is
    /// late once neither the upstream sent any of it nor its client took any for
    /// `response_timeout`: it is cut short, and the connection fails with it. While that
    /// body moves, a request behind it past its deadline fails alone: the body goes on,
    /// and the request's response is dropped when it comes.
    pub(super) fn on_timer<S: Sink>(&mut self, now: Instant, around: &mut Around<'_, S>) {
        if let (true, Some(pipe), Some(front)) =
            (self.passed, &self.pipe, self.in_flight.front_mut())
        {
            // The client's progress is seen here only, once its deadline comes: a stalled
            // body is found between one and two timeouts after its last move.
            let taken = pipe.taken();
            if front.deadline <= now && taken != self.seen_taken {
                self.seen_taken = taken;
                front.deadline = now + self.settings.response_timeout;
            }
        }
        let streaming = self.passed && self.in_flight.front().is_some_and(|f| f.deadline > now);
        if streaming {
            for request in self.in_flight.iter_mut().skip(1) {
                if !request.dropped && request.deadline <= now {
                    request.dropped = true;
                    (around.sink)(request.token, Event::Failed(Failure::TimedOut));
                }
            }
        }
        let connect_late = matches!(self.phase, Phase::Connecting { deadline } if deadline <= now);
        let request_late = self.waiting().any(|r| r.deadline <= now);
        if connect_late || request_late {
            self.give_up(Failure::Unavailable, now, around);
        }
    }

    /// The body streaming filled its pipe: its client reads slower than the upstream
    /// sends, and the responses behind it wait on that client. Those of requests that may
    /// be sent again (idempotent, not sent again before) are: to another connection, and
    /// dropped here when they come. The others wait their turn, or their deadline.
    fn release_behind<S: Sink>(&mut self, around: &mut Around<'_, S>) {
        let mut offset = 0;
        for request in &mut self.in_flight {
            let bytes = &self.requests[offset..offset + request.len];
            offset += request.len;
            if request.begun || request.dropped || !request.idempotent || request.retried {
                continue;
            }
            request.dropped = true;
            around.resend.push(request.again(bytes, true));
        }
    }

    /// Gives the socket up: each request in flight fails, or is handed back to the pool to
    /// be placed again (`Around::resend`): all of them when the connection never connected
    /// (nothing was sent), else those not begun that are idempotent and were not sent
    /// again before. The one whose response had begun gets `begun`; one past its deadline
    /// [`Failure::TimedOut`]; one whose head was passed on, its body's failure (its client
    /// must not take what it got for the whole). A connect that failed makes the pool back
    /// off.
    fn give_up<S: Sink>(&mut self, begun: Failure, now: Instant, around: &mut Around<'_, S>) {
        if self.phase == Phase::Idle {
            return;
        }
        let never_sent = matches!(self.phase, Phase::Connect | Phase::Connecting { .. });
        if never_sent {
            around.backoff.failed(now);
        }
        // Bytes of the front response in: it began.
        if !self.input.is_empty() {
            self.begin_front();
        }
        if self.passed {
            if let (Some(pipe), Some(front)) = (self.pipe.take(), self.in_flight.pop_front()) {
                pipe.fail();
                (around.sink)(front.token, Event::Moved { last: true });
            }
        }
        let mut offset = 0;
        for request in self.in_flight.drain(..) {
            let bytes = match request.begun {
                true => &[][..],
                false => &self.requests[offset..offset + request.len],
            };
            offset += bytes.len();
            if request.dropped {
                continue;
            }
            let failure = if request.deadline <= now {
                Some(Failure::TimedOut)
            } else if request.begun {
                Some(begun)
            } else if never_sent || (request.idempotent && !request.retried) {
                None
            } else {
                Some(Failure::Unavailable)
            };
            match failure {
                Some(failure) => (around.sink)(request.token, Event::Failed(failure)),
                None => around.resend.push(request.again(bytes, !never_sent)),
            }
        }
        self.close();
    }

    /// Whether it streamed a body and has nothing in flight since: the moment the pool
    /// looks whether it needs it still (once).
    pub(super) fn done_streaming(&mut self) -> bool {
        let done = self.streamed && self.in_flight.is_empty();
        self.streamed &= !done;
        done
    }

    /// Gives the socket up with nothing in flight (the upstream closed an idle connection,
    /// the last response said it would, or the pool has no use for it), ready to open again.
    pub(super) fn close(&mut self) {
        self.generation += 1;
        self.phase = Phase::Idle;
        self.requests.clear();
        self.given = 0;
        self.input = Input::default();
        self.reader = ResponseReader::default();
        self.fields.clear();
        self.pipe = None;
        self.passed = false;
        self.moved = false;
        self.retiring = false;
        self.streamed = false;
    }

    /// Reads every event the input holds; `eof`: the upstream closed. A response's head is
    /// handed out once the read that brought it is taken (with what came of its body), so
    /// that a small response goes out whole, its length known; the body that follows goes
    /// through its pipe.
    fn read<S: Sink>(&mut self, eof: bool, now: Instant, around: &mut Around<'_, S>) {
        loop {
            let awaited = match self.in_flight.front() {
                None => Awaited::Nothing,
                Some(request) if request.head => Awaited::HeadResponse,
                Some(_) => Awaited::Response,
            };
            // A body its client left is read (the responses behind it follow) and dropped.
            let dropped = self.abandoned();
            let read = match self.reader.read(self.input.unread(), awaited, eof) {
                Ok(read) => read,
                // Closed before the response began (retried if it may be), malformed,
                // smuggling-shaped, unsolicited, cut short: never passed on as whole.
                Err(_) => return self.give_up(Failure::Unavailable, now, around),
            };
            let next = match read.event {
                None => None,
                Some(Read::Interim(_)) => Some(Next::Begun),
                Some(Read::Head(head)) => {
                    self.status = head.status;
                    self.fields.clear();
                    for (name, value) in head.fields.iter() {
                        FieldLines::push(&mut self.fields, name, value);
                    }
                    self.retiring |= !head.keep_alive;
                    // None for a request answered elsewhere: its response goes nowhere.
                    let wanted = self.in_flight.front().is_some_and(|front| !front.dropped);
                    self.pipe = wanted.then(Pipe::default);
                    Some(Next::Head)
                }
                Some(Read::Body(bytes)) => {
                    if let Some(pipe) = self.pipe.as_ref().filter(|_| !dropped) {
                        pipe.push(bytes);
                        self.moved = true;
                    }
                    Some(Next::Body)
                }
                Some(Read::End { keep_alive }) => Some(Next::Ended { keep_alive }),
            };
            let used = read.used;
            self.input.consume(used);
            match next {
                None => break,
                Some(Next::Begun) => self.begin_front(),
                Some(Next::Head | Next::Body) => {
                    self.begin_front();
                    // The body has its own deadline, from its last move.
                    if let Some(front) = self.in_flight.front_mut() {
                        front.deadline = now + self.settings.response_timeout;
                    }
                    // A window's worth: the client may start taking it; the responses
                    // behind it may have to come from elsewhere.
                    if self.pipe.as_ref().is_some_and(Pipe::is_full) {
                        self.pass_head(around);
                        self.release_behind(around);
                    }
                }
                Some(Next::Ended { keep_alive }) => {
                    self.retiring |= !keep_alive;
                    self.finish_front(around);
                    if self.retiring {
                        // What was sent after it is not answered here.
                        return self.give_up(Failure::Unavailable, now, around);
                    }
                }
            }
        }
        self.pass_head(around);
        self.report_moved(false, around);
        if eof && self.phase != Phase::Idle {
            // Nothing awaited (else the reader said NoResponse): an idle close.
            self.close();
        }
    }

    /// Whether the body being read was passed on and its client left it.
    fn abandoned(&self) -> bool {
        self.passed && self.pipe.as_ref().is_some_and(Pipe::abandoned)
    }

    /// Hands out the head of the response being read, once, with its body's pipe.
    fn pass_head<S: Sink>(&mut self, around: &mut Around<'_, S>) {
        let (Some(pipe), false, Some(front)) = (&self.pipe, self.passed, self.in_flight.front())
        else {
            return;
        };
        let response = Response {
            status: self.status,
            fields: FieldLines::new(&self.fields, 0),
            body: pipe.clone(),
        };
        (around.sink)(front.token, Event::Response(response));
        self.passed = true;
        self.moved = false;
        self.seen_taken = 0;
    }

    /// Tells the client of the body being read that more of it is in its pipe, or that it
    /// is `last`; nothing while its client has left it, but its last word.
    fn report_moved<S: Sink>(&mut self, last: bool, around: &mut Around<'_, S>) {
        let Some(front) = self.in_flight.front().filter(|_| self.passed) else {
            return;
        };
        if last || (self.moved && !self.abandoned()) {
            (around.sink)(front.token, Event::Moved { last });
        }
        self.moved = false;
    }

    /// The front request's response is all in: its head goes with its whole body if it has
    /// not gone yet, else its client is told the body ended.
    fn finish_front<S: Sink>(&mut self, around: &mut Around<'_, S>) {
        self.begin_front();
        if let Some(pipe) = &self.pipe {
            pipe.end();
        }
        match self.passed {
            true => self.report_moved(true, around),
            false => self.pass_head(around),
        }
        self.streamed |= self.passed;
        self.in_flight.pop_front();
        self.fields.clear();
        self.pipe = None;
        self.passed = false;
        self.moved = false;
    }

    /// The front request's response began: it cannot be sent again, and its bytes go.
    fn begin_front(&mut self) {
        let Some(front) = self.in_flight.front_mut() else {
            return;
        };
        if front.begun {
            return;
        }
        front.begun = true;
        let len = std::mem::take(&mut front.len);
        if self.given < len {
            // Answered before it was all sent: what is left of it cannot follow.
            self.retiring = true;
        }
        self.requests.drain(..len);
        self.given = self.given.saturating_sub(len);
    }
}

impl link::Conn for Conn {
    fn step(&self) -> Step {
        match self.phase {
            Phase::Idle => Step::Idle,
            Phase::Connect => Step::Connect,
            Phase::Connecting { .. } => Step::Connecting,
            Phase::Open => Step::Io,
        }
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn read_buffer(&mut self) -> &mut [u8] {
        self.input.room()
    }

    fn take_output(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.requests[self.given..]);
        self.given = self.requests.len();
    }

    fn has_output(&self) -> bool {
        self.given < self.requests.len()
    }

    /// Not while the body being streamed holds a window its client has not taken.
    fn wants_input(&self) -> bool {
        !self.held()
    }
}

impl<S: Sink> Driven<Around<'_, S>> for Conn {
    fn address(&mut self, _: Instant, _: &mut Around<'_, S>) -> Option<Address> {
        Some(self.address.clone())
    }

    fn connecting(&mut self, now: Instant) {
        if self.phase == Phase::Connect {
            let deadline = now + self.settings.connect_timeout;
            self.phase = Phase::Connecting { deadline };
        }
    }

    fn connected(&mut self, _: Instant, around: &mut Around<'_, S>) {
        if let Phase::Connect | Phase::Connecting { .. } = self.phase {
            self.phase = Phase::Open;
            around.backoff.succeeded();
        }
    }

    fn filled(&mut self, n: usize, now: Instant, around: &mut Around<'_, S>) {
        if self.phase != Phase::Open {
            return;
        }
        self.input.filled(n);
        self.read(n == 0, now, around);
    }

    fn transport_failed(&mut self, _: io::Error, now: Instant, around: &mut Around<'_, S>) {
        self.give_up(Failure::Unavailable, now, around);
    }
}
