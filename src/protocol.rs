//! What a connection speaks above its transport: HTTP/1.1, WebSocket once a request has
//! switched it, or HTTP/2 when its first bytes are HTTP/2's preface (h2c by prior
//! knowledge). No I/O: the core feeds the protocol plaintext and sends what it has unsent,
//! whichever it is; only [`Core::advance`](crate::server) looks inside to answer.

use std::time::Instant;

use crate::h1::Connection;
use crate::h2;
use crate::http::{BufferPool, HttpDate, Timeouts};
use crate::ws::Session;

/// A connection's protocol. The WebSocket session and the HTTP/2 connection are boxed so
/// that an HTTP slot stays small.
pub enum Protocol {
    Http1(Connection),
    WebSocket(Box<Session>),
    /// With the slot's generation, which its streams' tickets carry.
    Http2(Box<h2::Connection>, u32),
}

impl Protocol {
    /// Switches an HTTP/1.1 connection whose `101` is in its output to WebSocket; the
    /// bytes already received after the handshake are the session's first.
    pub fn switch_when_ready(&mut self, now: Instant) {
        let Protocol::Http1(conn) = self else {
            return;
        };
        if !conn.upgraded() {
            return;
        }
        let peer_eof = conn.peer_eof();
        let (generation, input, output) = conn.hand_over();
        let mut session = Session::new(generation, input, output, now);
        if peer_eof {
            session.peer_closed();
        }
        *self = Protocol::WebSocket(Box::new(session));
    }

    /// Switches an HTTP/1.1 connection whose first bytes are HTTP/2's preface to HTTP/2.
    /// Returns whether HTTP/1.1 may read its input: not while it is the beginning of the
    /// preface, which HTTP/1.1 would refuse.
    pub fn switch_to_h2(&mut self, limits: h2::Limits, now: Instant) -> bool {
        let Protocol::Http1(conn) = self else {
            return true;
        };
        let Some(first) = conn.first_bytes() else {
            return true;
        };
        let len = first.len().min(h2::PREFACE.len());
        if first[..len] != h2::PREFACE[..len] {
            return true;
        }
        if len == h2::PREFACE.len() {
            self.start_h2(limits, now);
        }
        false
    }

    /// Makes an HTTP/1.1 connection HTTP/2 whatever its first bytes (h2c by prior
    /// knowledge, or `h2` chosen by ALPN): what it received is the HTTP/2 connection's
    /// first input, which must begin with the preface.
    pub fn start_h2(&mut self, limits: h2::Limits, now: Instant) {
        let Protocol::Http1(conn) = self else {
            return;
        };
        let peer_eof = conn.peer_eof();
        let (generation, input, _) = conn.hand_over();
        let mut h2 = h2::Connection::new(limits, now);
        h2.take_input(input);
        if peer_eof {
            h2.peer_closed();
        }
        *self = Protocol::Http2(Box::new(h2), generation);
    }

    /// Back to HTTP/1.1 for the slot's next peer (its buffers given back already).
    pub fn end(&mut self, slot: u32, now: Instant) {
        let generation = match self {
            Protocol::Http1(_) => return,
            Protocol::WebSocket(session) => session.generation(),
            Protocol::Http2(_, generation) => *generation,
        };
        *self = Protocol::Http1(Connection::following(slot, generation, now));
    }

    pub fn generation(&self) -> u32 {
        match self {
            Protocol::Http1(conn) => conn.generation(),
            Protocol::WebSocket(session) => session.generation(),
            Protocol::Http2(_, generation) => *generation,
        }
    }

