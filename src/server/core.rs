//! What a worker thread does whatever moves its bytes: its stream connections, the
//! application, the PostgreSQL connections, the timers and the sweep.
//!
//! A [`Core`] is a [`Worker`] (what every connection shares: app, pool, buffers, budget,
//! clocks, timers; `core/worker.rs`) beside the table of stream connections ([`Slots`],
//! `core/slots.rs`) and, with HTTP/3, the QUIC endpoint, a table of datagram connections
//! sharing the worker (`core/datagrams.rs`). A backend (`epoll.rs`, `uring.rs`) owns the
//! waiting and the system calls that move bytes, for HTTP connections (slots) and
//! PostgreSQL connections (links) alike. It tells the core what arrived, went out or
//! failed, asks it what each socket needs next
//! ([`Core::advance`] for a slot; [`Core::link_order`] for a link, `core/links.rs`: connect
//! to this address, or close), and sends what the core has to send.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::h2;
use crate::http::Origin;
use crate::http::{BufferPool, HttpDate, Ticket, Timeouts, TIMEOUTS};
use crate::pg::{Event, Pool};
use crate::protocol::Protocol;
use crate::quic::Endpoint;
use crate::redis::{self, Redis};
use crate::service::{Context, Finished, Passed, Service, Serving};
use crate::timers::Wakeup;
use crate::transport::{Listening, TlsConfig, TlsSession, Transport};
use crate::upstream::{self, Proxy, ProxySettings};
pub(super) use links::LinkOrder;
use slots::Slots;
use worker::{Budget, Worker};

/// How long a closing connection may take to send its last bytes and see the peer's EOF.
const LINGER: Duration = Duration::from_secs(2);
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How long a new worker waits for its database connections before it takes connections:
/// requests that arrive meanwhile wait in the listen backlog rather than get a 503.
const DATABASE_GRACE: Duration = Duration::from_secs(3);

/// What a worker lets its clients cost it, and what it forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Buffer memory held for all its connections (input, output, responses in line)
    /// above which it stops reading from and answering those that hold more than an
    /// equal share.
    pub max_buffered: usize,
    /// Connections open at once; beyond it, accepts pause until the next sweep.
    pub max_conns: usize,
    pub timeouts: Timeouts,
    /// Once a signal asked the worker to stop: how long what is in flight may take to
    /// finish before the worker closes what is left and ends.
    pub drain_timeout: Duration,
    /// In edge (reverse-proxy) mode: the upstream every worker forwards to, and how.
    /// HTTP/2's and HTTP/3's requests then carry every field as it came
    /// (`http::Request::field_lines`, `h2::Limits::keep_fields`, `h3::Limits::keep_fields`),
    /// which a proxy forwards (HTTP/1.1's always do, at no cost); otherwise their decoders
    /// copy no field a route does not read.
    pub upstream: Option<ProxySettings>,
}

impl Limits {
    /// 64 MiB: a busy connection holds two 4 KiB buffers (its input and its output), so
    /// even 7,000 connections per worker (14,000 on two threads) each hold less than
    /// their share, and only those that hold far more (clients that do not read) pause.
    pub const MAX_BUFFERED: usize = 64 * 1024 * 1024;
    /// 16,384: over twice the 7,000 per worker of 14,000 connections on two threads (and
    /// HttpArena's 500); each costs a slot (about 200 bytes) and a kernel socket (a few
    /// KiB idle), so the cap costs tens of MiB at most.
    pub const MAX_CONNS: usize = 16_384;
    /// 10 s: the request timeout, so that a request begun before the signal may still
    /// arrive whole and be answered, and twice the query timeout that bounds an answer
    /// waiting on the database; under the 30 s that systemd and container runtimes wait
    /// after SIGTERM before they kill (nginx's `worker_shutdown_timeout` is off by default,
    /// but a server that never ends its drain would be killed there anyway, answers cut).
    pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_buffered: Self::MAX_BUFFERED,
            max_conns: Self::MAX_CONNS,
            timeouts: TIMEOUTS,
            drain_timeout: Self::DRAIN_TIMEOUT,
            upstream: None,
        }
    }
}

