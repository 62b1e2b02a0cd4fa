//! The link driver: a [`PgConn`] with the socket it wants, for whoever moves the socket's
//! bytes (a server's event loop, or `blocking::Driver` over poll(2)).
//!
//! The link decides everything about the socket: when to open it and where to, when to
//! close it, what to send, what the received bytes and the socket's failures mean. The mover
//! does what [`Link::order`] says, reads into [`Link::read_buffer`] when it can, sends
//! [`Link::unsent`] and reports back. One socket at a time (see [`Order::Close`]).

use std::io;
use std::time::Instant;

use super::conn::{DbError, PgConn, Sink, Step};
use super::target::Address;

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

pub struct Link {
    conn: PgConn,
    socket: Socket,
    /// Bytes taken from the connection for sending; `out[sent..]` is not sent yet. The mover
    /// sends from here, and nothing changes them until it has reported them sent or the
    /// socket closed: the kernel may be reading them (io_uring).
    out: Vec<u8>,
    sent: usize,
    /// The socket's receive low-water mark as last ordered (a new socket's is 1).
    low_water: usize,
}

impl Link {
    /// The link of `conn`, with no socket yet.
    pub fn new(conn: PgConn) -> Link {
        Link {
            conn,
            socket: Socket::None,
            out: Vec::with_capacity(64 * 1024),
            sent: 0,
            low_water: 1,
        }
    }

    pub fn conn(&self) -> &PgConn {
        &self.conn
    }

    /// The connection, for its queries and its timers; what changes its socket (a failure,
    /// `park`) the link sees by its generation.
    pub fn conn_mut(&mut self) -> &mut PgConn {
        &mut self.conn
    }

    /// What the mover must do now, if anything: asked after every event and timer. A
    /// connection without an address to connect to fails here (and its target resolves
    /// the name again).
    pub fn order(&mut self, now: Instant, sink: &mut impl Sink) -> Option<Order> {
        let step = self.conn.step();
        match self.socket {
            Socket::Connecting(generation) | Socket::Open(generation)
                if generation != self.conn.generation()
                    || matches!(step, Step::Idle | Step::Connect) =>
            {
                self.socket = Socket::Closing;
                Some(Order::Close)
            }
            Socket::None if step == Step::Connect => match self.conn.target().address() {
                Some(address) => {
                    self.conn.connecting(now);
                    self.socket = Socket::Connecting(self.conn.generation());
                    Some(Order::Connect(address))
                }
                None => {
                    let error = self.conn.target().unresolved();
                    self.conn.transport_failed(error, now, sink);
                    None
                }
            },
            _ => None,
        }
    }

    /// The connect ordered last has ended: connected, or failed (refused, no socket to be
    /// had, ...). A failure is the connection's: its queries fail and it tries again later.
    pub fn connected(&mut self, result: io::Result<()>, now: Instant, sink: &mut impl Sink) {
        let generation = self.conn.generation();
        if self.socket != Socket::Connecting(generation) {
            return;
        }
        match result {
            Ok(()) => {
                self.socket = Socket::Open(generation);
                self.low_water = 1;
                self.conn.connected(now);
            }
            Err(error) => self
                .conn
                .transport_failed(DbError::Io(error.into()), now, sink),
        }
    }

    /// The socket is connected and belongs to the connection as it is now.
    fn is_current(&self) -> bool {
        self.socket == Socket::Open(self.conn.generation())
    }

    /// Room to read into while the socket is connected and still the connection's (else
    /// `None`: what it delivers now is not the connection's); [`Link::filled`] says how many
    /// bytes came.
    pub fn read_buffer(&mut self) -> Option<&mut [u8]> {
        self.is_current().then(|| self.conn.read_buffer())
    }

    /// `n` bytes were read into [`Link::read_buffer`]; 0 is the server's EOF.
    pub fn filled(&mut self, n: usize, now: Instant, sink: &mut impl Sink) {
        if !self.is_current() {
            return;
        }
        match n {
            0 => self.conn.transport_failed(DbError::closed(), now, sink),
            n => self.conn.filled(n, now, sink),
        }
    }

    /// `bytes` arrived in a buffer of the mover's own; none is the server's EOF.
    pub fn receive(&mut self, bytes: &[u8], now: Instant, sink: &mut impl Sink) {
        if bytes.is_empty() {
            return self.filled(0, now, sink);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            // None once the socket is no longer the connection's (what came before failed it).
            let Some(room) = self.read_buffer() else {
                return;
            };
            let n = room.len().min(rest.len());
            room[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            self.filled(n, now, sink);
        }
    }

    /// The socket failed (reset, a send error, ...): the connection's queries fail and it
    /// tries again later; [`Link::order`] then says to close the socket.
    pub fn failed(&mut self, error: io::Error, now: Instant, sink: &mut impl Sink) {
        // Connected or not, the socket belongs to the connection as it is now.
        let generation = self.conn.generation();
        if self.is_current() || self.socket == Socket::Connecting(generation) {
            self.conn
                .transport_failed(DbError::Io(error.into()), now, sink);
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
    /// per wake-up.
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
