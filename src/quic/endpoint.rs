//! One worker's QUIC endpoint: its UDP socket's datagrams in, each to its connection, and
//! the connections' datagrams out, with each connection's deadline in the worker's timers.
//! `quinn_proto` does QUIC itself (packets, TLS 1.3 inside, loss recovery, congestion,
//! flow control); this drives it as quinn-proto asks: `handle` a datagram, then for the
//! connection it reached: its endpoint events, its application events (streams, which
//! HTTP/3 reads), `poll_transmit` until it has nothing, and `poll_timeout`.
//!
//! ```text
//!  datagram ──Endpoint::handle──▶ NewConnection ──accept / retry / refuse──▶ Peer
//!                               ├▶ ConnectionEvent ─────────────────────────▶ Peer::conn.handle_event
//!                               └▶ Response (version negotiation, stateless reset, a close) ──▶ Outbox
//!  a deadline ──handle_timeout──▶ Peer                 Peer ──poll_transmit──▶ Outbox ──▶ sendmsg
//! ```

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    ConnectionHandle, DatagramEvent, EcnCodepoint, EndpointConfig, Incoming, ServerConfig,
};

use super::cid::{NextOwner, WorkerCids};
use super::outbox::{Outbox, MAX_SEGMENTS};
use super::peer::Peer;
use super::spread::Spread;
use crate::h3;
use crate::http::{Answer, Handler, HttpDate, Ticket};
use crate::timers::Timers;

/// Handshakes under way past which a client must first prove its address (a Retry): an
/// Initial flood from forged addresses then costs one stateless packet each, no state.
pub const RETRY_ABOVE: usize = 64;

/// How often the endpoint looks at every connection (late requests), and how long a client
/// sent to another worker with a Retry counts there before it arrives.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The bit that marks a ticket's slot as a QUIC connection's (the rest is its handle),
/// apart from the stream connections' slots.
pub const QUIC_SLOT: u32 = 1 << 31;

/// What an endpoint takes and holds.
#[derive(Clone, Copy)]
pub struct Bounds {
    /// Connections open at once; more are refused.
    pub connections: usize,
    /// The worker's `--max-buffered`: the connections' send windows share it (each between
    /// [`MIN_SEND_WINDOW`] and quinn-proto's `SEND_WINDOW`), since what quinn-proto holds
    /// until the peer acknowledges it is out of the budget's sight.
    pub buffered: usize,
    /// A request must be all in within this of its first bytes.
    pub request_timeout: Duration,
    pub h3: h3::Limits,
}

/// The least send window a connection is given, however many share the budget: room for a
/// few datagrams in flight.
const MIN_SEND_WINDOW: u64 = 64 * 1024;

/// A connection's deadline as it was when scheduled; a moved one leaves its old entry,
/// ignored when it comes due.
#[derive(Clone, Copy)]
struct Deadline {
    handle: ConnectionHandle,
    at: Instant,
}

/// What the requests a datagram or a deadline completes are answered with, and what each
/// connection may hold of the worker's budget (`usize::MAX` while it is not spent).
pub struct Serve<'a, H> {
    pub handler: &'a mut H,
    pub date: &'a HttpDate,
    pub now: Instant,
    pub share: usize,
}

pub struct Endpoint {
    quic: quinn_proto::Endpoint,
    server: Arc<ServerConfig>,
    /// This worker's index, which its connection IDs carry.
    worker: u8,
    /// How many connections each worker holds, to send a new client to the one with fewest.
    spread: Arc<Spread>,
    /// The worker the next connection ID quinn-proto makes names (a Retry's).
    next_owner: NextOwner,
    /// When it next resets the requests late past `request_timeout` and forgets the
    /// clients promised to this worker (`Spread::forget_promised`).
    next_sweep: Instant,
    request_timeout: Duration,
    /// What the connections' send windows share (`Bounds::buffered`).
    buffered: usize,
    /// By handle: `quinn_proto` hands out small indexes and reuses them.
    peers: Vec<Option<Peer>>,
    deadlines: Timers<Deadline>,
    outbox: Outbox,
    /// The buffer of the endpoint's own answers (`handle`'s `buf`).
    scratch: Vec<u8>,
    max_connections: usize,
    limits: h3::Limits,
    /// The next connection's generation.
    generation: u32,
    /// Connections open, and those of them still in their handshake.
    open: usize,
    handshaking: usize,
    /// What their HTTP/3 connections hold, as last counted (each `Peer::held`).
    held: usize,
    /// Connections that left bytes unread for the budget: served again at each round of
    /// deadlines, since a client stopped by flow control may send nothing to wake them.
    starved: Vec<ConnectionHandle>,
}