/// What the sweep found a connection needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Swept {
    /// It idled, lingered or stalled too long: close it.
    Expired,
    /// It was paused for the budget and may read again, or wrote its last word before a
    /// deadline's close: advance it.
    Resumable,
}

/// What a connection needs from its backend after [`Core::advance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Keep it; read from it while `read` is set, send its [`Core::unsent`] bytes.
    Keep { read: bool },
    /// Its last response is out: shut down writing, then read until the peer's EOF. Closing
    /// at once with unread input would reset the connection and could destroy the response
    /// the peer has not read yet.
    Linger,
    /// Done with it: close it.
    Close,
}

/// One worker's state, whatever moves its bytes. The backend tells it what arrived, went
/// out or failed, asks it what each socket needs next, and does that.
pub(super) struct Core<S, K> {
    worker: Worker<S>,
    slots: Slots<K>,
    /// The QUIC endpoint (HTTP/3), when the worker has one (`core/datagrams.rs`).
    quic: Option<Box<Endpoint>>,
}

impl<S: Service, K> Core<S, K> {
    pub fn new(service: S, pool: Pool, limits: Limits) -> Self {
        Core {
            worker: Worker::new(service, pool, limits),
            slots: Slots::default(),
            quic: None,
        }
    }

    /// Gives the worker the app's Redis connections, when it has some.
    pub fn with_redis(mut self, redis: Option<Redis>) -> Self {
        self.worker.redis = redis;
        self
    }

    /// Serves the connections of a TLS listener with `tls`.
    pub fn with_tls(mut self, tls: Option<Arc<TlsConfig>>) -> Self {
        self.worker.tls = tls;
        self
    }

    /// Reads the clocks; called once per wake-up.
    pub fn refresh(&mut self) {
        self.worker.refresh();
    }

    /// The time of the last [`Core::refresh`].
    pub fn now(&self) -> Instant {
        self.worker.now
    }

    /// Whether the worker should start taking connections now (`Worker::ready_to_listen`).
    pub fn ready_to_listen(&mut self) -> bool {
        self.worker.ready_to_listen()
    }

    /// When the backend must wake up at the latest, whatever happens on the sockets.
    pub fn next_wake(&self) -> Instant {
        let quic = self.quic.as_ref().and_then(|quic| quic.next_deadline());
        quic.into_iter().fold(self.worker.next_wake(), Instant::min)
    }

    // The HTTP connections.

    /// How many connections are open.
    pub fn open_connections(&self) -> usize {
        self.slots.open()
    }

    /// Whether the app forwards requests with their clients' addresses (X-Forwarded-For, in
    /// edge mode): then a backend that can learn a connection's address for a cost says it.
    pub fn wants_client_addresses(&self) -> bool {
        self.worker.limits.upstream.is_some()
    }

    /// Whether the worker holds as many connections as it may: accept no more for now.
    pub fn is_full(&self) -> bool {
        self.open_connections() >= self.worker.limits.max_conns
    }

    /// What each connection, over TCP or QUIC, may hold (`Budget::share`).
    fn share(&self) -> usize {
        let quic = self.quic.as_ref().map_or(0, |quic| quic.open());
        self.worker.budget.share(self.slots.open() + quic)
    }

    /// Whether the worker is over its budget and the open connection in slot `index`
    /// holds more than its share.
    fn over_budget(&self, index: usize) -> bool {
        self.slots.all[index].held as usize > self.share()
    }

    /// Notes whether slot `index` is held back for the budget: then it reads nothing and
    /// answers none of the requests it holds until its output drains or the worker is
    /// back under (a lingering connection only waits for the EOF: never held back).
    fn hold_back(&mut self, index: usize) -> bool {
        let slot = &self.slots.all[index];
        let paused =
            slot.socket.is_some() && slot.lingering_since.is_none() && self.over_budget(index);
        self.slots.all[index].paused = paused;
        paused
    }

    /// Brings the count of what slot `index` holds up to date.
    fn recount(&mut self, index: usize) {
        self.slots.all[index].recount(&mut self.worker.budget);
    }

