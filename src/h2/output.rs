//! What a connection has written and the peer has yet to get: its frames in one buffer,
//! sent from the front, and the bound on acknowledgements a client can make it queue.

use std::time::{Duration, Instant};

use super::frame::ErrorCode;
use crate::http::{BufferPool, SendBuffer};

/// Unsent output above which no frame is read and no DATA written: a client that does not
/// read cannot make the connection hold more than this, plus one answer's frames.
pub const HIGH_WATER: usize = 256 * 1024;
/// SETTINGS and PING acknowledgements written and not yet sent, above which the
/// connection ends with ENHANCE_YOUR_CALM (a client that floods them and never reads).
const MAX_UNSENT_CONTROL: u32 = 1000;

/// The connection's frames to send, and the acknowledgements among them.
pub struct Output {
    frames: SendBuffer,
    /// Acknowledgements written since the output was last sent up to the last of them
    /// (`control_end`, in bytes written since the connection began).
    control_unsent: u32,
    control_end: u32,
    /// [`HIGH_WATER`], or less while the worker is over its budget (`Output::share`).
    high_water: u32,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            frames: SendBuffer::default(),
            control_unsent: 0,
            control_end: 0,
            high_water: HIGH_WATER as u32,
        }
    }
}

impl Output {
    /// Lowers the high-water mark to `share`, the connection's part of the worker's
    /// budget, as HTTP/1.1's is lowered: a connection holds its answers' frames until they
    /// are sent (on io_uring, until the kernel took them all), and the budget bounds them
    /// only if the mark follows it. `usize::MAX` while the worker is within its budget.
    pub fn share(&mut self, share: usize) {
        self.high_water = share.min(HIGH_WATER) as u32;
    }

    /// Gives the output a buffer from `buffers` if it has none, for what is written next.
    pub fn lend(&mut self, buffers: &mut BufferPool) {
        self.frames.lend(buffers);
    }

    /// The buffer frames are appended to.
    pub fn frames(&mut self) -> &mut Vec<u8> {
        self.frames.bytes()
    }

    pub fn unsent(&self) -> &[u8] {
        self.frames.unsent()
    }

    /// How much more may be written before the high-water mark.
    pub fn room(&self) -> usize {
        (self.high_water as usize).saturating_sub(self.unsent().len())
    }

    /// `len` bytes of [`Output::unsent`] went.
    pub fn sent(&mut self, len: usize, now: Instant) {
        self.frames.sent(len, now);
        if self.frames.reached(self.control_end) {
            self.control_unsent = 0;
        }
    }

    /// Starts the clock on what is unsent now, unless it already runs.
    pub fn owe_progress(&mut self, now: Instant) {
        self.frames.owe_progress(now);
    }

    /// Whether what was unsent at some instant has taken longer than `limit` to go.
    pub fn late(&self, now: Instant, limit: Duration) -> bool {
        self.frames.late(now, limit)
    }

    /// Counts the acknowledgement just written: too many unsent is a flood.
    pub fn count_control(&mut self) -> Result<(), ErrorCode> {
        self.control_unsent += 1;
        self.control_end = self.frames.mark();
        if self.control_unsent > MAX_UNSENT_CONTROL {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        Ok(())
    }

    pub fn capacity(&self) -> usize {
        self.frames.capacity()
    }

    /// Gives the buffer back if all of it is sent.
    pub fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        self.frames.give_back_idle(buffers);
    }

    /// Gives the buffer back, sent or not: the connection is closed.
    pub fn give_back_all(&mut self, buffers: &mut BufferPool) {
        self.frames.give_back_all(buffers);
    }
}
