//! A link: a connection without I/O (a PostgreSQL connection, an upstream HTTP/1.1 one, a
//! Redis one) with the socket it wants, for whoever moves the socket's bytes (a server's event
//! loop, or over poll(2) `pg::blocking::Driver` and, for a link of any connection,
//! `poll::Socket`).
//!
//! The link decides everything about the socket: when to open it and where to, when to
//! close it, what to send, what the received bytes and the socket's failures mean. The mover
//! does what [`Link::order`] says, reads into [`Link::read_buffer`] when it can, sends
//! [`Link::unsent`] and reports back. One socket at a time (see [`Order::Close`]). What the
//! connection is, and what its events are delivered to (`K`), is the connection's: it
//! implements [`Conn`] and [`Driven`].

mod input;
pub mod poll;

use std::io;
use std::time::{Duration, Instant};

pub use self::input::Input;
pub use crate::sys::Address;

/// The pacing of a pool's connects after consecutive failures (an upstream's, Redis's): from
/// 100 ms, doubling, to 2 s; a success starts it over.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
    until: Option<Instant>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(2);

    pub fn failed(&mut self, now: Instant) {
        let delay = Self::FIRST
            .saturating_mul(1 << self.failures.min(10))
            .min(Self::MAX);
        self.failures += 1;
        self.until = Some(now + delay);
    }

    pub fn succeeded(&mut self) {
        *self = Backoff::default();
    }

    pub fn allows(&self, now: Instant) -> bool {
        self.until.is_none_or(|until| now >= until)
    }
}

/// What the connection needs from its link right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A socket connecting to [`Driven::address`] (`connecting`, then `connected` or
    /// `transport_failed`).
    Connect,
    /// The link's connect is under way.
    Connecting,
    /// Bytes exchanged: read into `read_buffer` (`filled`), sent from `take_output`.
    Io,
    /// No socket (backoff, parked, idle): the link closes any it holds.
    Idle,
}

/// Bytes sure to come: before the oldest request is answered, and in all (at least).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floors {
    pub request: usize,
    pub owed: usize,
}

/// What a link asks of its connection, whatever the connection's events are delivered to.
pub trait Conn {
    fn step(&self) -> Step;
    /// Changes whenever a new socket is wanted: a link whose socket is of an older
    /// generation closes it, and drops whatever that socket still delivers.
    fn generation(&self) -> u64;
    /// Room to read into (at least a byte).
    fn read_buffer(&mut self) -> &mut [u8];
    /// Appends what the connection has to send to `out`.
    fn take_output(&mut self, out: &mut Vec<u8>);
    fn has_output(&self) -> bool;
    /// The bytes sure to come, for the socket's receive low-water mark; `None`: no mark.
    fn read_low_water(&self) -> Option<Floors> {
        None
    }
    /// Whether its socket should be read now: a connection whose reader is held back (an
    /// upstream's body its client has not taken) says no, and the mover leaves the bytes in
    /// the kernel, whose window then holds the peer back.
    fn wants_input(&self) -> bool {
        true
    }
}

/// What a link tells its connection, with `K`, what the connection delivers its events to.
pub trait Driven<K>: Conn {
    /// Where to connect for [`Step::Connect`]; `None` when there is no address, after the
    /// connection failed for it.
    fn address(&mut self, now: Instant, sink: &mut K) -> Option<Address>;
    /// The mover has started its connect.
    fn connecting(&mut self, now: Instant);
    /// The socket is connected.
    fn connected(&mut self, now: Instant, sink: &mut K);
    /// `n` bytes were read into [`Conn::read_buffer`]; 0 is the peer's EOF.
    fn filled(&mut self, n: usize, now: Instant, sink: &mut K);
    /// The socket failed, or could not connect.
    fn transport_failed(&mut self, error: io::Error, now: Instant, sink: &mut K);
}

/// What the link asks of its mover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Open a socket, start a non-blocking connect to the address, and report how it ended
    /// with [`Link::connected`] (also when the socket cannot even be made).
    Connect(Address),
    /// Close the socket once nothing under way refers to it any more, then report
    /// [`Link::closed`]. Until then, what it delivers is dropped, and no new socket is
    /// ordered: nothing still under way on the old one (an io_uring operation, say) can be
    /// taken for the new one's.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Socket {
    /// The mover holds no socket.
    None,
    /// Connecting, for the connection's generation.
    Connecting(u64),
    /// Connected, for the connection's generation.
    Open(u64),
    /// Told to close; not reported closed yet.
    Closing,
}

pub struct Link<C> {
    conn: C,
    socket: Socket,
    /// Bytes taken from the connection for sending; `out[sent..]` is not sent yet. The mover
    /// sends from here, and nothing changes them until it has reported them sent or the
    /// socket closed: the kernel may be reading them (io_uring).
    out: Vec<u8>,
    sent: usize,
    /// The socket's receive low-water mark as last ordered (a new socket's is 1).
    low_water: usize,
}

impl<C: Conn> Link<C> {
    /// The link of `conn`, with no socket yet; `capacity` for the bytes to send.
    pub fn with_capacity(conn: C, capacity: usize) -> Link<C> {
        Link {
            conn,
            socket: Socket::None,
            out: Vec::with_capacity(capacity),
            sent: 0,
            low_water: 1,
        }
    }

    /// The link of `conn`, with no socket yet.
    pub fn new(conn: C) -> Link<C> {
        Link::with_capacity(conn, 64 * 1024)
    }

    pub fn conn(&self) -> &C {
        &self.conn
    }

    /// The connection, for its requests and its timers; what changes its socket (a
    /// failure, an idle close) the link sees by its generation.
    pub fn conn_mut(&mut self) -> &mut C {
        &mut self.conn
    }