    /// Whether the server should read from slot `index` now (a lingering one only waits
    /// for the EOF; one paused for the budget as its protocol says).
    fn may_read(&mut self, index: usize) -> bool {
        let paused = self.hold_back(index);
        let slot = &self.slots.all[index];
        let wanted = slot.lingering_since.is_some() || slot.protocol.wire().wants_input();
        wanted && (!paused || slot.protocol.reads_while_paused())
    }

    /// Takes a new connection, of a listener of `listening`, into a slot and returns
    /// the slot's index. A TLS handshake must finish within the request timeout (and the
    /// idle timeout, if shorter).
    /// `peer` is the client's address, if the backend learnt it.
    pub fn open(&mut self, socket: K, listening: Listening, peer: Option<IpAddr>) -> usize {
        let index = self.slots.vacant(self.worker.now);
        let timeouts = &self.worker.limits.timeouts;
        let handshake_by = self.worker.now + timeouts.request.min(timeouts.idle);
        let slot = &mut self.slots.all[index];
        slot.transport = match (listening.is_tls(), &self.worker.tls) {
            (true, Some(config)) => {
                let offer_h2 = listening == Listening::H2Tls;
                Transport::Tls(TlsSession::new(config.clone(), offer_h2, handshake_by))
            }
            _ => Transport::Plain,
        };
        let h2 = (listening == Listening::H2c)
            .then(|| h2_limits(&self.worker.service, &self.worker.limits));
        // Browsers look for HTTP/3 only in answers over TLS (RFC 7838's alternatives of an
        // `https` origin).
        let alt_svc = match slot.transport {
            Transport::Tls(_) => self.worker.alt_svc,
            _ => None,
        };
        slot.protocol.open(h2, alt_svc, self.worker.now);
        slot.socket = Some(socket);
        slot.peer = peer;
        slot.lingering_since = None;
        slot.paused = false;
        // A TLS session counts from the start.
        self.recount(index);
        index
    }

    /// Frees a slot; its socket is returned for the backend to close when it is safe. The
    /// kernel must be done with the connection's output (io_uring: no send in flight).
    pub fn release(&mut self, index: usize) -> Option<K> {
        let slot = &mut self.slots.all[index];
        let socket = slot.socket.take()?;
        slot.protocol
            .wire_mut()
            .give_back_all(&mut self.worker.buffers);
        slot.protocol.end(index as u32, self.worker.now);
        if let Transport::Tls(tls) = &mut slot.transport {
            tls.give_back(&mut self.worker.buffers);
        }
        slot.transport = Transport::Plain;
        self.recount(index);
        self.slots.vacate(index);
        Some(socket)
    }

    /// The socket of slot `index` while it holds a connection.
    pub fn socket(&self, index: usize) -> Option<&K> {
        self.slots.all.get(index)?.socket.as_ref()
    }

    /// The generation of slot `index`'s connection: it changes whenever the slot is reused.
    pub fn generation(&self, index: usize) -> u32 {
        self.slots.all[index].protocol.generation()
    }

    /// Whether the connection only waits for the peer's EOF (see [`Next::Linger`]).
    pub fn is_lingering(&self, index: usize) -> bool {
        self.slots.all[index].lingering_since.is_some()
    }

    /// The most bytes one request, or one WebSocket frame, may take: a connection must be
    /// able to hold that much unanswered input.
    pub fn longest_request(&self) -> usize {
        let request = crate::h1::longest_request(self.worker.service.max_body());
        request.max(crate::ws::longest_frame(self.worker.service.max_message()))
    }

    /// Received bytes the connection has not answered yet.
    pub fn buffered_input(&self, index: usize) -> usize {
        self.slots.all[index].protocol.wire().buffered_input()
    }

    /// Whether the open connection left input it can process for a pass of its own, after
    /// the worker's other connections had theirs: the backend advances it again then,
    /// without waiting for more bytes (a connection processes a bounded amount per pass).
    pub fn owes_a_pass(&self, index: usize) -> bool {
        let slot = &self.slots.all[index];
        slot.socket.is_some()
            && slot.lingering_since.is_none()
            && slot.protocol.wire().has_input_waiting()
    }

