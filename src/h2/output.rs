//! What a connection has written and the peer has yet to get: its frames in one buffer,
//! sent from the front, and the bound on acknowledgements a client can make it queue.

use super::frame::ErrorCode;

/// Unsent output above which no frame is read and no DATA written: a client that does not
/// read cannot make the connection hold more than this, plus one answer's frames.
pub const HIGH_WATER: usize = 256 * 1024;
/// An empty buffer larger than this (after a large answer) is freed rather than kept, so
/// that an idle connection holds little.
pub const KEPT_CAPACITY: usize = 16 * 1024;
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
    /// Acknowledgements written since the output was last sent up to the last of them
    /// (`control_end`, in bytes written since the connection began).
    control_unsent: u32,
    control_end: u64,
}

impl Output {
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
    pub fn sent(&mut self, len: usize) {
        let len = len.min(self.unsent().len());
        self.sent += len;
        self.sent_total += len as u64;
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
            if self.bytes.capacity() > KEPT_CAPACITY {
                self.bytes = Vec::new();
            }
        }
        if self.sent_total >= self.control_end {
            self.control_unsent = 0;
        }
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
}
