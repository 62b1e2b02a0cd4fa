//! What a connection speaks above its transport, chosen once, as hyper-util's `auto` does:
//!
//! ```text
//!   open ──(h2c port)──────────────────────────────────────────┐
//!     │                                                        v
//!     └──> ReadVersion ──(TLS chose h2, or HTTP/2's preface)─> Http2
//!              │
//!              └──(first bytes that are not the preface)──> Http1 ──(a 101)──> WebSocket
//! ```
//!
//! Until its first bytes arrive a connection reads its version: HTTP/1.1's connection holds
//! them, and none of them is parsed while they may still be HTTP/2's preface. Once settled,
//! a connection changes protocol only by a `101`; nothing looks at its bytes again to
//! choose. The core asks any of them what the worker needs through [`Wire`] (one `match`,
//! [`Protocol::wire`]), and drives each through its own entry (`h1::Connection::process`,
//! `h2::Connection::serve`, `ws::Session::process`).

use std::time::Instant;

use crate::h1::Connection;
use crate::h2;
use crate::http::{AltSvc, BufferPool, HttpDate, Wire};
use crate::ws::Session;

/// A connection's protocol. The WebSocket session and the HTTP/2 connection are boxed so
/// that an HTTP slot stays small.
pub enum Protocol {
    /// Not chosen yet: the first bytes, held by HTTP/1.1's connection, or TLS's ALPN decide.
    ReadVersion(Connection),
    Http1(Connection),
    WebSocket(Box<Session>),
    /// With the slot's generation, which its streams' tickets carry.
    Http2(Box<h2::Connection>, u32),
}

impl Protocol {
    /// What the worker asks of the connection, whatever it speaks.
    pub fn wire(&self) -> &dyn Wire {
        match self {
            Protocol::ReadVersion(conn) | Protocol::Http1(conn) => conn,
            Protocol::WebSocket(session) => &**session,
            Protocol::Http2(h2, _) => &**h2,
        }
    }

    pub fn wire_mut(&mut self) -> &mut dyn Wire {
        match self {
            Protocol::ReadVersion(conn) | Protocol::Http1(conn) => conn,
            Protocol::WebSocket(session) => &mut **session,
            Protocol::Http2(h2, _) => &mut **h2,
        }
    }

    /// A new peer on the slot (its buffers given back already): HTTP/2 from its first byte
    /// when `h2` (the h2c port), else its version read from what it sends. Its answers name
    /// `alt_svc`, whichever version it speaks.
    pub fn open(&mut self, h2: Option<h2::Limits>, alt_svc: Option<AltSvc>, now: Instant) {
        if let Protocol::ReadVersion(conn) = self {
            conn.reset(alt_svc, now);
        }
        if let Some(limits) = h2 {
            self.start_h2(limits, now);
        }
    }

    /// Chooses the protocol of a connection still reading its version: HTTP/2 when TLS's
    /// ALPN chose it (`alpn_h2`) or the first bytes are HTTP/2's preface, HTTP/1.1 as soon
    /// as they cannot be (or the peer left before they could).
    pub fn settle(&mut self, alpn_h2: bool, limits: h2::Limits, now: Instant) {
        let Protocol::ReadVersion(conn) = self else {
            return;
        };
        let first = conn.first_bytes();
        let len = first.len().min(h2::PREFACE.len());
        let maybe_h2 = first[..len] == h2::PREFACE[..len];
        if alpn_h2 || (maybe_h2 && len == h2::PREFACE.len()) {
            self.start_h2(limits, now);
        } else if !maybe_h2 || conn.peer_eof() {
            let Protocol::ReadVersion(conn) = std::mem::replace(self, Protocol::empty(now)) else {
                return;
            };
            *self = Protocol::Http1(conn);
        }
    }

    /// Makes a connection whose version is not chosen yet HTTP/2: what it received is the
    /// HTTP/2 connection's first input, which must begin with the preface.
    fn start_h2(&mut self, limits: h2::Limits, now: Instant) {
        let Protocol::ReadVersion(conn) = self else {
            return;
        };
        let peer_eof = conn.peer_eof();
        let alt_svc = conn.alt_svc();
        let (generation, input, _) = conn.hand_over();
        let mut h2 = h2::Connection::new(h2::Limits { alt_svc, ..limits }, now);
        h2.take_input(input);
        if peer_eof {
            h2.peer_closed();
        }
        *self = Protocol::Http2(Box::new(h2), generation);
    }

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

    /// Ready for the slot's next peer (its buffers given back already), its generation
    /// carried on.
    pub fn end(&mut self, slot: u32, now: Instant) {
        let generation = self.generation();
        *self = match std::mem::replace(self, Protocol::empty(now)) {
            Protocol::ReadVersion(conn) | Protocol::Http1(conn) => Protocol::ReadVersion(conn),
            _ => Protocol::ReadVersion(Connection::following(slot, generation, now)),
        };
    }

    /// A placeholder while a connection moves from one variant to another.
    fn empty(now: Instant) -> Protocol {
        Protocol::ReadVersion(Connection::new(0, now))
    }

    pub fn generation(&self) -> u32 {
        match self {
            Protocol::ReadVersion(conn) | Protocol::Http1(conn) => conn.generation(),
            Protocol::WebSocket(session) => session.generation(),
            Protocol::Http2(_, generation) => *generation,
        }
    }

    /// Whether it reads while paused for the worker's budget: HTTP/2 does, since its peer's
    /// WINDOW_UPDATEs are what let the answers it holds go; the others wait.
    pub fn reads_while_paused(&self) -> bool {
        matches!(self, Protocol::Http2(..))
    }

    /// What a connection paused for the budget still does, with no new request answered:
    /// HTTP/2 takes its frames in (windows, resets, pings) and writes its piped bodies;
    /// HTTP/1.1 moves the answers in its line, a piped body as it arrives, to its output
    /// under its lowered mark. What its pipes hold counts toward its share: left there,
    /// nothing would move until the upstream's stall timer cut the body.
    pub fn process_while_paused(
        &mut self,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
        share: usize,
    ) {
        match self {
            Protocol::Http1(conn) => conn.collect(date, buffers, share),
            Protocol::Http2(h2, _) => h2.process(date, now, buffers, share),
            Protocol::ReadVersion(_) | Protocol::WebSocket(_) => {}
        }
    }

    /// Whether the client asked for the close and may send nothing more (HTTP/1.1 only).
    pub fn close_asked(&self) -> bool {
        matches!(self, Protocol::Http1(conn) if conn.close_asked())
    }
}