    /// Reads into the connection's input with `read`, which returns how many bytes it
    /// appended (0: the peer's EOF). `None` when the connection wants no input now, or
    /// the worker is over its budget and the connection holds more than its share.
    pub fn read(
        &mut self,
        index: usize,
        read: impl FnOnce(&K, &mut Vec<u8>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        if index >= self.slots.all.len() || !self.may_read(index) {
            return None;
        }
        self.take_input(index, read)
    }

    /// Bytes that arrived for the connection in a buffer of the backend's (none: the
    /// peer's EOF), wanted or not.
    pub fn received(&mut self, index: usize, bytes: &[u8]) {
        if self.is_tls(index) {
            return self.decrypt(index, bytes);
        }
        let _ = self.take_input(index, |_, input| {
            input.extend_from_slice(bytes);
            Ok(bytes.len())
        });
    }

    fn is_tls(&self, index: usize) -> bool {
        let slot = self.slots.all.get(index);
        slot.is_some_and(|slot| matches!(slot.transport, Transport::Tls(_)))
    }

    /// Hands ciphertext (none: the peer's EOF) to the connection's TLS session, and what
    /// it decrypts to the connection. A lingering connection drops it: only the EOF matters.
    fn decrypt(&mut self, index: usize, ciphertext: &[u8]) {
        let slot = &mut self.slots.all[index];
        let Transport::Tls(tls) = &mut slot.transport else {
            return;
        };
        if slot.socket.is_none() {
            return;
        }
        let more = match (ciphertext.is_empty(), slot.lingering_since) {
            (true, _) => false,
            (false, None) => {
                let plaintext = slot.protocol.wire_mut().input(&mut self.worker.buffers);
                tls.receive(ciphertext, plaintext)
            }
            (false, Some(_)) => true,
        };
        if !more {
            slot.protocol.wire_mut().peer_closed();
        }
        self.recount(index);
    }

    /// A lingering connection drops what it reads: only the EOF matters. A TLS connection
    /// reads ciphertext into a spare buffer first.
    fn take_input(
        &mut self,
        index: usize,
        read: impl FnOnce(&K, &mut Vec<u8>) -> io::Result<usize>,
    ) -> Option<io::Result<usize>> {
        let slot = self.slots.all.get_mut(index)?;
        let socket = slot.socket.as_ref()?;
        if let Transport::Tls(_) = slot.transport {
            let mut ciphertext = self.worker.buffers.take();
            let result = read(socket, &mut ciphertext);
            if result.is_ok() {
                self.decrypt(index, &ciphertext);
            }
            self.worker.buffers.give_back(ciphertext);
            return Some(result);
        }
        let input = slot.protocol.wire_mut().input(&mut self.worker.buffers);
        let result = read(socket, input);
        if slot.lingering_since.is_some() {
            input.clear();
        }
        if let Ok(0) = result {
            slot.protocol.wire_mut().peer_closed();
        }
        self.recount(index);
        Some(result)
    }

    /// The connection's bytes to send.
    pub fn unsent(&self, index: usize) -> &[u8] {
        let slot = &self.slots.all[index];
        match &slot.transport {
            Transport::Plain => slot.protocol.wire().unsent(),
            Transport::Tls(tls) => tls.unsent(),
        }
    }

    /// Brings a connection up to date after bytes arrived or went out: answers the requests
    /// or messages that can be answered and decides whether to read, to linger or to close.
    /// `may_write` is false while the kernel sends from the connection's output (io_uring):
    /// then nothing is added to it.
    pub fn advance(&mut self, index: usize, may_write: bool) -> Next {
        let paused = self.hold_back(index);
        let next = match self.answer(index, may_write, paused) {
            Next::Keep { .. } => Next::Keep {
                read: self.may_read(index),
            },
            next => next,
        };
        // Whatever happened, a connection with nothing buffered holds no buffer.
        self.slots.all[index]
            .protocol
            .wire_mut()
            .give_back_idle(&mut self.worker.buffers);
        self.recount(index);
        next
    }

    /// Answers what can be answered; `Keep` leaves whether to read to the caller. A
    /// connection `paused` for the budget answers nothing new, but what it has written
    /// still goes out: over TLS it is sealed here (HTTP/2's answers waiting for room follow
    /// it), HTTP/2 still reads its frames (windows, resets, pings), and piped bodies move
    /// on under its lowered mark; that is how a paused connection gets back under its
    /// share. While the worker drains, the connection is told so in its protocol each time
    /// (`core/drain.rs`).
    fn answer(&mut self, index: usize, may_write: bool, paused: bool) -> Next {
        let share = self.share();
        let draining = may_write && self.worker.drain_by.is_some();
        let Worker {
            service,
            pool,
            buffers,
            date,
            now,
            timers,
            redis,
            upstream,
            limits,
            ..
        } = &mut self.worker;
        let slot = &mut self.slots.all[index];
        if slot.socket.is_none() {
            return Next::Close;
        }
        if slot.lingering_since.is_some() {
            return match slot.protocol.wire().peer_eof() {
                true => Next::Close,
                false => Next::Keep { read: true },
            };
        }
        if may_write && !paused {
            if let Protocol::ReadVersion(_) = slot.protocol {
                let alpn_h2 = matches!(&slot.transport, Transport::Tls(tls) if tls.chose_h2());
                slot.protocol
                    .settle(alpn_h2, h2_limits(service, limits), *now);
            }
        }
        if draining {
            slot.protocol.wire_mut().drain(buffers);
        }
        if may_write && paused {
            slot.protocol
                .process_while_paused(date, *now, buffers, share);
        }
        if may_write && !paused {
            let mut cx = Context {
                date,
                now: *now,
                db: pool,
                timers,
                redis: redis.as_mut(),
                upstream: upstream.as_mut(),
                origin: Origin {
                    client: slot.peer,
                    https: matches!(slot.transport, Transport::Tls(_)),
                },
            };
            let max_body = service.max_body();
            let mut serving = Serving {
                service,
                cx: &mut cx,
            };
            if let Protocol::Http1(conn) = &mut slot.protocol {
                conn.collect(date, buffers, share);
                conn.process_within(&mut serving, max_body, date, *now, buffers, share);
                // A 101 hands what came after it to the session, answered in this pass.
                slot.protocol.switch_when_ready(*now);
                if draining {
                    slot.protocol.wire_mut().drain(buffers);
                }
            }
            match &mut slot.protocol {
                Protocol::ReadVersion(_) | Protocol::Http1(_) => {}
                Protocol::Http2(conn, generation) => {
                    conn.process(date, *now, buffers, share);
                    let connection = (index as u32, *generation);
                    conn.serve(&mut serving, connection, date, *now, buffers);
                }
                Protocol::WebSocket(session) => {
                    let max_message = serving.service.max_message();
                    let on_message = |message: crate::ws::Message<'_>, out: &mut Vec<u8>| {
                        serving.service.on_message(message, out)
                    };
                    session.process(on_message, max_message, *now, buffers, share);
                }
            }
        }
        if may_write {
            let wire = slot.protocol.wire_mut();
            if let Transport::Tls(tls) = &mut slot.transport {
                let taken = tls.seal(wire.unsent(), buffers);
                wire.mark_sent(taken, *now);
                if wire.is_finished() {
                    tls.close(buffers);
                }
            }
            if wire.is_finished() && slot.transport.is_closed() {
                // No linger when the peer is done, or asked for the close with nothing
                // after it in plaintext (over TLS its close_notify may follow, and closing
                // with it unread would reset the connection under the last answer).
                let plain = matches!(slot.transport, Transport::Plain);
                if wire.peer_eof() || (plain && slot.protocol.close_asked()) {
                    return Next::Close;
                }
                slot.lingering_since = Some(*now);
                return Next::Linger;
            }
        }
        Next::Keep { read: true }
    }

