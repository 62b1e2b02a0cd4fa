//! A worker's keep-alive HTTP/1.1 connections to the upstream of the edge (reverse-proxy)
//! mode, without I/O: requests in (`Upstream::forward`), responses (a head, then a body
//! through its pipe as it arrives) or failures out as events by token (`Sink`), the way
//! `pg`'s pool hands out database answers. Each connection (`conn.rs`) is a link
//! (`crate::link`) that the worker's backend moves the bytes of, beside the PostgreSQL
//! ones.
//!
//! A request goes to the open connection with the fewest in flight (pipelined, up to
//! `Settings::depth`), or opens an idle one when every open one is busy; with all at depth
//! it waits in a bounded queue. A connection that fails hands back the requests whose
//! response had not begun and that are idempotent, to be sent once more on another (the
//! keep-alive race: the upstream closed an idle connection as a request went out); the
//! others fail. Connect failures back off (100 ms doubling to 2 s) for the whole upstream:
//! while none is open and the backoff runs, requests are refused at once.
//!
//! A response's head is handed out as soon as it is read, with an `http::Pipe` its body
//! goes through as it arrives: no body is held whole. Each connection streams one body at
//! a time (its front response's) and stops reading once that body's pipe holds
//! `http::WINDOW` bytes its client has not taken, so a slow client holds at most a window
//! per response. A connection takes no new request while it streams a body (one behind
//! it could wait on that body's client). Once the pipe is full, its client reads slower
//! than the upstream sends, and the connection is held: another opens in its place (up to
//! `Settings::streams` beyond `Settings::connections`), so that slow clients reading large
//! bodies never leave the others without a connection. One closes once it has nothing in
//! flight and the pool has enough without it. Requests pipelined behind the body before
//! its head came would wait on its client too: once its pipe is full, those that may be
//! sent again are, on another connection (their responses here are dropped), and the
//! others fail alone at their deadline (504) while the body goes on. A body that neither
//! arrives nor is taken for `Settings::response_timeout` is abandoned: the connection
//! closes, the client's answer is cut short (nginx, which does not pipeline, times out a
//! stalled client's transfer the same way, `proxy_send_timeout`).

mod conn;
mod proxy;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use self::conn::Conn;
pub use self::proxy::{AuthSettings, Dyn, Proxy, ProxySettings};
use crate::h1::client::{Forward, WriteError};
use crate::http::{FieldLines, Pipe, Status};
pub use crate::link::Address;
use crate::link::Backoff;

/// An upstream connection with the socket it wants.
pub type Link = crate::link::Link<Conn>;

/// How a worker talks to its upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Connections per worker, those held by slow clients not counted (`streams`).
    pub connections: usize,
    /// Connections a worker may open beyond `connections` while some are held: each
    /// streams a body whose client reads slower than the upstream sends, takes no request
    /// meanwhile, and has another open in its place. Past them, requests wait for a
    /// connection as when every one is at its depth.
    pub streams: usize,
    /// Requests in flight on one connection at most (pipelined).
    pub depth: usize,
    /// The bytes of the requests waiting for room while every connection is at `depth`;
    /// past it, refused. It bounds the memory they hold, not their number: every request a
    /// client may have in flight waits its turn.
    pub queue_bytes: usize,
    /// A request whose response has not begun within it fails with
    /// [`Failure::TimedOut`]; a body passed on that neither arrives nor is taken by its
    /// client for as long is cut short.
    pub response_timeout: Duration,
    /// A connect not done within it fails as a refused one.
    pub connect_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            connections: 4,
            streams: 60,
            depth: 16,
            queue_bytes: 16 * 1024 * 1024,
            response_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(2),
        }
    }
}

/// A response of the upstream, its fields end-to-end only (hop-by-hop ones left out), and
/// its body as it arrives: [`Event::Moved`] follows whenever more of it is in its pipe.
#[derive(Clone, Debug)]
pub struct Response<'a> {
    pub status: u16,
    pub fields: FieldLines<'a>,
    pub body: Pipe,
}

