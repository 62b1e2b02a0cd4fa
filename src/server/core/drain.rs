//! The drain: once a signal asked the worker to stop (its backend has stopped accepting),
//! every connection is told in its own protocol and what is in flight is finished, within
//! [`Limits::drain_timeout`](super::Limits).
//!
//! What each connection is told is its protocol's ([`crate::http::Wire::drain`]): HTTP/1.1
//! says `Connection: close` on its last answer and an idle one closes at once, HTTP/2 sends
//! GOAWAY (NO_ERROR, the last stream it took) and answers the streams it took, WebSocket
//! sends a close of 1001 (going away); over TLS, close_notify follows as at any close.
//! [`Core::advance`] tells a connection while the drain lasts, each time it may write, so
//! that one whose protocol changes (HTTP/1.1's first bytes settle it as HTTP/2, a `101`
//! makes it WebSocket) is told in its new one, and one the kernel is sending from (io_uring)
//! is told once it is done.

use super::Core;
use crate::service::Service;

impl<S: Service, K> Core<S, K> {
    /// Starts the drain: tells `found` of every open connection, for the backend to
    /// advance (which tells it). The backend has stopped accepting.
    pub fn drain(&mut self, mut found: impl FnMut(usize)) {
        if self.worker.drain_by.is_some() {
            return;
        }
        self.worker.drain_by = Some(self.worker.now + self.worker.limits.drain_timeout);
        if let Some(quic) = &mut self.quic {
            quic.drain(self.worker.now);
        }
        for (index, slot) in self.slots.all.iter().enumerate() {
            if slot.socket.is_some() {
                found(index);
            }
        }
    }

    /// Whether the worker is done: its drain began and every connection is closed (QUIC's
    /// too, their closes sent), or the deadline passed (what is left is closed with the
    /// worker).
    pub fn drained(&self) -> bool {
        let Some(by) = self.worker.drain_by else {
            return false;
        };
        let quic_done = self
            .quic
            .as_ref()
            .is_none_or(|quic| quic.serving() == 0 && quic.outbox_is_empty());
        (self.open_connections() == 0 && quic_done) || self.worker.now >= by
    }
}