    /// `n` bytes of the connection's [`Core::unsent`] went out: the kernel is done with
    /// them. Its output buffer goes back once all of it is sent. Returns whether advancing
    /// it again could answer or read more: all is sent, and requests or responses were
    /// held back while the output was full, or it was paused for the budget, or it is
    /// finished.
    pub fn sent(&mut self, index: usize, n: usize) -> bool {
        let slot = &mut self.slots.all[index];
        let conn = slot.protocol.wire_mut();
        let drained = match &mut slot.transport {
            Transport::Plain => {
                conn.mark_sent(n, self.worker.now);
                conn.give_back_idle(&mut self.worker.buffers);
                conn.unsent().is_empty()
            }
            Transport::Tls(tls) => {
                tls.sent(n, &mut self.worker.buffers);
                tls.unsent().is_empty()
            }
        };
        // A TLS connection's plaintext still to seal is work too.
        let work = !conn.unsent().is_empty() || conn.has_backlog() || conn.is_finished();
        let again = drained && (work || slot.paused);
        self.recount(index);
        again
    }

    /// Moves the slots that received responses from the database since the last call into
    /// `into` (emptied first), for the backend to advance.
    pub fn take_completed(&mut self, into: &mut Vec<usize>) {
        into.clear();
        std::mem::swap(into, &mut self.slots.completed);
    }

