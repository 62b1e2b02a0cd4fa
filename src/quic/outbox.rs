//! The datagrams a worker's QUIC endpoint has to send, in order, each batch as one
//! `sendmsg`: a batch is up to [`MAX_SEGMENTS`] datagrams of one size to one peer, cut by
//! the kernel (`UDP_SEGMENT`, generic segmentation offload).

use std::collections::VecDeque;
use std::net::SocketAddr;

use quinn_proto::{EcnCodepoint, Transmit};

/// Datagrams in one batch at the most. The kernel takes at most 64 segments in one send
/// (UDP_MAX_SEGMENTS) and 65,507 bytes in all: 32 datagrams of a path's largest (1,472 bytes
/// on an MTU of 1,500) stay under both.
pub const MAX_SEGMENTS: usize = 32;
/// Spare batch buffers kept for reuse.
const SPARE: usize = 16;

/// A batch to send: `bytes` to `to`, cut into datagrams of `segment` bytes if set.
pub struct Batch {
    pub to: SocketAddr,
    pub ecn: Option<EcnCodepoint>,
    pub segment: Option<usize>,
    pub bytes: Vec<u8>,
}

#[derive(Default)]
pub struct Outbox {
    queue: VecDeque<Batch>,
    spare: Vec<Vec<u8>>,
}

impl Outbox {
    /// An empty buffer for the next batch (`quinn_proto` writes a batch into an empty one).
    pub fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// The batch `transmit` describes, written into `bytes`.
    pub fn push(&mut self, transmit: Transmit, mut bytes: Vec<u8>) {
        bytes.truncate(transmit.size);
        self.queue.push_back(Batch {
            to: transmit.destination,
            ecn: transmit.ecn,
            segment: transmit.segment_size,
            bytes,
        });
    }

    /// An unused buffer back.
    pub fn give_back(&mut self, mut bytes: Vec<u8>) {
        if self.spare.len() < SPARE {
            bytes.clear();
            self.spare.push(bytes);
        }
    }

    /// The next batch to send.
    pub fn front(&self) -> Option<&Batch> {
        self.queue.front()
    }

    /// The front batch went out (or was dropped: UDP promises nothing, QUIC resends).
    pub fn pop(&mut self) {
        if let Some(batch) = self.queue.pop_front() {
            self.give_back(batch.bytes);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
