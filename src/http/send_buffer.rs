//! What a connection has written and its peer has yet to get, whatever the protocol: one
//! buffer sent from the front, and the clock on the progress the peer owes (the send
//! timeout).

use std::time::{Duration, Instant};

use super::{lent, BufferPool};

#[derive(Default)]
pub struct SendBuffer {
    /// `bytes[..sent]` went already; without a buffer (capacity 0) while all is sent.
    bytes: Vec<u8>,
    sent: usize,
    /// Bytes sent since the connection began, wrapping (u32 keeps a connection's slot
    /// small; what is owed at once is far below 2 GiB).
    sent_total: u32,
    /// Everything unsent at `owed_since` must be sent (`sent_total` reach `owed_mark`)
    /// within the send timeout; `None` while nothing is unsent.
    owed_since: Option<Instant>,
    owed_mark: u32,
}

impl SendBuffer {
    /// The buffer to append to, lent from `buffers` if there is none.
    pub fn lend(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8> {
        lent(&mut self.bytes, buffers)
    }

    /// The buffer to append to, as it is (lent by an earlier [`SendBuffer::lend`]).
    pub fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Appends a written buffer, which becomes the output itself when nothing is unsent
    /// (no copy); the buffer left over goes back to `buffers`.
    pub fn append(&mut self, written: Vec<u8>, buffers: &mut BufferPool) {
        if self.bytes.is_empty() {
            buffers.give_back(std::mem::replace(&mut self.bytes, written));
        } else {
            self.bytes.extend_from_slice(&written);
            buffers.give_back(written);
        }
    }

    pub fn unsent(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    /// Whether everything written has gone.
    pub fn is_drained(&self) -> bool {
        self.sent == self.bytes.len()
    }

    /// Whether nothing was ever sent (nor anything sent since the count wrapped).
    pub fn none_sent(&self) -> bool {
        self.sent_total == 0
    }

    /// Where the count of bytes sent will be once everything unsent now has gone.
    pub fn mark(&self) -> u32 {
        self.sent_total.wrapping_add(self.unsent().len() as u32)
    }

    /// Whether everything unsent when `mark` was taken has gone.
    pub fn reached(&self, mark: u32) -> bool {
        self.sent_total.wrapping_sub(mark) as i32 >= 0
    }

    /// `len` bytes of [`SendBuffer::unsent`] went (the kernel is done with them). Once what
    /// went is at least what is left, the rest moves to the front: a peer that always
    /// leaves something unsent while more is written behind it would otherwise grow the
    /// buffer without end.
    pub fn sent(&mut self, len: usize, now: Instant) {
        let len = len.min(self.unsent().len());
        self.sent += len;
        self.sent_total = self.sent_total.wrapping_add(len as u32);
        if self.sent == self.bytes.len() {
            self.bytes.clear();
            self.sent = 0;
        } else if self.sent >= self.bytes.len() - self.sent {
            self.bytes.drain(..self.sent);
            self.sent = 0;
        }
        // What was owed is paid: the clock starts again on what is unsent now.
        if self.owed_since.is_some() && self.reached(self.owed_mark) {
            self.owed_since = None;
            self.owe_progress(now);
        }
    }

    /// Starts the clock on what is unsent now, unless it already runs.
    pub fn owe_progress(&mut self, now: Instant) {
        if self.owed_since.is_none() && !self.is_drained() {
            self.owed_since = Some(now);
            self.owed_mark = self.mark();
        }
    }

    /// Whether what was unsent at some instant has taken longer than `limit` to go.
    pub fn late(&self, now: Instant, limit: Duration) -> bool {
        self.owed_since
            .is_some_and(|since| now.duration_since(since) > limit)
    }

    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Gives the buffer back if all of it is sent (so the kernel is not sending from it).
    pub fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        if self.bytes.is_empty() && self.bytes.capacity() > 0 {
            buffers.give_back(std::mem::take(&mut self.bytes));
        }
    }

    /// Gives the buffer back, sent or not: the connection is closed, and nothing more is
    /// owed.
    pub fn give_back_all(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.bytes));
        self.sent = 0;
        self.owed_since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_never_catches_up_does_not_grow_the_buffer() {
        let mut buffers = BufferPool::default();
        let mut output = SendBuffer::default();
        let now = Instant::now();
        // Always 64 KiB written behind what a send takes, which is never all of it.
        for _ in 0..1000 {
            output.lend(&mut buffers).extend_from_slice(&[7; 64 * 1024]);
            let unsent = output.unsent().len();
            output.sent(unsent - 1000, now);
        }
        assert_eq!(output.unsent(), &[7; 1000][..]);
        assert!(output.reached(1000 * 64 * 1024 - 1000));
        assert!(!output.reached(1000 * 64 * 1024 - 999));
        assert!(output.capacity() <= 256 * 1024, "{}", output.capacity());
    }

    #[test]
    fn what_is_unsent_stays_in_order_across_partial_sends() {
        let mut buffers = BufferPool::default();
        let mut output = SendBuffer::default();
        let now = Instant::now();
        output.lend(&mut buffers).extend_from_slice(b"abcdef");
        output.sent(2, now);
        assert_eq!(output.unsent(), b"cdef");
        output.bytes().extend_from_slice(b"gh");
        output.sent(3, now);
        assert_eq!(output.unsent(), b"fgh");
        output.sent(3, now);
        assert!(output.is_drained());
        assert!(output.reached(8) && !output.reached(9));
    }

    #[test]
    fn the_clock_runs_on_what_was_unsent_until_it_has_gone() {
        let mut buffers = BufferPool::default();
        let mut output = SendBuffer::default();
        let start = Instant::now();
        let limit = Duration::from_secs(30);
        output.lend(&mut buffers).extend_from_slice(&[1; 100]);
        output.owe_progress(start);
        output.bytes().extend_from_slice(&[2; 100]);
        // More written later does not restart the clock, nor does part of what was owed.
        output.sent(99, start + Duration::from_secs(20));
        assert!(output.late(start + Duration::from_secs(31), limit));
        // Paid: the clock starts again on the rest.
        let paid = start + Duration::from_secs(25);
        output.sent(1, paid);
        assert!(!output.late(start + Duration::from_secs(31), limit));
        assert!(output.late(paid + Duration::from_secs(31), limit));
        output.sent(100, paid);
        assert!(!output.late(paid + Duration::from_secs(31), limit));
    }
}