impl Endpoint {
    /// The endpoint of worker `worker`, serving with `server` (shared by the workers, so
    /// that a Retry token one mints another takes) within `bounds`, its new clients shared
    /// with the other workers by `spread`.
    pub fn new(worker: u8, server: Arc<ServerConfig>, bounds: Bounds, spread: Arc<Spread>) -> Self {
        let mut config = EndpointConfig::default();
        let next_owner = NextOwner::default();
        let owner = next_owner.clone();
        config.cid_generator(move || Box::new(WorkerCids::new(worker, owner.clone())));
        // Path MTU discovery: the socket sets the Don't Fragment bit (`sys::udp_socket`).
        let quic = quinn_proto::Endpoint::new(Arc::new(config), Some(server.clone()), true, None);
        spread.set_open(worker, 0);
        Endpoint {
            quic,
            server,
            worker,
            spread,
            next_owner,
            next_sweep: Instant::now() + SWEEP_EVERY,
            request_timeout: bounds.request_timeout,
            buffered: bounds.buffered,
            peers: Vec::new(),
            deadlines: Timers::default(),
            outbox: Outbox::default(),
            scratch: Vec::new(),
            max_connections: bounds.connections,
            limits: bounds.h3,
            generation: 0,
            open: 0,
            handshaking: 0,
            held: 0,
            starved: Vec::new(),
        }
    }

