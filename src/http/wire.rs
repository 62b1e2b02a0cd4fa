//! What every protocol's connection is to the worker under it, whatever it speaks: received
//! bytes in, bytes to send out, and what the worker asks of it between reads (its memory,
//! its deadlines, whether it wants more or is done). A slot's protocol is one of them
//! (`protocol.rs`); the core asks it these through this trait, never by protocol.

use std::time::Instant;

use super::{BufferPool, Timeouts};

pub trait Wire {
    /// The buffer received bytes are appended to, lent from `buffers` if it has none.
    fn input(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8>;

    /// Received bytes not answered yet.
    fn buffered_input(&self) -> usize;

    /// The peer sent its last byte: what is in is still answered.
    fn peer_closed(&mut self);

    /// Whether the peer has sent its last byte.
    fn peer_eof(&self) -> bool;

    /// The bytes to send.
    fn unsent(&self) -> &[u8];

    /// `n` bytes of [`Wire::unsent`] went out; the kernel is done with them.
    fn mark_sent(&mut self, n: usize, now: Instant);

    /// Whether the worker should read more from the peer now.
    fn wants_input(&self) -> bool;

    /// Input or answers wait for the output to drain.
    fn has_backlog(&self) -> bool;

    /// Input it could process waits for the next pass: a protocol that reads a bounded
    /// amount per pass (HTTP/2) is advanced again, once the worker's other connections had
    /// theirs, without waiting for more bytes.
    fn has_input_waiting(&self) -> bool {
        false
    }

    /// Everything is answered and sent and no more will be read.
    fn is_finished(&self) -> bool;

    /// Whether a deadline passed.
    fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool;

    /// What the worker's sweep does with it: a protocol that has a last word to say before
    /// the close (HTTP/2's GOAWAY) says it here; the others close at once.
    fn expire(&mut self, now: Instant, limits: &Timeouts) -> Expiry {
        match self.timed_out(now, limits) {
            true => Expiry::Close,
            false => Expiry::Met,
        }
    }

    /// The server is shutting down: take no new request, tell the peer in the protocol's
    /// own way (HTTP/1.1: `Connection: close` on the last answer; HTTP/2: GOAWAY; WebSocket:
    /// a close of 1001), answer what was taken, and be finished once it is sent. Called
    /// again and again while the drain lasts (a no-op once told), only while nothing is
    /// being sent from the output.
    fn drain(&mut self, buffers: &mut BufferPool);

    /// Buffer memory it holds, for the worker's budget.
    fn held(&self) -> usize;

    /// Gives back the buffers that are empty.
    fn give_back_idle(&mut self, buffers: &mut BufferPool);

    /// Gives every buffer back: the connection is closed, and the kernel no longer sends
    /// from its output.
    fn give_back_all(&mut self, buffers: &mut BufferPool);
}

/// What the worker's sweep does with a connection ([`Wire::expire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// No deadline passed.
    Met,
    /// A deadline passed and the connection wrote its last word (HTTP/2: GOAWAY, or
    /// RST_STREAM on the streams whose requests are late). It is to be sent; a finished
    /// connection then closes as any does.
    Told,
    /// A deadline passed (again, after the last word, for a protocol that has one): close
    /// the socket.
    Close,
}