    /// What the mover must do now, if anything: asked after every event and timer. A
    /// connection without an address to connect to fails here.
    pub fn order<K>(&mut self, now: Instant, sink: &mut K) -> Option<Order>
    where
        C: Driven<K>,
    {
        let step = self.conn.step();
        match self.socket {
            Socket::Connecting(generation) | Socket::Open(generation)
                if generation != self.conn.generation()
                    || matches!(step, Step::Idle | Step::Connect) =>
            {
                self.socket = Socket::Closing;
                Some(Order::Close)
            }
            Socket::None if step == Step::Connect => {
                let address = self.conn.address(now, sink)?;
                self.conn.connecting(now);
                self.socket = Socket::Connecting(self.conn.generation());
                Some(Order::Connect(address))
            }
            _ => None,
        }
    }

    /// The connect ordered last has ended: connected, or failed (refused, no socket to be
    /// had, ...). A failure is the connection's.
    pub fn connected<K>(&mut self, result: io::Result<()>, now: Instant, sink: &mut K)
    where
        C: Driven<K>,
    {
        let generation = self.conn.generation();
        if self.socket != Socket::Connecting(generation) {
            return;
        }
        match result {
            Ok(()) => {
                self.socket = Socket::Open(generation);
                self.low_water = 1;
                self.conn.connected(now, sink);
            }
            Err(error) => self.conn.transport_failed(error, now, sink),
        }
    }

    /// The socket is connected and belongs to the connection as it is now.
    fn is_current(&self) -> bool {
        self.socket == Socket::Open(self.conn.generation())
    }

    /// Room to read into while the socket is connected and still the connection's (else
    /// `None`: what it delivers now is not the connection's) and the connection wants to be
    /// read, or `anyway` (the socket hung up: what it holds is read to its end or error);
    /// [`Link::filled`] says how many bytes came.
    pub fn read_buffer(&mut self, anyway: bool) -> Option<&mut [u8]> {
        let wanted = anyway || self.conn.wants_input();
        (self.is_current() && wanted).then(|| self.conn.read_buffer())
    }

    /// Whether the mover should read the socket now (see [`Conn::wants_input`]).
    pub fn wants_input(&self) -> bool {
        self.is_current() && self.conn.wants_input()
    }

    /// `n` bytes were read into [`Link::read_buffer`]; 0 is the peer's EOF.
    pub fn filled<K>(&mut self, n: usize, now: Instant, sink: &mut K)
    where
        C: Driven<K>,
    {
        if self.is_current() {
            self.conn.filled(n, now, sink);
        }
    }

    /// `bytes` arrived in a buffer of the mover's own, wanted or not (a receive under way
    /// when the connection stopped wanting them); none is the peer's EOF.
    pub fn receive<K>(&mut self, bytes: &[u8], now: Instant, sink: &mut K)
    where
        C: Driven<K>,
    {
        if bytes.is_empty() {
            return self.filled(0, now, sink);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            // None once the socket is no longer the connection's (what came before failed it).
            let Some(room) = self.read_buffer(true) else {
                return;
            };
            let n = room.len().min(rest.len());
            room[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            self.filled(n, now, sink);
        }
    }

    /// The socket failed (reset, a send error, ...): the connection's failure; [`Link::order`]
    /// then says to close the socket.
    pub fn failed<K>(&mut self, error: io::Error, now: Instant, sink: &mut K)
    where
        C: Driven<K>,
    {
        // Connected or not, the socket belongs to the connection as it is now.
        let generation = self.conn.generation();
        if self.is_current() || self.socket == Socket::Connecting(generation) {
            self.conn.transport_failed(error, now, sink);
        }
    }

    /// The bytes to send next, taking what the connection queued once the previous batch is
    /// all sent. Empty unless connected.
    pub fn unsent(&mut self) -> &[u8] {
        if !self.is_current() {
            return &[];
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            self.conn.take_output(&mut self.out);
        }
        &self.out[self.sent..]
    }

    /// The receive low-water mark the mover should give the socket now (`SO_RCVLOWAT`: the
    /// kernel reports it readable once that many bytes are in, or at its EOF or an error), if
    /// it should change: asked before each wait. PostgreSQL flushes each query's answer on its
    /// own (a Sync each), so without a mark a worker waiting on a request's 20 queries wakes
    /// for every two or three answers. The mark never exceeds the bytes sure to come before
    /// the oldest request is answered; it is raised only to twice or more, and lowered only
    /// when it would exceed all that is owed (never holding back an answer owed), so that a
    /// busy link, whose later requests' answers are coming anyway, does not pay a system call
    /// per wake-up. A connection that names no floors ([`Conn::read_low_water`]) never
    /// changes it.
    pub fn low_water_order(&mut self) -> Option<usize> {
        if !self.is_current() {
            return None;
        }
        let floors = self.conn.read_low_water()?;
        let change = self.low_water > floors.owed || floors.request >= 2 * self.low_water;
        change.then(|| {
            self.low_water = floors.request;
            floors.request
        })
    }

    /// Whether there are bytes to send, for a mover that waits for room to send them; unlike
    /// [`Link::unsent`], it takes nothing from the connection.
    pub fn has_unsent(&self) -> bool {
        self.is_current() && (self.sent < self.out.len() || self.conn.has_output())
    }

    /// `n` bytes of [`Link::unsent`] went out.
    pub fn sent(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.out.len());
    }

    /// The socket ordered closed is closed, and nothing refers to it any more: what was
    /// left to send goes with it, and a new socket may be ordered.
    pub fn closed(&mut self) {
        self.socket = Socket::None;
        self.out.clear();
        self.sent = 0;
    }
}