    /// The buffer received plaintext is appended to.
    pub fn input(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8> {
        match self {
            Protocol::Http1(conn) => conn.input(buffers),
            Protocol::WebSocket(session) => session.input(buffers),
            Protocol::Http2(h2, _) => h2.input(buffers),
        }
    }

    pub fn buffered_input(&self) -> usize {
        match self {
            Protocol::Http1(conn) => conn.buffered_input(),
            Protocol::WebSocket(session) => session.buffered_input(),
            Protocol::Http2(h2, _) => h2.buffered_input(),
        }
    }

    pub fn peer_closed(&mut self) {
        match self {
            Protocol::Http1(conn) => conn.peer_closed(),
            Protocol::WebSocket(session) => session.peer_closed(),
            Protocol::Http2(h2, _) => h2.peer_closed(),
        }
    }

    pub fn peer_eof(&self) -> bool {
        match self {
            Protocol::Http1(conn) => conn.peer_eof(),
            Protocol::WebSocket(session) => session.peer_eof(),
            Protocol::Http2(h2, _) => h2.peer_eof(),
        }
    }

    pub fn unsent(&self) -> &[u8] {
        match self {
            Protocol::Http1(conn) => conn.unsent(),
            Protocol::WebSocket(session) => session.unsent(),
            Protocol::Http2(h2, _) => h2.unsent(),
        }
    }

    pub fn mark_sent(&mut self, n: usize, now: Instant) {
        match self {
            Protocol::Http1(conn) => conn.mark_sent(n, now),
            Protocol::WebSocket(session) => session.mark_sent(n, now),
            Protocol::Http2(h2, _) => h2.mark_sent(n, now),
        }
    }

    pub fn wants_input(&self) -> bool {
        match self {
            Protocol::Http1(conn) => conn.wants_input(),
            Protocol::WebSocket(session) => session.wants_input(),
            Protocol::Http2(h2, _) => h2.wants_input(),
        }
    }

    /// Whether it reads while paused for the worker's budget: HTTP/2 does, since its peer's
    /// WINDOW_UPDATEs are what let the answers it holds go; HTTP/1.1 and WebSocket wait.
    pub fn reads_while_paused(&self) -> bool {
        matches!(self, Protocol::Http2(..))
    }

    /// What a connection paused for the budget still takes in: HTTP/2's frames (windows,
    /// resets, pings), with no new request answered.
    pub fn process_while_paused(
        &mut self,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
        share: usize,
    ) {
        if let Protocol::Http2(h2, _) = self {
            h2.process(date, now, buffers, share);
        }
    }

    /// Whether the client asked for the close and may send nothing more (HTTP/1.1 only).
    pub fn close_asked(&self) -> bool {
        matches!(self, Protocol::Http1(conn) if conn.close_asked())
    }

    /// Input or answers wait for the output to drain.
    pub fn has_backlog(&self) -> bool {
        match self {
            Protocol::Http1(conn) => conn.has_backlog(),
            Protocol::WebSocket(session) => session.has_backlog(),
            Protocol::Http2(h2, _) => h2.has_backlog(),
        }
    }

    /// Input it could process waits for the next pass (HTTP/2 reads a bounded amount per
    /// pass: `h2::Connection::has_input_waiting`).
    pub fn has_input_waiting(&self) -> bool {
        matches!(self, Protocol::Http2(h2, _) if h2.has_input_waiting())
    }

    /// Everything is answered and sent and no more will be read.
    pub fn is_finished(&self) -> bool {
        match self {
            Protocol::Http1(conn) => conn.is_finished(),
            Protocol::WebSocket(session) => session.is_finished(),
            Protocol::Http2(h2, _) => h2.is_finished(),
        }
    }

    /// What the deadlines that passed ask: HTTP/2 says GOAWAY first (or resets a late
    /// request's stream); the others close at once.
    pub fn expire(&mut self, now: Instant, limits: &Timeouts) -> h2::Expiry {
        let timed_out = match self {
            Protocol::Http1(conn) => conn.timed_out(now, limits),
            Protocol::WebSocket(session) => session.timed_out(now, limits),
            Protocol::Http2(h2, _) => return h2.expire(now, limits),
        };
        match timed_out {
            true => h2::Expiry::Close,
            false => h2::Expiry::Met,
        }
    }

    /// Buffer memory it holds, for the worker's budget.
    pub fn held(&self) -> usize {
        match self {
            Protocol::Http1(conn) => conn.held(),
            Protocol::WebSocket(session) => session.held(),
            Protocol::Http2(h2, _) => h2.held(),
        }
    }

    pub fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        match self {
            Protocol::Http1(conn) => conn.give_back_idle(buffers),
            Protocol::WebSocket(session) => session.give_back_idle(buffers),
            Protocol::Http2(h2, _) => h2.give_back_idle(buffers),
        }
    }

    pub fn give_back_all(&mut self, buffers: &mut BufferPool) {
        match self {
            Protocol::Http1(conn) => conn.give_back_all(buffers),
            Protocol::WebSocket(session) => session.give_back_all(buffers),
            Protocol::Http2(h2, _) => h2.give_back_all(buffers),
        }
    }
}
