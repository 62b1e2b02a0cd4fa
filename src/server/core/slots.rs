//! The worker's table of stream connections: one slot per accepted socket, each a byte
//! stream under its transport and its protocol. Slots are reused (a free list), and a
//! slot's generation, which changes with each connection it holds, tells a late answer
//! (a [`Ticket`]) from one for the connection there now.

use std::net::IpAddr;
use std::time::Instant;

use super::worker::Budget;
use crate::h1::Connection;
use crate::http::Ticket;
use crate::protocol::Protocol;
use crate::transport::Transport;

/// One client connection. `K` is how the backend names its socket: a descriptor (epoll) or
/// an entry of the ring's file table (io_uring); the core only keeps it.
pub(super) struct Slot<K> {
    /// `None` while the slot is free.
    pub socket: Option<K>,
    /// The client's address, when the backend learnt it (X-Forwarded-For at the edge).
    pub peer: Option<IpAddr>,
    /// What its bytes go through between the socket and `protocol`.
    pub transport: Transport,
    /// Chosen once at its first bytes; WebSocket once a request switched it.
    pub protocol: Protocol,
    /// Our side has shut down writing: the slot only waits for the peer's EOF.
    pub lingering_since: Option<Instant>,
    /// The buffer memory counted for it in the worker's [`Budget`].
    pub held: u32,
    /// Neither read from nor answered because the worker is over its budget and it holds
    /// more than its share; the sweep looks at it again.
    pub paused: bool,
}

impl<K> Slot<K> {
    /// Brings the count of what it holds, and with it the worker's, up to date.
    pub fn recount(&mut self, budget: &mut Budget) {
        let holds = self.protocol.wire().held() + self.transport.held();
        budget.recount(&mut self.held, holds);
    }
}

pub(super) struct Slots<K> {
    pub all: Vec<Slot<K>>,
    free: Vec<usize>,
    /// Slots that received answers from the database or a timer since the backend last
    /// looked.
    pub completed: Vec<usize>,
}

impl<K> Default for Slots<K> {
    fn default() -> Self {
        Slots {
            all: Vec::new(),
            free: Vec::new(),
            completed: Vec::new(),
        }
    }
}

impl<K> Slots<K> {
    /// How many connections are open.
    pub fn open(&self) -> usize {
        self.all.len() - self.free.len()
    }

    /// A free slot's index, a new slot's if none is free.
    pub fn vacant(&mut self, now: Instant) -> usize {
        if let Some(index) = self.free.pop() {
            return index;
        }
        let conn = Connection::new(self.all.len() as u32, now);
        self.all.push(Slot {
            socket: None,
            peer: None,
            transport: Transport::Plain,
            protocol: Protocol::ReadVersion(conn),
            lingering_since: None,
            held: 0,
            paused: false,
        });
        self.all.len() - 1
    }

    /// Slot `index` is free again.
    pub fn vacate(&mut self, index: usize) {
        self.free.push(index);
    }

    /// Whether the connection `ticket` was given to is still open.
    pub fn is_live(&self, ticket: &Ticket) -> bool {
        self.all.get(ticket.slot as usize).is_some_and(|slot| {
            slot.socket.is_some() && slot.protocol.generation() == ticket.generation
        })
    }
}
