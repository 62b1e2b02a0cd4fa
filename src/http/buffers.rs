//! The spare byte buffers a worker lends its connections. A connection holds a buffer only
//! while it has bytes in it (received and unanswered, or answered and unsent), so that an
//! idle keep-alive connection costs no buffer memory, and a busy one takes the buffer
//! another has just given back instead of allocating.

/// The capacity of a new buffer: a pipelined batch of 16 TFB requests, or of their
/// responses (about 2.7 KB), fits.
const BUFFER_CAPACITY: usize = 4096;
/// Buffers that grew past this (a large request or response) are freed rather than kept.
const MAX_KEPT_CAPACITY: usize = 16 * 1024;
/// Spare buffers kept at most; more are freed. Room for the sends a worker has in flight at
/// once under steady load (io_uring, json at 512 connections on two threads: about 260),
/// so that busy connections do not allocate; a burst beyond it allocates only then.
const MAX_SPARE: usize = 512;

#[derive(Default)]
pub struct BufferPool {
    spare: Vec<Vec<u8>>,
}

impl BufferPool {
    /// An empty buffer of at least [`BUFFER_CAPACITY`] bytes.
    pub fn take(&mut self) -> Vec<u8> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUFFER_CAPACITY))
    }

    /// Keeps `buffer` for the next [`take`](Self::take), or frees it.
    pub fn give_back(&mut self, mut buffer: Vec<u8>) {
        // A connection's empty `Vec` (capacity 0) is no buffer.
        if buffer.capacity() < BUFFER_CAPACITY
            || buffer.capacity() > MAX_KEPT_CAPACITY
            || self.spare.len() >= MAX_SPARE
        {
            return;
        }
        buffer.clear();
        self.spare.push(buffer);
    }

    /// How many spare buffers are kept.
    pub fn spare(&self) -> usize {
        self.spare.len()
    }
}

/// `buffer`, given one from `buffers` if it has none.
pub fn lent<'a>(buffer: &'a mut Vec<u8>, buffers: &mut BufferPool) -> &'a mut Vec<u8> {
    if buffer.capacity() == 0 {
        *buffer = buffers.take();
    }
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_emptied_and_the_pool_stays_bounded() {
        let mut pool = BufferPool::default();
        let mut buffer = pool.take();
        assert!(buffer.capacity() >= BUFFER_CAPACITY);
        buffer.extend_from_slice(b"bytes");
        let address = buffer.as_ptr();
        pool.give_back(buffer);
        let again = pool.take();
        assert_eq!((again.as_ptr(), again.len()), (address, 0));

        pool.give_back(Vec::new());
        pool.give_back(Vec::with_capacity(MAX_KEPT_CAPACITY + 1));
        assert_eq!(pool.spare(), 0);
        for _ in 0..MAX_SPARE + 10 {
            pool.give_back(Vec::with_capacity(BUFFER_CAPACITY));
        }
        assert_eq!(pool.spare(), MAX_SPARE);
    }
}