    /// Answers the requests whose time has come, runs the database, Redis and upstream
    /// connections' timers (reconnects, deadlines), and gives back connections another
    /// thread needs more.
    pub fn on_timers(&mut self) {
        let mut timers = std::mem::take(&mut self.worker.timers);
        let mut deliver = self.split().deliver;
        timers.run(deliver.now, |wakeup| deliver.timer(wakeup));
        let quic = self.quic.as_deref();
        timers.sweep_when_grown(|wakeup| is_live(&self.slots, quic, &wakeup.ticket));
        self.worker.timers = timers;
        self.run_quic_deadlines();

        let Split {
            pool,
            mut redis,
            upstream,
            mut deliver,
        } = self.split();
        let now = deliver.now;
        pool.on_timer(now, &mut |token, event| {
            deliver.event(token, event, redis.as_deref_mut())
        });
        pool.balance();
        if let Some(redis) = redis {
            redis.on_timers(now, &mut |token, event| {
                deliver.redis_event(token, event, pool)
            });
        }
        if let Some(upstream) = upstream {
            upstream.on_timers(now, &mut |token, event| {
                deliver.upstream_event(token, event)
            });
        }
    }
}

/// Hands database, Redis and upstream events and timers to the app, and the answers they
/// finish to their connections.
struct Deliverer<'a, S, K> {
    service: &'a mut S,
    slots: &'a mut Slots<K>,
    quic: Option<&'a mut Endpoint>,
    buffers: &'a mut BufferPool,
    budget: &'a mut Budget,
    date: &'a HttpDate,
    now: Instant,
}

impl<S: Service, K> Deliverer<'_, S, K> {
    /// A database event, with the worker's Redis connections the request may go on with.
    fn event(&mut self, token: u64, event: Event<'_>, redis: Option<&mut Redis>) {
        self.finish(|service| service.on_database_event(token, event, redis));
    }

    /// A Redis event, with the worker's database connections the request may go on with.
    fn redis_event(&mut self, token: u64, event: redis::Event<'_>, db: &mut Pool) {
        self.finish(|service| service.on_redis_event(token, event, db));
    }

    fn upstream_event(&mut self, token: u64, event: upstream::Event<'_>) {
        self.pass(|service| service.on_upstream_event(token, event));
    }

    fn timer(&mut self, Wakeup { ticket, token }: Wakeup) {
        if is_live(self.slots, self.quic.as_deref(), &ticket) {
            self.finish(|service| service.on_timer(ticket, token));
        }
    }

    /// Writes the answer that `finished` gives, if any, into its connection's line, and
    /// notes the connection for the backend to send it.
    fn finish<'f>(&'f mut self, finished: impl FnOnce(&'f mut S) -> Option<Finished<'f>>) {
        self.pass(|service| finished(service).map(Passed::Answer));
    }

    /// Does what `passed` gives, if anything: an answer goes into its connection's line;
    /// a piped body's move has its protocol take what it has room for. Either way the
    /// connection is noted for the backend to send what it wrote.
    fn pass<'f>(&'f mut self, passed: impl FnOnce(&'f mut S) -> Option<Passed<'f>>) {
        let (ticket, answer) = match passed(&mut *self.service) {
            None => return,
            Some(Passed::Answer(Finished { ticket, answer })) => (ticket, answer),
            Some(Passed::Body(ticket)) => {
                let (slots, budget) = (&mut *self.slots, &mut *self.budget);
                return moved(slots, self.quic.as_deref_mut(), budget, self.now, ticket);
            }
        };
        if datagrams::is_quic(&ticket) {
            if let Some(quic) = &mut self.quic {
                quic.answer(ticket, answer, self.date, self.now);
                self.budget.recount_quic(quic.held());
            }
            return;
        }
        let index = ticket.slot as usize;
        let Some(slot) = self.slots.all.get_mut(index) else {
            return;
        };
        if slot.socket.is_none() {
            return;
        }
        // A connection switched to WebSocket has no request in the works (it switches only
        // once every answer before the `101` is in its output).
        match &mut slot.protocol {
            Protocol::Http1(conn) => {
                conn.complete(ticket, &answer, self.date, self.now, self.buffers)
            }
            Protocol::Http2(conn, generation) if *generation == ticket.generation => {
                // Not in a pass: the kernel may be sending from its output (io_uring).
                let (date, now, buffers) = (self.date, self.now, &mut *self.buffers);
                conn.for_event(|conn| conn.answer(ticket.seq, &answer, date, now, buffers))
            }
            _ => return,
        }
        slot.recount(self.budget);
        self.slots.completed.push(index);
    }
}

