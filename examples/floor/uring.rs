//! The io_uring floor: a ring per thread set up as gnosis-uring's (`SINGLE_ISSUER |
//! DEFER_TASKRUN`, 2,048 submissions, 16 Ki completions, a sparse file table), a multishot
//! accept into the file table, a multishot receive per connection into a ring of 1,024
//! provided 4 KiB buffers, and the answers of a batch of completions sent one send per
//! connection, queued from the completion loop and submitted by the next wait with no
//! `io_uring_enter` of their own. That is gnosis-uring's pattern with no parser, no
//! application and no bookkeeping beyond a connection's two buffers.
//!
//! Each lever of issue #44 is a flag after `--uring`, so that it is measured here first:
//!
//! - `--oneshot`: a single-shot receive per read, armed again after its completion, as
//!   vortex does (the kernel arms a poll for each one, `io_arm_apoll`), in place of one
//!   multishot receive for the connection's life.
//! - `--poll-first`: `IORING_RECVSEND_POLL_FIRST`: the receive waits for data before trying
//!   to read, skipping the first attempt that would find none.
//! - `--bundle`: `IORING_RECVSEND_BUNDLE` (6.10): a receive takes as many buffers as the
//!   data fills, in one completion.
//! - `--incremental`: the buffer ring registered with `IOU_PBUF_RING_INC` (6.12): a receive
//!   takes only the part of a buffer it fills, the next one goes on in the same buffer.
//! - `--fixed-send`: answers sent from a registered buffer (`IORING_RECVSEND_FIXED_BUF`),
//!   which the kernel does not pin and map for each send. Only a zero-copy send
//!   (`IORING_OP_SEND_ZC`) takes a registered buffer (a plain send refuses the flag with
//!   EINVAL), so this lever is that send, with its second completion (the notification).
//! - `--napi USEC`: NAPI busy polling through the ring (`IORING_REGISTER_NAPI`, 6.9) for
//!   up to USEC µs a wait; the CPU it spins is counted as the process's.
//! - `--sqpoll`: a kernel thread polls the submission queue (`SQPOLL | SINGLE_ISSUER`); it is
//!   one of the process's threads, so its CPU is counted too.
//! - `--coop`: `COOP_TASKRUN` in place of `DEFER_TASKRUN`.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::{Phase, ANSWER};

const SUBMISSION_ENTRIES: u32 = 2048;
const COMPLETION_ENTRIES: u32 = 16 * 1024;
const BUFFER_SIZE: usize = 4096;
/// A power of two, as the buffer ring needs.
const BUFFERS: u16 = 1024;
const BUFFER_GROUP: u16 = 0;
const MAX_DIRECT_SOCKETS: u64 = 64 * 1024;
/// The registered buffer of `--fixed-send` holds this many answers in a row.
const FIXED_ANSWERS: usize = 64;

// io_uring's flags that the crate has no builder for (include/uapi/linux/io_uring.h).
const RECVSEND_POLL_FIRST: u16 = 1 << 0;
const RECV_MULTISHOT: u16 = 1 << 1;
const RECVSEND_BUNDLE: u16 = 1 << 4;
const PBUF_RING_INC: u16 = 2;
const CQE_F_BUF_MORE: u32 = 1 << 4;
const CQE_F_NOTIF: u32 = 1 << 3;

// What a completion belongs to: the kind above bit 32, the connection's file index below.
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
/// Cancels and closes: nothing to do when they end.
const QUIET: u64 = 4;

/// The io_uring levers of issue #44, each off unless its flag is given (module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Levers {
    oneshot: bool,
    poll_first: bool,
    bundle: bool,
    incremental: bool,
    fixed_send: bool,
    napi_usec: Option<u32>,
    sqpoll: bool,
    coop: bool,
}

impl Levers {
    /// Takes one lever's flag (`value` gives the flag's value, for those that take one).
    pub fn parse(&mut self, flag: &str, value: impl FnOnce() -> String) {
        match flag {
            "--oneshot" => self.oneshot = true,
            "--poll-first" => self.poll_first = true,
            "--bundle" => self.bundle = true,
            "--incremental" => self.incremental = true,
            "--fixed-send" => self.fixed_send = true,
            "--napi" => self.napi_usec = Some(value().parse().expect("--napi takes µs")),
            "--sqpoll" => self.sqpoll = true,
            "--coop" => self.coop = true,
            _ => panic!("unknown lever {flag}: see examples/floor/uring.rs"),
        }
        assert!(
            !(self.bundle && self.incremental),
            "--bundle and --incremental are measured one at a time"
        );
    }