    /// A datagram arrived from `from` (to `local`, if the socket tells).
    pub fn handle<H: Handler>(
        &mut self,
        from: SocketAddr,
        local: Option<IpAddr>,
        ecn: Option<EcnCodepoint>,
        datagram: &[u8],
        serve: &mut Serve<'_, H>,
    ) {
        let data = BytesMut::from(datagram);
        let mut scratch = std::mem::take(&mut self.scratch);
        match self
            .quic
            .handle(serve.now, from, local, ecn, data, &mut scratch)
        {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(peer) = self.peer(handle) {
                    peer.conn.handle_event(event);
                    self.drive(handle, serve);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.incoming(incoming, serve),
            Some(DatagramEvent::Response(transmit)) => {
                let bytes = std::mem::replace(&mut scratch, self.outbox.buffer());
                self.outbox.push(transmit, bytes);
            }
            None => {}
        }
        scratch.clear();
        self.scratch = scratch;
    }

    /// A client's first Initial: accepted; or answered with a Retry that sends it to the
    /// worker with the fewest connections when this one has more (`spread.rs`), or to this
    /// one again while many handshakes are under way and the client has not proved its
    /// address; refused when full.
    fn incoming<H: Handler>(&mut self, incoming: Incoming, serve: &mut Serve<'_, H>) {
        let mut buf = self.outbox.buffer();
        if !incoming.may_retry() {
            self.spread.arrived(self.worker);
        }
        if self.open >= self.max_connections {
            let transmit = self.quic.refuse(incoming, &mut buf);
            return self.outbox.push(transmit, buf);
        }
        let flood = !incoming.remote_address_validated() && self.handshaking >= RETRY_ABOVE;
        let elsewhere = incoming
            .may_retry()
            .then(|| self.spread.elsewhere(self.worker))
            .flatten();
        if flood || elsewhere.is_some() {
            let to = elsewhere.unwrap_or(self.worker);
            self.next_owner.set(to);
            let retry = self.quic.retry(incoming, &mut buf);
            self.next_owner.clear();
            match retry {
                Ok(transmit) => {
                    self.spread.promise(to);
                    return self.outbox.push(transmit, buf);
                }
                Err(err) => self.quic.ignore(err.into_incoming()),
            }
            return self.outbox.give_back(buf);
        }
        let server = Some(self.server.clone());
        match self.quic.accept(incoming, serve.now, &mut buf, server) {
            Ok((handle, conn)) => {
                self.outbox.give_back(buf);
                let index = handle.0;
                if self.peers.len() <= index {
                    self.peers.resize_with(index + 1, || None);
                }
                self.generation = self.generation.wrapping_add(1);
                self.peers[index] = Some(Peer::new(conn, self.generation, self.limits));
                self.open += 1;
                self.spread.set_open(self.worker, self.open);
                self.handshaking += 1;
                self.drive(handle, serve);
            }
            Err(error) => match error.response {
                Some(transmit) => self.outbox.push(transmit, buf),
                None => self.outbox.give_back(buf),
            },
        }
    }

    /// Runs the connections' deadlines that are due.
    pub fn on_timers<H: Handler>(&mut self, serve: &mut Serve<'_, H>) {
        if serve.now >= self.next_sweep {
            self.sweep(serve.now);
        }
        for handle in std::mem::take(&mut self.starved) {
            self.drive(handle, serve);
        }
        // Taken one at a time: handling one schedules the connection's next deadline.
        while let Some(Deadline { handle, at }) = self.deadlines.pop_due(serve.now) {
            if let Some(peer) = self.peer(handle).filter(|peer| peer.deadline == Some(at)) {
                peer.deadline = None;
                peer.conn.handle_timeout(serve.now);
                self.drive(handle, serve);
            }
        }
        let peers = &self.peers;
        self.deadlines.sweep_when_grown(|deadline| {
            let peer = peers.get(deadline.handle.0).and_then(Option::as_ref);
            peer.is_some_and(|peer| peer.deadline == Some(deadline.at))
        });
    }

    /// Resets every connection's late requests, and forgets the clients promised to this
    /// worker that did not come.
    fn sweep(&mut self, now: Instant) {
        self.next_sweep = now + SWEEP_EVERY;
        self.spread.forget_promised(self.worker);
        for index in 0..self.peers.len() {
            if let Some(peer) = self.peers[index].as_mut() {
                peer.reset_late_requests(now, self.request_timeout);
                self.transmit(ConnectionHandle(index), now, false);
            }
        }
    }

    /// The earliest deadline of its connections.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.earliest()
    }

    /// Brings connection `handle` up to date after it took a datagram or a deadline: the
    /// endpoint's part of its events, its streams and requests, what it has to send, its
    /// next deadline; forgets it once it is drained.
    fn drive<H: Handler>(&mut self, handle: ConnectionHandle, serve: &mut Serve<'_, H>) {
        let Some(peer) = self.peers.get_mut(handle.0).and_then(Option::as_mut) else {
            return;
        };
        let mut drained = false;
        while let Some(event) = peer.conn.poll_endpoint_events() {
            drained |= event.is_drained();
            if let Some(event) = self.quic.handle_event(handle, event) {
                peer.conn.handle_event(event);
            }
        }
        let window = (self.buffered / self.open.max(1)) as u64;
        peer.set_send_window(window.clamp(MIN_SEND_WINDOW, super::SEND_WINDOW));
        let was_established = peer.established;
        let slot = QUIC_SLOT | handle.0 as u32;
        peer.serve(serve.handler, slot, serve.date, serve.now, serve.share);
        if peer.established && !was_established {
            self.handshaking -= 1;
        }
        if peer.has_unread() && !self.starved.contains(&handle) {
            self.starved.push(handle);
        }
        self.transmit(handle, serve.now, drained);
    }