/// More of the piped body answering `ticket` is in, or it ended or failed: HTTP/3 writes
/// what QUIC has room for now (its datagrams go out of buffers of their own); HTTP/1.1 and
/// HTTP/2 once the backend advances the connection, where the core may write its output
/// (not while the kernel sends from it, io_uring). Its pipe grew: counted now.
fn moved<K>(
    slots: &mut Slots<K>,
    quic: Option<&mut Endpoint>,
    budget: &mut Budget,
    now: Instant,
    ticket: Ticket,
) {
    if datagrams::is_quic(&ticket) {
        if let Some(quic) = quic {
            quic.moved(ticket, now);
            budget.recount_quic(quic.held());
        }
        return;
    }
    let index = ticket.slot as usize;
    let Some(slot) = slots.all.get_mut(index) else {
        return;
    };
    if slot.socket.is_none() {
        return;
    }
    match &mut slot.protocol {
        Protocol::Http1(_) => {}
        Protocol::Http2(conn, generation) if *generation == ticket.generation => {
            conn.moved(ticket.seq)
        }
        _ => return,
    }
    slot.recount(budget);
    slots.completed.push(index);
}

/// An HTTP/2 connection's limits: the defaults, with the app's largest body and whether
/// the worker keeps requests' fields.
fn h2_limits<S: Service>(service: &S, limits: &Limits) -> h2::Limits {
    h2::Limits {
        max_body: service.max_body(),
        keep_fields: limits.upstream.is_some(),
        ..h2::Limits::default()
    }
}

impl<S: Service, K> Core<S, K> {
    /// The pool, Redis and the upstream apart from what their events are delivered to: the
    /// app, and the connections that the app's finished answers go to.
    fn split(&mut self) -> Split<'_, S, K> {
        let Worker {
            service,
            pool,
            redis,
            upstream,
            buffers,
            budget,
            date,
            now,
            ..
        } = &mut self.worker;
        let deliverer = Deliverer {
            service,
            slots: &mut self.slots,
            quic: self.quic.as_deref_mut(),
            buffers,
            budget,
            date,
            now: *now,
        };
        Split {
            pool,
            redis: redis.as_mut(),
            upstream: upstream.as_mut(),
            deliver: deliverer,
        }
    }
}

/// The worker's outgoing connections, each borrowed apart, and what delivers their events.
struct Split<'a, S, K> {
    pool: &'a mut Pool,
    redis: Option<&'a mut Redis>,
    upstream: Option<&'a mut Proxy>,
    deliver: Deliverer<'a, S, K>,
}

/// Whether the connection `ticket` was given to, a slot's or a QUIC one's, is still open.
fn is_live<K>(slots: &Slots<K>, quic: Option<&Endpoint>, ticket: &Ticket) -> bool {
    match datagrams::is_quic(ticket) {
        true => quic.is_some_and(|quic| quic.is_live(ticket)),
        false => slots.is_live(ticket),
    }
}

mod datagrams;
mod drain;
mod links;
mod slots;
mod sweep;
#[cfg(test)]
mod tests;
mod worker;
