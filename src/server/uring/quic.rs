//! The QUIC socket on the ring: a multishot poll says when datagrams wait, and
//! `server/udp.rs` receives them all with `recvmsg`; sends are `sendmsg`s at the end of each
//! iteration, and a one-shot poll waits for room when the socket's buffer is full. (A
//! multishot `recvmsg` into provided buffers saves the receive calls but was measured to
//! cost as much or more: the loop goes round more often with fewer datagrams each time;
//! docs/BENCHMARKS.md, "HTTP/3".)

use std::io;
use std::os::fd::AsRawFd;

use io_uring::{cqueue, opcode, types};

use super::{user_data, Worker, QUIC_READABLE};
use crate::service::Service;

impl<S: Service> Worker<S> {
    /// Arms the multishot poll for datagrams on the QUIC socket, if it has none.
    pub(super) fn arm_quic(&mut self) -> io::Result<()> {
        let Some((quic, armed @ false)) = &mut self.quic else {
            return Ok(());
        };
        let fd = types::Fd(quic.socket.as_raw_fd());
        let entry = opcode::PollAdd::new(fd, libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data(QUIC_READABLE, 0, 0));
        *armed = true;
        self.ring.push_plain(entry)
    }

    /// Datagrams wait on the QUIC socket (`result` is the poll's), or it has room again.
    pub(super) fn on_quic(&mut self, kind: u64, flags: u32) -> io::Result<()> {
        let Some((quic, armed)) = &mut self.quic else {
            return Ok(());
        };
        match kind {
            QUIC_READABLE => {
                *armed = cqueue::more(flags);
                quic.receive_all(&mut self.core);
                self.arm_quic()
            }
            _ => {
                quic.blocked = false;
                Ok(())
            }
        }
    }

    /// Sends the QUIC endpoint's batches; while the socket's buffer is full, a poll waits
    /// for room.
    pub(super) fn send_datagrams(&mut self) -> io::Result<()> {
        let Some((quic, _)) = self.quic.as_mut().filter(|(quic, _)| !quic.blocked) else {
            return Ok(());
        };
        quic.blocked = quic.send_all(&mut self.core);
        if !quic.blocked {
            return Ok(());
        }
        let fd = types::Fd(quic.socket.as_raw_fd());
        let entry = opcode::PollAdd::new(fd, libc::POLLOUT as u32)
            .build()
            .user_data(user_data(super::QUIC_WRITABLE, 0, 0));
        self.ring.push_plain(entry)
    }
}