    /// The answer to the request of `ticket`, given later.
    pub fn answer(&mut self, ticket: Ticket, answer: Answer<'_>, date: &HttpDate, now: Instant) {
        self.on_ticket(ticket, now, |peer| {
            peer.answer(ticket.seq, answer, date, now)
        });
    }

    /// More of the piped body answering `ticket` is in (or it ended or failed): its
    /// stream takes what QUIC has room for.
    pub fn moved(&mut self, ticket: Ticket, now: Instant) {
        self.on_ticket(ticket, now, |peer| peer.moved(now));
    }

    /// Runs `f` on the connection of `ticket`, if it is still the one that took it, and
    /// sends what that wrote.
    fn on_ticket(&mut self, ticket: Ticket, now: Instant, f: impl FnOnce(&mut Peer)) {
        let handle = ConnectionHandle((ticket.slot & !QUIC_SLOT) as usize);
        let Some(peer) = self
            .peer(handle)
            .filter(|p| p.generation == ticket.generation)
        else {
            return;
        };
        f(peer);
        self.transmit(handle, now, false);
    }

    /// Whether the connection `ticket` names is still open.
    pub fn is_live(&self, ticket: &Ticket) -> bool {
        let index = (ticket.slot & !QUIC_SLOT) as usize;
        let peer = self.peers.get(index).and_then(Option::as_ref);
        peer.is_some_and(|peer| peer.generation == ticket.generation)
    }

    /// Queues what connection `handle` has to send, schedules its next deadline, and
    /// forgets it if it is `drained`.
    fn transmit(&mut self, handle: ConnectionHandle, now: Instant, drained: bool) {
        let Some(peer) = self.peers.get_mut(handle.0).and_then(Option::as_mut) else {
            return;
        };
        loop {
            let mut buf = self.outbox.buffer();
            match peer.conn.poll_transmit(now, MAX_SEGMENTS, &mut buf) {
                Some(transmit) => self.outbox.push(transmit, buf),
                None => break self.outbox.give_back(buf),
            }
        }
        let holds = peer.h3.held();
        self.held = self.held - peer.held + holds;
        peer.held = holds;
        let deadline = peer.conn.poll_timeout();
        if deadline != peer.deadline {
            peer.deadline = deadline;
            if let Some(at) = deadline {
                self.deadlines.schedule(at, Deadline { handle, at });
            }
        }
        if drained {
            if !peer.established {
                self.handshaking -= 1;
            }
            self.held -= peer.held;
            self.peers[handle.0] = None;
            self.open -= 1;
            self.spread.set_open(self.worker, self.open);
        }
    }

    fn peer(&mut self, handle: ConnectionHandle) -> Option<&mut Peer> {
        self.peers.get_mut(handle.0).and_then(Option::as_mut)
    }

    /// Connections open (handshaking, established or closing).
    pub fn open(&self) -> usize {
        self.open
    }

    /// The memory its connections' HTTP/3 holds, for the worker's budget. (quinn-proto's
    /// own buffers are bounded by each connection's flow-control windows: `quic/mod.rs`.)
    pub fn held(&self) -> usize {
        self.held
    }

    /// Connections not yet closed: those still in their handshake or serving. A closed
    /// one lingers a few round trips to answer the peer's late packets with its close.
    pub fn serving(&self) -> usize {
        let peers = self.peers.iter().flatten();
        peers.filter(|peer| !peer.conn.is_closed()).count()
    }

    /// The server drains: every connection is told (GOAWAY) and closes once what it
    /// took is answered; no new one is taken.
    pub fn drain(&mut self, now: Instant) {
        self.max_connections = 0;
        for index in 0..self.peers.len() {
            if let Some(peer) = self.peers[index].as_mut() {
                peer.drain(now);
                self.transmit(ConnectionHandle(index), now, false);
            }
        }
    }

    /// What is left to send.
    pub fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    /// Whether everything it had to send is out.
    pub fn outbox_is_empty(&self) -> bool {
        self.outbox.is_empty()
    }
}
