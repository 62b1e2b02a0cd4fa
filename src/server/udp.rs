//! Moving a QUIC socket's datagrams, the same for both backends: each waits in its own
//! way (epoll's readiness, io_uring's poll) and then calls these, which make the system
//! calls directly: a receive's ancillary data (the GRO size, ECN) and a send's (the GSO
//! size) are `recvmsg`'s and `sendmsg`'s.

use std::os::fd::OwnedFd;

use super::core::Core;
use super::Listener;
use crate::service::Service;
use crate::sys;
use crate::transport::Listening;

/// The QUIC endpoint's socket, and where its datagrams are received.
pub struct QuicSocket {
    pub socket: OwnedFd,
    /// 64 KiB: what the kernel coalesces into one receive (GRO) fits.
    buf: Vec<u8>,
    /// The socket's buffer was full: it is watched for room.
    pub blocked: bool,
}

impl QuicSocket {
    /// The QUIC socket among a worker's `listeners`, if it has one, apart from the others.
    pub fn take_from(listeners: Vec<Listener>) -> (Option<QuicSocket>, Vec<Listener>) {
        let (quic, listeners): (Vec<_>, Vec<_>) = listeners
            .into_iter()
            .partition(|listener| listener.kind == Listening::Quic);
        let quic = quic.into_iter().next().map(|quic| QuicSocket {
            socket: quic.socket,
            buf: vec![0; 64 * 1024],
            blocked: false,
        });
        (quic, listeners)
    }

    /// Hands every datagram waiting to the core.
    pub fn receive_all<S: Service, K>(&mut self, core: &mut Core<S, K>) {
        loop {
            match sys::receive_datagrams(&self.socket, &mut self.buf) {
                Ok(Some(received)) => core.datagrams(&received, &self.buf[..received.len]),
                Ok(None) => return,
                // An ICMP error reported on the socket (a port unreachable): nothing to do.
                Err(_) => continue,
            }
        }
    }

    /// Sends the endpoint's batches until the socket's buffer is full; returns whether it
    /// is (then the backend watches it for room, and calls again).
    pub fn send_all<S: Service, K>(&mut self, core: &mut Core<S, K>) -> bool {
        let Some(outbox) = core.outbox() else {
            return false;
        };
        while let Some(batch) = outbox.front() {
            let ecn = batch.ecn.map_or(0, |ecn| ecn as u8);
            match sys::send_datagrams(&self.socket, batch.to, &batch.bytes, batch.segment, ecn) {
                Ok(false) => return true,
                Ok(true) => outbox.pop(),
                // A batch the kernel cannot cut (no segmentation offload on the device: EIO)
                // goes one datagram at a time; a datagram it refuses is dropped, and QUIC
                // resends what is lost.
                Err(_) => {
                    if let Some(segment) = batch.segment {
                        for datagram in batch.bytes.chunks(segment) {
                            let _ =
                                sys::send_datagrams(&self.socket, batch.to, datagram, None, ecn);
                        }
                    }
                    outbox.pop();
                }
            }
        }
        false
    }
}