/// Why a forwarded request has no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The upstream could not be reached, closed or reset the connection, or sent what
    /// cannot be passed on (malformed, smuggling-shaped, unsolicited): 502.
    Unavailable,
    /// No response within `Settings::response_timeout`: 504.
    TimedOut,
    /// The auth service said no, with this status (401 or 403): the client's answer.
    Denied(u16),
    /// The auth service could not be asked, or answered neither yes nor no: 503.
    AuthUnavailable,
    /// Let through by the auth service, the request found the upstream's queue full: 503.
    Busy,
}

impl Failure {
    /// The status a client is answered with.
    pub fn status(self) -> Status {
        match self {
            Failure::Unavailable => Status::BadGateway,
            Failure::TimedOut => Status::GatewayTimeout,
            Failure::Denied(code) => Status::from_code(code),
            Failure::AuthUnavailable | Failure::Busy => Status::ServiceUnavailable,
        }
    }
}

/// What becomes of a forwarded request: a response and then its body's moves, the last
/// saying so; or a failure before any response. Every request taken gets exactly one
/// `Failed` or one `Moved { last: true }`, its last event.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    Response(Response<'a>),
    /// More of the response's body is in its pipe, or the pipe ended or failed. `last`:
    /// nothing more comes for this request (its body ended or failed, or its client left it).
    Moved {
        last: bool,
    },
    Failed(Failure),
}

/// Where the upstream delivers its requests' events, each with its request's token.
pub trait Sink: FnMut(u64, Event<'_>) {}

impl<F: FnMut(u64, Event<'_>)> Sink for F {}

/// Why [`Upstream::forward`] did not take a request; nothing of it is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// No connection is open and none may be opened now (the upstream is down and the
    /// backoff runs): 502.
    Unavailable,
    /// The request cannot be written for the upstream: 400.
    Invalid(WriteError),
    /// Every connection is at its depth and the queue holds its bytes' worth: 503.
    Busy,
    /// The path needs the auth service's yes, and it cannot be asked now: 503.
    AuthUnavailable,
}

impl Refused {
    /// The status a client is answered with.
    pub fn status(self) -> Status {
        match self {
            Refused::Unavailable => Status::BadGateway,
            Refused::Invalid(_) => Status::BadRequest,
            Refused::Busy | Refused::AuthUnavailable => Status::ServiceUnavailable,
        }
    }
}

/// A request not on a connection: waiting for room, or handed back by one that failed.
struct Queued {
    token: u64,
    head: bool,
    idempotent: bool,
    retried: bool,
    deadline: Instant,
    bytes: Vec<u8>,
}

/// What a connection's events reach besides the sink: the pool's backoff, and the requests
/// it hands back.
pub struct Around<'a, S> {
    sink: &'a mut S,
    resend: &'a mut Vec<Queued>,
    backoff: &'a mut Backoff,
}

/// Where a request goes.
enum Choice {
    /// To this connection.
    Conn(usize),
    /// To this idle connection, opened for it.
    Start(usize),
    /// To the queue: every live connection is at its depth.
    Wait,
    /// Nowhere: none is live, and none may be opened now.
    Unavailable,
}

/// One worker's connections to its upstream.
pub struct Upstream {
    links: Vec<Link>,
    /// The links in use are among the first `live`: those past it are idle spares
    /// (`Settings::streams`), which choosing a connection and the timers need not look at.
    live: usize,
    settings: Settings,
    queue: Queue,
    /// Handed back by a failed connection; placed before the queue.
    resend: Vec<Queued>,
    backoff: Backoff,
}

impl Upstream {
    /// `settings.connections` connections to `address` and `settings.streams` more; the
    /// first opens at once, the others when requests need them.
    pub fn new(address: Address, settings: Settings) -> Upstream {
        let settings = Settings {
            connections: settings.connections.max(1),
            ..settings
        };
        let count = settings.connections + settings.streams;
        let mut links: Vec<Link> = (0..count)
            .map(|_| Link::with_capacity(Conn::new(address.clone(), settings), 0))
            .collect();
        links[0].conn_mut().start();
        Upstream {
            links,
            live: settings.connections,
            settings,
            queue: Queue::default(),
            resend: Vec::new(),
            backoff: Backoff::default(),
        }
    }

