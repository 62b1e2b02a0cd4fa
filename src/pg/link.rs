//! The link driver: the socket a [`PgConn`] wants, for whoever moves the socket's bytes (a
//! server's event loop, or `blocking::Driver` over poll(2)). Each method takes the
//! connection the link belongs to.
//!
//! The link decides everything about the socket: when to open it and where to, when to
//! close it, what to send, what the received bytes and the socket's failures mean. The mover
//! does what [`Link::order`] says, reads when it can, sends [`Link::unsent`] and reports
//! back. One socket at a time: a new one is asked for only once the mover has reported the
//! last one [`closed`](Link::closed), so nothing the mover still has under way on an old
//! socket (an io_uring operation, say) can ever be taken for the new one's.

use std::io;
use std::time::Instant;

use super::conn::{DbError, Event, PgConn, Step};
use super::target::Address;

/// What the link asks of its mover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Open a socket, start a non-blocking connect to the address, and report how it ended
    /// with [`Link::connected`] (also when the socket cannot even be made).
    Connect(Address),
    /// Close the socket once nothing under way refers to it any more, then report
    /// [`Link::closed`]. Until then, what it delivers is dropped.
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

#[derive(Debug)]
pub struct Link {
    socket: Socket,
    /// Bytes taken from the connection for sending; `out[sent..]` is not sent yet. The mover
    /// sends from here, and nothing changes them until it has reported them sent or the
    /// socket closed: the kernel may be reading them (io_uring).
    out: Vec<u8>,
    sent: usize,
}

impl Default for Link {
    fn default() -> Link {
        Link::new()
    }
}

impl Link {
    pub fn new() -> Link {
        Link {
            socket: Socket::None,
            out: Vec::with_capacity(64 * 1024),
            sent: 0,
        }
    }

    /// What the mover must do now, if anything: asked after every event and timer. A
    /// connection without an address to connect to fails here (and its target resolves
    /// the name again).
    pub fn order(
        &mut self,
        conn: &mut PgConn,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Option<Order> {
        let step = conn.step();
        match self.socket {
            Socket::Connecting(generation) | Socket::Open(generation)
                if generation != conn.generation()
                    || matches!(step, Step::Idle | Step::Connect) =>
            {
                self.socket = Socket::Closing;
                Some(Order::Close)
            }
            Socket::None if step == Step::Connect => match conn.target().address() {
                Some(address) => {
                    conn.connecting(now);
                    self.socket = Socket::Connecting(conn.generation());
                    Some(Order::Connect(address))
                }
                None => {
                    let error = conn.target().unresolved();
                    conn.transport_failed(error, now, sink);
                    None
                }
            },
            _ => None,
        }
    }

    /// The connect ordered last has ended: connected, or failed (refused, no socket to be
    /// had, ...). A failure is the connection's: its queries fail and it tries again later.
    pub fn connected(
        &mut self,
        conn: &mut PgConn,
        result: io::Result<()>,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) {
        let Socket::Connecting(generation) = self.socket else {
            return;
        };
        if generation != conn.generation() {
            return;
        }
        match result {
            Ok(()) => {
                self.socket = Socket::Open(generation);
                conn.connected(now);
            }
            Err(error) => conn.transport_failed(DbError::Io(error), now, sink),
        }
    }

    /// The socket is connected and belongs to the connection as it is now.
    fn is_current(&self, conn: &PgConn) -> bool {
        self.socket == Socket::Open(conn.generation())
    }

    /// The socket, connected or not, belongs to the connection as it is now.
    fn belongs(&self, conn: &PgConn) -> bool {
        self.is_current(conn) || self.socket == Socket::Connecting(conn.generation())
    }

    /// `n` bytes were read into the connection's `read_buffer`; 0 is the server's EOF.
    pub fn filled(
        &self,
        conn: &mut PgConn,
        n: usize,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) {
        if !self.is_current(conn) {
            return;
        }
        match n {
            0 => conn.transport_failed(DbError::closed(), now, sink),
            n => conn.filled(n, now, sink),
        }
    }

    /// `bytes` arrived in a buffer of the mover's own; none is the server's EOF.
    pub fn receive(
        &self,
        conn: &mut PgConn,
        bytes: &[u8],
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) {
        if !self.is_current(conn) {
            return;
        }
        match bytes {
            [] => conn.transport_failed(DbError::closed(), now, sink),
            bytes => conn.receive(bytes, now, sink),
        }
    }

    /// The socket failed (reset, a send error, ...): the connection's queries fail and it
    /// tries again later; [`Link::order`] then says to close the socket.
    pub fn failed(
        &self,
        conn: &mut PgConn,
        error: io::Error,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) {
        if self.belongs(conn) {
            conn.transport_failed(DbError::Io(error), now, sink);
        }
    }

    /// The bytes to send next, taking what the connection queued once the previous batch is
    /// all sent. Empty unless connected.
    pub fn unsent(&mut self, conn: &mut PgConn) -> &[u8] {
        if !self.is_current(conn) {
            return &[];
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
            conn.take_output(&mut self.out);
        }
        &self.out[self.sent..]
    }

    /// Whether there are bytes to send, for a mover that waits for room to send them.
    pub fn has_unsent(&self, conn: &PgConn) -> bool {
        self.is_current(conn) && (self.sent < self.out.len() || conn.has_output())
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
