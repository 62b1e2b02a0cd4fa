//! What a connection has written and the peer has yet to get: its frames in one buffer,
//! sent from the front, and the bound on acknowledgements a client can make it queue.

use std::time::{Duration, Instant};

use super::frame::ErrorCode;
use crate::http::{lent, BufferPool};

/// Unsent output above which no frame is read and no DATA written: a client that does not
/// read cannot make the connection hold more than this, plus one answer's frames.
pub const HIGH_WATER: usize = 256 * 1024;
/// SETTINGS and PING acknowledgements written and not yet sent, above which the
/// connection ends with ENHANCE_YOUR_CALM (a client that floods them and never reads).
const MAX_UNSENT_CONTROL: u32 = 1000;

#[derive(Default)]
pub struct Output {
    /// Frames to send; `bytes[..sent]` went already.
    bytes: Vec<u8>,
    sent: usize,
    /// Bytes sent since the connection began.
    sent_total: u64,
    /// Everything unsent at `owed_since` must be sent (`sent_total` reach `owed_mark`)
    /// within the send timeout; `None` while nothing is unsent.
    owed_since: Option<Instant>,
    owed_mark: u64,
    /// Acknowledgements written since the output was last sent up to the last of them
    /// (`control_end`, in bytes written since the connection began).
    control_unsent: u32,
    control_end: u64,
}

impl Output {
    /// Gives the output a buffer from `buffers` if it has none, for what is written next.
    pub fn lend(&mut self, buffers: &mut BufferPool) {
        lent(&mut self.bytes, buffers);
    }

    /// The buffer frames are appended to.
    pub fn frames(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    pub fn unsent(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    /// How much more may be written before the high-water mark.
    pub fn room(&self) -> usize {
        HIGH_WATER.saturating_sub(self.unsent().len())
    }

    /// `len` bytes of [`Output::unsent`] went.
    pub fn sent(&mut self, len: usize, now: Instant) {
        let len = len.min(self.unsent().len());
        self.sent += len;
        self.sent_total += len as u64;
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
        }
        if self.sent_total >= self.control_end {
            self.control_unsent = 0;
        }
        if self.owed_since.is_some() && self.sent_total >= self.owed_mark {
            self.owed_since = None;
            self.owe_progress(now);
        }
    }

    /// Starts the clock on what is unsent now, unless it already runs.
    pub fn owe_progress(&mut self, now: Instant) {
        if self.owed_since.is_none() && !self.unsent().is_empty() {
            self.owed_since = Some(now);
            self.owed_mark = self.sent_total + self.unsent().len() as u64;
        }
    }

    /// Whether what was unsent at some instant has taken longer than `limit` to go.
    pub fn late(&self, now: Instant, limit: Duration) -> bool {
        self.owed_since
            .is_some_and(|since| now.duration_since(since) > limit)
    }

    /// Counts the acknowledgement just written: too many unsent is a flood.
    pub fn count_control(&mut self) -> Result<(), ErrorCode> {
        self.control_unsent += 1;
        self.control_end = self.sent_total + self.unsent().len() as u64;
        if self.control_unsent > MAX_UNSENT_CONTROL {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        Ok(())
    }

    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Gives the buffer back if all of it is sent.
    pub fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        if self.bytes.is_empty() && self.bytes.capacity() > 0 {
            buffers.give_back(std::mem::take(&mut self.bytes));
        }
    }

    /// Gives the buffer back, sent or not: the connection is closed.
    pub fn give_back_all(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.bytes));
        self.sent = 0;
        self.owed_since = None;
    }
}