    /// How many links there are.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn link(&self, index: usize) -> &Link {
        &self.links[index]
    }

    /// For what does not deliver events: the read buffer, the bytes to send, the close.
    pub fn link_mut(&mut self, index: usize) -> &mut Link {
        &mut self.links[index]
    }

    /// Requests waiting for room on a connection.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Writes a client's request (see [`Forward::write`]) for the upstream, its events to
    /// come with `token`, or refuses it at once.
    pub fn forward<'f, F>(
        &mut self,
        token: u64,
        request: &Forward<'_>,
        fields: F,
        now: Instant,
    ) -> Result<(), Refused>
    where
        F: IntoIterator<Item = (&'f [u8], &'f [u8])> + Clone,
    {
        let write = |out: &mut Vec<u8>| request.write(fields, out).map_err(Refused::Invalid);
        self.place(token, request.method, write, now)
    }

    /// Places a request of `method` that `write` appends to a buffer whole (it is called
    /// at most once), or refuses it at once.
    pub(super) fn place(
        &mut self,
        token: u64,
        method: &[u8],
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), Refused>,
        now: Instant,
    ) -> Result<(), Refused> {
        let queued = Queued {
            token,
            head: method == b"HEAD",
            idempotent: is_idempotent(method),
            retried: false,
            deadline: now + self.settings.response_timeout,
            bytes: Vec::new(),
        };
        match self.choose(now) {
            Choice::Conn(index) => self.links[index].conn_mut().push(queued, write),
            Choice::Start(index) => {
                self.links[index].conn_mut().push(queued, write)?;
                self.start(index);
                Ok(())
            }
            Choice::Wait if self.queue.bytes >= self.settings.queue_bytes => Err(Refused::Busy),
            Choice::Wait => {
                let mut queued = queued;
                write(&mut queued.bytes)?;
                self.queue.push_back(queued);
                Ok(())
            }
            Choice::Unavailable => Err(Refused::Unavailable),
        }
    }

    /// Where a request goes now: the live connection (open or opening) with the fewest in
    /// flight if it has none, else an idle one opened for it while fewer than
    /// `Settings::connections` count in the pool, else the live one with the fewest under
    /// its depth.
    fn choose(&self, now: Instant) -> Choice {
        let depth = self.settings.depth.max(1);
        let conns = || self.links[..self.live].iter().map(Link::conn).enumerate();
        let least = conns()
            .filter(|(_, conn)| conn.accepting() && conn.in_flight() < depth)
            .min_by_key(|(_, conn)| (conn.in_flight(), !conn.is_open()));
        let idle = match self.backoff.allows(now) && self.pooled() < self.settings.connections {
            true => conns()
                .find(|(_, conn)| conn.is_idle())
                .map(|(index, _)| index)
                .or((self.live < self.links.len()).then_some(self.live)),
            false => None,
        };
        match (least, idle) {
            (Some((index, conn)), _) if conn.in_flight() == 0 => Choice::Conn(index),
            (_, Some(index)) => Choice::Start(index),
            (Some((index, _)), None) => Choice::Conn(index),
            (None, None) if conns().any(|(_, conn)| !conn.is_idle()) => Choice::Wait,
            (None, None) => Choice::Unavailable,
        }
    }

    /// Opens idle link `index` for a request.
    fn start(&mut self, index: usize) {
        self.links[index].conn_mut().start();
        self.live = self.live.max(index + 1);
    }

    /// Leaves out of `live` the idle spares at its end.
    fn shrink_live(&mut self) {
        while self.live > self.settings.connections && self.links[self.live - 1].conn().is_idle() {
            self.live -= 1;
        }
    }

    /// How many connections count in the pool (live, not closing, not held).
    fn pooled(&self) -> usize {
        self.links[..self.live]
            .iter()
            .filter(|link| link.conn().pooled())
            .count()
    }

    /// Closes connection `index`, which has nothing in flight, if the pool has enough
    /// without it: it or another opened while it was held.
    fn close_if_surplus(&mut self, index: usize) {
        if self.links[index].conn().is_open() && self.pooled() > self.settings.connections {
            self.links[index].conn_mut().close();
        }
    }

    /// Places the requests handed back, then the queue's, while there is room; fails those
    /// past their deadline, and all of them when no connection is live nor may be opened.
    fn dispatch(&mut self, now: Instant, sink: &mut impl Sink) {
        for request in self.resend.drain(..).rev() {
            self.queue.push_front(request);
        }
        while let Some(front) = self.queue.front() {
            if front.deadline <= now {
                let token = front.token;
                self.queue.pop_front();
                sink(token, Event::Failed(Failure::TimedOut));
                continue;
            }
            let index = match self.choose(now) {
                Choice::Conn(index) => index,
                Choice::Start(index) => {
                    self.start(index);
                    index
                }
                Choice::Wait => break,
                Choice::Unavailable => {
                    for request in self.queue.drain() {
                        sink(request.token, Event::Failed(Failure::Unavailable));
                    }
                    break;
                }
            };
            let Some(mut request) = self.queue.pop_front() else {
                break;
            };
            let bytes = std::mem::take(&mut request.bytes);
            let _ = self.links[index]
                .conn_mut()
                .push(request, |out| -> Result<(), ()> {
                    out.extend_from_slice(&bytes);
                    Ok(())
                });
        }
    }

    /// Runs `f` on link `index` with what its connection's events reach, then places what
    /// it handed back and what the queue holds.
    pub fn on_link<S: Sink, T>(
        &mut self,
        index: usize,
        now: Instant,
        sink: &mut S,
        f: impl FnOnce(&mut Link, &mut Around<'_, S>) -> T,
    ) -> T {
        let mut around = Around {
            sink,
            resend: &mut self.resend,
            backoff: &mut self.backoff,
        };
        let result = f(&mut self.links[index], &mut around);
        self.dispatch(now, sink);
        if self.links[index].conn_mut().done_streaming() {
            self.close_if_surplus(index);
        }
        self.shrink_live();
        result
    }

    /// When [`Upstream::on_timers`] must run next.
    pub fn deadline(&self) -> Option<Instant> {
        let conns = self.links[..self.live]
            .iter()
            .filter_map(|link| link.conn().deadline());
        // The queue's oldest has the earliest deadline: each gets the same timeout, and a
        // request handed back goes before those that came after it.
        let queue = self.queue.front().map(|request| request.deadline);
        conns.chain(queue).min()
    }

    /// Fails what is past its deadline: connects (as refused), requests (with
    /// [`Failure::TimedOut`], closing their connections), queued requests.
    pub fn on_timers(&mut self, now: Instant, sink: &mut impl Sink) {
        let mut around = Around {
            sink,
            resend: &mut self.resend,
            backoff: &mut self.backoff,
        };
        for link in &mut self.links[..self.live] {
            if link
                .conn()
                .deadline()
                .is_some_and(|deadline| deadline <= now)
            {
                link.conn_mut().on_timer(now, &mut around);
            }
        }
        self.dispatch(now, sink);
        self.shrink_live();
    }
}

/// Requests waiting for room on a connection, oldest first, with the bytes they hold (the
/// bound of [`Settings::queue_bytes`]).
#[derive(Default)]
struct Queue {
    requests: VecDeque<Queued>,
    bytes: usize,
}

impl Queue {
    fn push_back(&mut self, request: Queued) {
        self.bytes += request.bytes.len();
        self.requests.push_back(request);
    }

    fn push_front(&mut self, request: Queued) {
        self.bytes += request.bytes.len();
        self.requests.push_front(request);
    }

    fn pop_front(&mut self) -> Option<Queued> {
        let request = self.requests.pop_front()?;
        self.bytes -= request.bytes.len();
        Some(request)
    }

    fn front(&self) -> Option<&Queued> {
        self.requests.front()
    }

    fn drain(&mut self) -> impl Iterator<Item = Queued> + '_ {
        self.bytes = 0;
        self.requests.drain(..)
    }

    fn len(&self) -> usize {
        self.requests.len()
    }
}

/// Whether a request of `method` may be sent again after a failure (RFC 9110, 9.2.2).
fn is_idempotent(method: &[u8]) -> bool {
    matches!(
        method,
        b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE"
    )
}