    fn ring(&self) -> io::Result<IoUring> {
        let mut builder = IoUring::builder();
        builder
            .setup_cqsize(COMPLETION_ENTRIES)
            .setup_single_issuer();
        if self.sqpoll {
            builder.setup_sqpoll(1000);
        } else if self.coop {
            builder.setup_coop_taskrun();
        } else {
            builder.setup_defer_taskrun();
        }
        builder.build(SUBMISSION_ENTRIES)
    }

    /// The receive for connection `index`, into the provided buffers.
    fn receive(&self, index: u32) -> squeue::Entry {
        let mut ioprio = 0;
        if !self.oneshot {
            ioprio |= RECV_MULTISHOT;
        }
        if self.poll_first {
            ioprio |= RECVSEND_POLL_FIRST;
        }
        if self.bundle {
            ioprio |= RECVSEND_BUNDLE;
        }
        opcode::Recv::new(types::Fixed(index), std::ptr::null_mut(), 0)
            .ioprio(ioprio)
            .buf_group(BUFFER_GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(RECV << 32 | u64::from(index))
    }
}

/// One descriptor of the provided-buffer ring (`struct io_uring_buf`); the first one's
/// `resv` is the ring's tail.
#[repr(C)]
struct BufDescriptor {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The descriptors, page-aligned as the kernel takes them.
#[repr(C, align(4096))]
struct DescriptorRing([BufDescriptor; BUFFERS as usize]);

/// The provided buffers, every one offered. The kernel takes them in ring order and the
/// floor reads each at once and gives it back in the order it was taken, so buffer `id`
/// always sits in ring slot `id`: a bundle's buffers are those after its first.
struct Buffers {
    descriptors: *mut BufDescriptor,
    memory: *mut u8,
    tail: u16,
    /// With `--incremental`: how much of each buffer the kernel has filled so far.
    filled: Vec<usize>,
}

impl Buffers {
    fn register(ring: &IoUring, incremental: bool) -> io::Result<Buffers> {
        // Leaked: the kernel may write to them for as long as the ring lives, which is the
        // thread's life.
        let ring_memory = Box::leak(Box::new(DescriptorRing(
            [const {
                BufDescriptor {
                    addr: 0,
                    len: 0,
                    bid: 0,
                    resv: 0,
                }
            }; BUFFERS as usize],
        )));
        let descriptors = ring_memory.0.as_mut_ptr();
        let memory = Box::leak(vec![0u8; usize::from(BUFFERS) * BUFFER_SIZE].into_boxed_slice());
        let flags = if incremental { PBUF_RING_INC } else { 0 };
        // SAFETY: the descriptors are never freed.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                descriptors as u64,
                BUFFERS,
                BUFFER_GROUP,
                flags,
            )?
        };
        let mut buffers = Buffers {
            descriptors,
            memory: memory.as_mut_ptr(),
            tail: 0,
            filled: vec![0; usize::from(BUFFERS)],
        };
        for id in 0..BUFFERS {
            buffers.give_back(id);
        }
        buffers.publish();
        Ok(buffers)
    }

    /// `len` bytes of buffer `id` from `at`.
    fn bytes(&self, id: u16, at: usize, len: usize) -> &[u8] {
        let at = at.min(BUFFER_SIZE);
        // SAFETY: within the leaked memory; the kernel leaves buffer `id` alone until it is
        // given back.
        unsafe {
            std::slice::from_raw_parts(
                self.memory.add(usize::from(id) * BUFFER_SIZE + at),
                len.min(BUFFER_SIZE - at),
            )
        }
    }

