//! What a connection has written and the peer has yet to get: its frames in one buffer,
//! sent from the front, those an event wrote while the kernel may be sending from it, and
//! the bound on acknowledgements a client can make it queue.

use std::time::{Duration, Instant};

use super::frame::ErrorCode;
use crate::http::{lent, BufferPool, SendBuffer};

/// Unsent output above which no frame is read and no DATA written: a client that does not
/// read cannot make the connection hold more than this, plus one answer's frames.
pub const HIGH_WATER: usize = 256 * 1024;
/// SETTINGS and PING acknowledgements written and not yet sent, above which the
/// connection ends with ENHANCE_YOUR_CALM (a client that floods them and never reads).
const MAX_UNSENT_CONTROL: u32 = 1000;

/// The connection's frames to send, and the acknowledgements among them.
pub struct Output {
    frames: SendBuffer,
    /// Frames written for an event (an answer given later, a deadline) while `frames` had
    /// bytes unsent: the kernel may be sending from it then (io_uring), and appending could
    /// move it. They wait here, and whatever is written after them, until the next pass
    /// that may write appends them ([`Output::take_aside`]).
    aside: Vec<u8>,
    /// What is written now is for an event that began with bytes unsent
    /// ([`Output::for_event`]): it goes aside.
    event_aside: bool,
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
            aside: Vec::new(),
            event_aside: false,
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

    /// Whether what is written from now on is for an event, outside the server's passes:
    /// if the output has bytes unsent, the kernel may be sending from it, and all of it
    /// goes aside.
    pub fn for_event(&mut self, for_event: bool) {
        self.event_aside = for_event && !self.frames.is_drained();
    }

    /// Appends the frames written aside to the output, now that the kernel is not sending
    /// from it (a pass that may write, or a send's end); into an empty output, the buffer
    /// aside becomes the output's (no copy).
    pub fn take_aside(&mut self) {
        if self.aside.is_empty() {
            return;
        }
        let frames = self.frames.bytes();
        if frames.is_empty() {
            std::mem::swap(frames, &mut self.aside);
        } else {
            frames.extend_from_slice(&self.aside);
            self.aside.clear();
        }
    }

    /// Whether what is written now goes aside: after what waits there, or for an event
    /// that began with bytes unsent.
    fn writes_aside(&self) -> bool {
        self.event_aside || !self.aside.is_empty()
    }

    /// Gives the buffer written to next a buffer from `buffers` if it has none.
    pub fn lend(&mut self, buffers: &mut BufferPool) {
        if self.writes_aside() {
            lent(&mut self.aside, buffers);
        } else {
            self.frames.lend(buffers);
        }
    }

    /// The buffer frames are appended to: the output's, or the one aside.
    pub fn frames(&mut self) -> &mut Vec<u8> {
        match self.writes_aside() {
            true => &mut self.aside,
            false => self.frames.bytes(),
        }
    }

    pub fn unsent(&self) -> &[u8] {
        self.frames.unsent()
    }

    /// Whether nothing is left to send, aside or not.
    pub fn is_empty(&self) -> bool {
        self.frames.is_drained() && self.aside.is_empty()
    }

    /// How much more may be written before the high-water mark.
    pub fn room(&self) -> usize {
        let written = self.unsent().len() + self.aside.len();
        (self.high_water as usize).saturating_sub(written)
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
        self.frames.capacity() + self.aside.capacity()
    }

    /// Gives the buffers back that hold nothing to send.
    pub fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        self.frames.give_back_idle(buffers);
        if self.aside.is_empty() && self.aside.capacity() > 0 {
            buffers.give_back(std::mem::take(&mut self.aside));
        }
    }

    /// Gives the buffers back, sent or not: the connection is closed.
    pub fn give_back_all(&mut self, buffers: &mut BufferPool) {
        self.frames.give_back_all(buffers);
        buffers.give_back(std::mem::take(&mut self.aside));
    }
}
