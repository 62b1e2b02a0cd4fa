//! A connection's deadlines: the request timeout on what the client began to send, the send
//! timeout on what it must read or the window it must open, and the idle timeout; and the
//! frames that end what outlived one (GOAWAY, or RST_STREAM for a late request) before the
//! worker closes the socket.

use std::time::Instant;

use super::{Connection, Phase};
use crate::h2::frame::ErrorCode;
use crate::h2::stream::{State, Stream};
use crate::http::{Expiry, Timeouts};

impl Connection {
    /// Whether a deadline passed: the client took too long to send a request it began
    /// (from its HEADERS to the end of its body, whatever frames come between: PING,
    /// SETTINGS, WINDOW_UPDATE or an empty CONTINUATION carry none of it), to read what was
    /// unsent at some instant, or to open its window to answers waiting for it; or nothing
    /// moved either way for the idle timeout while the server owed it no answer.
    pub(super) fn deadline_passed(&self, now: Instant, limits: &Timeouts) -> bool {
        self.connection_late(now, limits) || self.request_late(now, limits)
    }

    /// Acts on the deadlines that passed (see [`Connection::deadline_passed`]), as nginx does: a
    /// late request's stream is reset (PROTOCOL_ERROR), a late header block ends the
    /// connection (GOAWAY PROTOCOL_ERROR: a block cannot be cut short, the HPACK table would
    /// be lost), and the send and idle timeouts end it with GOAWAY NO_ERROR (RFC 9113, 6.8),
    /// so that the client knows which streams were taken. A deadline passing again after
    /// the GOAWAY closes the socket.
    pub(super) fn act_on_deadlines(&mut self, now: Instant, limits: &Timeouts) -> Expiry {
        if !self.deadline_passed(now, limits) {
            return Expiry::Met;
        }
        if matches!(self.phase, Phase::Failed) {
            return Expiry::Close;
        }
        let late = |since: Instant| now.duration_since(since) > limits.request;
        if self.pending_block.as_ref().is_some_and(|b| late(b.since)) {
            self.fail(ErrorCode::Protocol);
        } else if self.connection_late(now, limits) {
            self.fail(ErrorCode::NoError);
        } else {
            let late_request = |stream: &Stream| receiving(stream) && late(stream.opened);
            while let Some(id) = self.streams.iter().find(|s| late_request(s)).map(|s| s.id) {
                if let Err(code) = self.reset(id, ErrorCode::Protocol) {
                    self.fail(code);
                }
            }
        }
        Expiry::Told
    }

    /// The send timeout (what was unsent at some instant, or answers waiting for the
    /// peer's window), or the idle timeout.
    fn connection_late(&self, now: Instant, limits: &Timeouts) -> bool {
        let owes = |stream: &Stream| !receiving(stream);
        let idle =
            !self.streams.iter().any(owes) && now.duration_since(self.last_active) > limits.idle;
        let window_stalled = self
            .window_stalled_since
            .is_some_and(|since| now.duration_since(since) > limits.send);
        self.output.late(now, limits.send) || window_stalled || idle
    }

    /// A request began (a header block, or a body arriving) longer than the request
    /// timeout ago.
    fn request_late(&self, now: Instant, limits: &Timeouts) -> bool {
        let late = |since: Instant| now.duration_since(since) > limits.request;
        self.pending_block.as_ref().is_some_and(|b| late(b.since))
            || self
                .streams
                .iter()
                .any(|stream| receiving(stream) && late(stream.opened))
    }
}

fn receiving(stream: &Stream) -> bool {
    matches!(stream.state, State::Receiving { .. })
}