    /// Offers buffer `id` again, in the next slot of the ring: the slot it came from.
    fn give_back(&mut self, id: u16) {
        let slot = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: the slot is in the leaked ring and past the published tail, so the kernel
        // is not reading it; the tail (the first descriptor's `resv`) is not written here.
        unsafe {
            let descriptor = self.descriptors.add(slot);
            (&raw mut (*descriptor).addr)
                .write(self.memory as u64 + u64::from(id) * BUFFER_SIZE as u64);
            (&raw mut (*descriptor).len).write(BUFFER_SIZE as u32);
            (&raw mut (*descriptor).bid).write(id);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&mut self) {
        // SAFETY: the first descriptor's `resv`, read by the kernel, written only here.
        let tail = unsafe { AtomicU16::from_ptr(&raw mut (*self.descriptors).resv) };
        tail.store(self.tail, Ordering::Release);
    }

    /// Appends what a receive of `len` bytes into buffer `id` brought to `input`, and gives
    /// back the buffers the kernel is done with.
    fn take(&mut self, id: u16, len: usize, flags: u32, levers: &Levers, input: &mut Vec<u8>) {
        if levers.incremental {
            let filled = &mut self.filled[usize::from(id)];
            let at = *filled;
            *filled += len;
            input.extend_from_slice(self.bytes(id, at, len));
            if flags & CQE_F_BUF_MORE == 0 {
                self.filled[usize::from(id)] = 0;
                self.give_back(id);
            }
            return;
        }
        let (mut id, mut left) = (id, len);
        loop {
            let part = left.min(BUFFER_SIZE);
            input.extend_from_slice(self.bytes(id, 0, part));
            self.give_back(id);
            left -= part;
            if left == 0 || !levers.bundle {
                return;
            }
            id = (id + 1) & (BUFFERS - 1);
        }
    }
}

struct Connection {
    phase: Phase,
    /// Answers not sent yet.
    queued: Vec<u8>,
    /// What the send in flight sends (empty: none): the kernel reads it until it completes.
    sending: Vec<u8>,
    /// With `--fixed-send`: the send in flight is of this many bytes of the registered buffer.
    sending_fixed: usize,
    receiving: bool,
    /// False once the connection is to close when its answers are sent.
    open: bool,
    /// Its receive is being cancelled, for the close.
    cancelled: bool,
}

impl Connection {
    fn in_flight(&self) -> bool {
        !self.sending.is_empty() || self.sending_fixed > 0
    }
}

struct Worker {
    ring: IoUring,
    levers: Levers,
    buffers: Buffers,
    /// By file index.
    connections: Vec<Option<Connection>>,
    dirty: Vec<u32>,
    input: Vec<u8>,
    /// `FIXED_ANSWERS` answers in a row, registered with `--fixed-send`; leaked.
    fixed: &'static [u8],
}

pub fn serve(listener: OwnedFd, levers: Levers) -> io::Result<()> {
    let ring = levers.ring()?;
    let direct = gnosis::sys::open_files_limit()?.min(MAX_DIRECT_SOCKETS) as u32;
    ring.submitter().register_files_sparse(direct)?;
    if let Some(usec) = levers.napi_usec {
        let mut napi = types::Napi::new()
            .set_busy_poll_timeout(usec)
            .set_prefer_busy_poll(true);
        ring.submitter().register_napi(&mut napi)?;
    }
    let fixed: &'static [u8] = Box::leak(ANSWER.repeat(FIXED_ANSWERS).into_boxed_slice());
    if levers.fixed_send {
        let iovec = libc::iovec {
            iov_base: fixed.as_ptr() as *mut _,
            iov_len: fixed.len(),
        };
        // SAFETY: the buffer is leaked: it outlives the ring.
        unsafe { ring.submitter().register_buffers(&[iovec])? };
    }
    let buffers = Buffers::register(&ring, levers.incremental)?;
    let mut worker = Worker {
        ring,
        levers,
        buffers,
        connections: Vec::new(),
        dirty: Vec::new(),
        input: Vec::with_capacity(64 * 1024),
        fixed,
    };
    worker.run(&listener)
}

impl Worker {
    fn run(&mut self, listener: &OwnedFd) -> io::Result<()> {
        let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .allocate_file_index(true)
            .build()
            .user_data(ACCEPT << 32);
        self.push(&accept)?;
        let mut batch: Vec<(u64, i32, u32)> = Vec::with_capacity(COMPLETION_ENTRIES as usize);
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(err) if matches!(err.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
                Err(err) => return Err(err),
            }
            batch.extend(
                self.ring
                    .completion()
                    .map(|entry| (entry.user_data(), entry.result(), entry.flags())),
            );
            for &(data, result, flags) in &batch {
                let index = data as u32;
                match data >> 32 {
                    ACCEPT => self.on_accept(&accept, result, flags)?,
                    RECV => self.on_recv(index, result, flags),
                    // A zero-copy send's second completion, which frees its buffer.
                    SEND if flags & CQE_F_NOTIF != 0 => {}
                    SEND => self.on_send(index, result),
                    _ => {}
                }
            }
            batch.clear();
            self.buffers.publish();
            for index in std::mem::take(&mut self.dirty) {
                self.advance(index)?;
            }
        }
    }

    /// Queues an operation, submitting what is queued when the queue is full.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry points at leaked memory or at a connection's `sending`,
            // which is left alone until the send completes.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(err) if matches!(err.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
                Err(err) => return Err(err),
            }
        }
    }

    fn on_accept(&mut self, accept: &squeue::Entry, result: i32, flags: u32) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.push(accept)?;
        }
        if result < 0 {
            return Ok(());
        }
        let index = result as u32;
        let slot = index as usize;
        if self.connections.len() <= slot {
            self.connections.resize_with(slot + 1, || None);
        }
        self.connections[slot] = Some(Connection {
            phase: Phase::new(),
            queued: Vec::new(),
            sending: Vec::new(),
            sending_fixed: 0,
            receiving: false,
            open: true,
            cancelled: false,
        });
        self.dirty.push(index);
        Ok(())
    }

    fn on_recv(&mut self, index: u32, result: i32, flags: u32) {
        let Some(Some(connection)) = self.connections.get_mut(index as usize) else {
            return;
        };
        if !cqueue::more(flags) {
            connection.receiving = false;
        }
        match (cqueue::buffer_select(flags), result) {
            (Some(id), 1..) => {
                self.input.clear();
                self.buffers
                    .take(id, result as usize, flags, &self.levers, &mut self.input);
                let stays = connection
                    .phase
                    .on_input(&mut self.input, &mut connection.queued);
                connection.open &= stays;
            }
            // Out of buffers: armed again after the batch gives them back.
            (_, r) if r == -libc::ENOBUFS => {}
            // The peer closed, or reset.
            _ => connection.open = false,
        }
        self.dirty.push(index);
    }

    fn on_send(&mut self, index: u32, result: i32) {
        let Some(Some(connection)) = self.connections.get_mut(index as usize) else {
            return;
        };
        let sent = result.max(0) as usize;
        if result <= 0 {
            connection.open = false;
            connection.sending.clear();
            connection.sending_fixed = 0;
        } else if connection.sending_fixed > 0 {
            // The rest, if any, goes from the ordinary buffers.
            let rest = &self.fixed[sent.min(connection.sending_fixed)..connection.sending_fixed];
            connection.queued.splice(0..0, rest.iter().copied());
            connection.sending_fixed = 0;
        } else {
            connection
                .sending
                .drain(..sent.min(connection.sending.len()));
            let rest = std::mem::take(&mut connection.sending);
            connection.queued.splice(0..0, rest);
        }
        self.dirty.push(index);
    }

    /// Sends what a connection has queued, keeps it receiving, or closes it once it is done.
    fn advance(&mut self, index: u32) -> io::Result<()> {
        let Some(Some(connection)) = self.connections.get_mut(index as usize) else {
            return Ok(());
        };
        let socket = types::Fixed(index);
        let mut entries: [Option<squeue::Entry>; 2] = [None, None];
        if !connection.in_flight() && !connection.queued.is_empty() {
            // HTTP/1.1's output is whole answers, all alike; a WebSocket's (its 101 too, the
            // phase having changed as it was written) is not.
            let fixed = self.levers.fixed_send
                && matches!(connection.phase, Phase::Http(_))
                && connection.queued.len() <= self.fixed.len();
            let send = if fixed {
                connection.sending_fixed = connection.queued.len();
                connection.queued.clear();
                opcode::SendZc::new(socket, self.fixed.as_ptr(), connection.sending_fixed as u32)
                    .buf_index(Some(0))
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            } else {
                std::mem::swap(&mut connection.sending, &mut connection.queued);
                opcode::Send::new(
                    socket,
                    connection.sending.as_ptr(),
                    connection.sending.len() as u32,
                )
                .flags(libc::MSG_NOSIGNAL)
                .build()
            };
            entries[0] = Some(send.user_data(SEND << 32 | u64::from(index)));
        }
        if connection.open && !connection.receiving {
            connection.receiving = true;
            entries[1] = Some(self.levers.receive(index));
        } else if !connection.open && !connection.in_flight() {
            if connection.receiving && !connection.cancelled {
                // Ends the receive (by its user data, a hash lookup, as gnosis-uring does);
                // its completion brings the connection back to close.
                connection.cancelled = true;
                entries[1] = Some(
                    opcode::AsyncCancel::new(RECV << 32 | u64::from(index))
                        .build()
                        .user_data(QUIET << 32),
                );
            } else if !connection.receiving {
                self.connections[index as usize] = None;
                entries[1] = Some(opcode::Close::new(socket).build().user_data(QUIET << 32));
            }
        }
        for entry in entries.iter().flatten() {
            self.push(entry)?;
        }
        Ok(())
    }
}
