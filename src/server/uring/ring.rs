//! The io_uring side of a worker that touches memory the kernel shares: the ring's set-up,
//! the provided-buffer ring, the links' receive buffers, and submission. Every `unsafe` of
//! the io_uring server is here, including the ones the worker's sends and its links'
//! receives rest on ([`Ring::push_send`], [`Ring::push_link_recv`]).

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

const SUBMISSION_ENTRIES: u32 = 2048;
/// Room for a receive and a send completion from thousands of connections per wait; more
/// are held by the kernel (overflow) and delivered on the next wait, never dropped.
pub(super) const COMPLETION_ENTRIES: u32 = 16 * 1024;
/// The size of each receive buffer: a pipelined batch of 16 TFB requests is about 2.7 KB.
pub(super) const BUFFER_SIZE: usize = 4096;
pub(super) const BUFFER_GROUP: u16 = 0;
/// The most a link's receive takes at once: what its connection may hold past the point
/// where it stops wanting input (a pipe's window, say).
const LINK_BUFFER_SIZE: usize = 64 * 1024;
/// `IORING_RECVSEND_POLL_FIRST`: the receive waits for the socket to be readable before it
/// tries, sparing the attempt that would find it empty.
const RECV_POLL_FIRST: u16 = 1;
/// The io_uring server's own settings, from the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringOptions {
    /// A kernel thread per ring polls the submission queue (`GNOSIS_SQPOLL=1`).
    pub sqpoll: bool,
    /// Receive buffers of 4 KiB per thread (`GNOSIS_URING_BUFFERS`): a power of two up to
    /// 32,768. More than the connections whose data arrive between two waits is
    /// wasted memory; fewer costs re-arming receives.
    pub buffers: u16,
}

impl UringOptions {
    pub const DEFAULT_BUFFERS: u16 = 1024;

    /// Reads the settings through `var` (the environment, or a test's stand-in).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let sqpoll = match var("GNOSIS_SQPOLL").as_deref() {
            None | Some("" | "0") => false,
            Some("1") => true,
            Some(other) => return Err(format!("GNOSIS_SQPOLL must be 0 or 1, not '{other}'")),
        };
        let buffers = match var("GNOSIS_URING_BUFFERS") {
            None => Self::DEFAULT_BUFFERS,
            Some(text) => match text.parse::<u16>() {
                Ok(n) if n.is_power_of_two() && n <= 32_768 => n,
                _ => {
                    return Err(format!(
                        "GNOSIS_URING_BUFFERS must be a power of two from 1 to 32768, not '{text}'"
                    ))
                }
            },
        };
        Ok(UringOptions { sqpoll, buffers })
    }
}

/// How the rings are set up, and what the kernel accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingSetup {
    SingleIssuerDeferTaskrun,
    SingleIssuerCoopTaskrun,
    Plain,
    SqpollSingleIssuer,
    Sqpoll,
}

impl RingSetup {
    pub fn describe(self) -> &'static str {
        match self {
            RingSetup::SingleIssuerDeferTaskrun => "SINGLE_ISSUER | DEFER_TASKRUN",
            RingSetup::SingleIssuerCoopTaskrun => "SINGLE_ISSUER | COOP_TASKRUN",
            RingSetup::Plain => "plain flags",
            RingSetup::SqpollSingleIssuer => "SQPOLL | SINGLE_ISSUER",
            RingSetup::Sqpoll => "SQPOLL",
        }
    }

    /// Best first; a kernel that does not know a flag rejects it with EINVAL and the next
    /// is tried.
    fn candidates(sqpoll: bool) -> &'static [RingSetup] {
        if sqpoll {
            &[RingSetup::SqpollSingleIssuer, RingSetup::Sqpoll]
        } else {
            &[
                RingSetup::SingleIssuerDeferTaskrun,
                RingSetup::SingleIssuerCoopTaskrun,
                RingSetup::Plain,
            ]
        }
    }

    fn build(self) -> io::Result<IoUring> {
        let mut builder = IoUring::builder();
        builder.setup_cqsize(COMPLETION_ENTRIES);
        match self {
            RingSetup::SingleIssuerDeferTaskrun => {
                builder.setup_single_issuer().setup_defer_taskrun();
            }
            RingSetup::SingleIssuerCoopTaskrun => {
                builder.setup_single_issuer().setup_coop_taskrun();
            }
            RingSetup::Plain => {}
            RingSetup::SqpollSingleIssuer => {
                builder.setup_sqpoll(1000).setup_single_issuer();
            }
            RingSetup::Sqpoll => {
                builder.setup_sqpoll(1000);
            }
        }
        builder.build(SUBMISSION_ENTRIES)
    }
}

/// Creates this thread's ring with the best flags the kernel takes.
fn new_ring(sqpoll: bool) -> io::Result<(IoUring, RingSetup)> {
    for &setup in RingSetup::candidates(sqpoll) {
        match setup.build() {
            Ok(ring) => {
                let params = ring.params();
                // Both came before provided-buffer rings, so only a strange kernel lacks them.
                if !params.is_feature_nodrop() || !params.is_feature_ext_arg() {
                    return Err(unusable(
                        "set-up",
                        io::Error::from_raw_os_error(libc::EINVAL),
                    ));
                }
                return Ok((ring, setup));
            }
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => continue,
            Err(err) => return Err(unusable("set-up", err)),
        }
    }
    Err(unusable(
        "set-up",
        io::Error::from_raw_os_error(libc::EINVAL),
    ))
}

/// Names the likely cause of an io_uring failure in words an operator can act on.
pub(super) fn unusable(step: &str, err: io::Error) -> io::Error {
    let cause = match err.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no io_uring (too old, or built without it)",
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "io_uring is forbidden here: a seccomp profile blocks it (Docker's default \
             profile does; run privileged or allow io_uring_setup, io_uring_enter and \
             io_uring_register) or the sysctl kernel.io_uring_disabled is set"
        }
        Some(libc::ENOMEM) => {
            "not enough locked memory for the rings: raise RLIMIT_MEMLOCK (ulimit -l) or \
             the memory limit"
        }
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
            "this kernel lacks an io_uring feature gnosis-uring needs (provided-buffer \
             rings, multishot accept and receive: Linux 6.0 or newer)"
        }
        _ => "unexpected failure",
    };
    io::Error::new(
        err.kind(),
        format!(
            "cannot use io_uring ({step} failed: {err}): {cause}. \
             gnosis, the epoll server, serves the same tests without io_uring"
        ),
    )
}

/// One descriptor of the provided-buffer ring, as the kernel lays it out (`struct
/// io_uring_buf`). The first descriptor's `resv` is the ring's tail, which the kernel reads
/// while we write the others: the ring is only ever written field by field through raw
/// pointers, never through a reference to a whole descriptor.
#[repr(C)]
struct BufDescriptor {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

const _: () = assert!(std::mem::size_of::<BufDescriptor>() == 16);

/// Buffers the kernel is offered at least, however few receives a wait has seen.
const MIN_OFFERED: u16 = 64;

/// The provided buffers a multishot receive takes from: a ring of descriptors shared with
/// the kernel, and the buffers themselves.
///
/// The kernel takes buffers in the order they were offered, so with all of them offered it
/// would go round every one, and each page of every buffer would become resident (4 MiB a
/// thread) even when a handful at a time are in use: an idle connection looked to cost
/// 4 KiB. Only a working set is offered, twice the most one wait used (and
/// [`MIN_OFFERED`] at least), each time from the buffers given back last, whose pages are
/// resident already; the others are not touched until a busier wait needs them.
///
/// Both allocations are leaked on purpose: a worker lives as long as the process, and
/// memory that is never freed can never be written by the kernel after it was freed,
/// whatever order the ring is torn down in.
pub(super) struct BufferRing {
    /// A power of two.
    count: u16,
    descriptors: *mut BufDescriptor,
    buffers: *mut u8,
    /// Our copy of the tail: descriptors up to it are written, not yet all published.
    tail: u16,
    /// The buffers not offered to the kernel, the one given back last on top.
    spare: Vec<u16>,
    /// Buffers offered and not given back since: in the ring, or in completions not reaped.
    offered: u16,
    /// Buffers given back since the last [`publish`](Self::publish): what the last batch used.
    used: u16,
    /// How many to keep offered.
    working_set: u16,
}

impl BufferRing {
    pub(super) fn register(ring: &Ring, count: u16) -> io::Result<Self> {
        let layout = std::alloc::Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufDescriptor>(),
            4096,
        )
        .map_err(io::Error::other)?;
        // SAFETY: the layout has a non-zero size (`count` is at least 1); the result is
        // checked for null.
        let descriptors: *mut BufDescriptor = unsafe { std::alloc::alloc_zeroed(layout) }.cast();
        if descriptors.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let buffers =
            Box::leak(vec![0u8; usize::from(count) * BUFFER_SIZE].into_boxed_slice()).as_mut_ptr();
        // SAFETY: `descriptors` is page-aligned, zeroed, `count` entries long and never
        // freed, so it stays valid for as long as the ring may use it.
        unsafe {
            ring.ring.submitter().register_buf_ring_with_flags(
                descriptors as u64,
                count,
                BUFFER_GROUP,
                0,
            )
        }
        .map_err(|err| unusable("registering the receive buffers", err))?;
        let mut ring = BufferRing {
            count,
            descriptors,
            buffers,
            tail: 0,
            spare: (0..count).rev().collect(),
            offered: 0,
            used: 0,
            working_set: MIN_OFFERED.min(count),
        };
        ring.publish();
        Ok(ring)
    }

    /// The first `len` bytes of buffer `id`, which a completion says the kernel filled.
    pub(super) fn filled(&self, id: u16, len: usize) -> &[u8] {
        if id >= self.count {
            return &[];
        }
        // SAFETY: buffer `id` lies inside the leaked allocation, and the kernel does not
        // touch it again until `give_back` returns it, which needs `&mut self`.
        unsafe {
            std::slice::from_raw_parts(
                self.buffers.add(usize::from(id) * BUFFER_SIZE),
                len.min(BUFFER_SIZE),
            )
        }
    }

    /// Takes back buffer `id`, which a completion named and which is read: the kernel may
    /// have it again once [`publish`](Self::publish) offers it.
    pub(super) fn give_back(&mut self, id: u16) {
        if id >= self.count {
            return;
        }
        self.offered = self.offered.saturating_sub(1);
        self.used = self.used.saturating_add(1);
        self.spare.push(id);
    }

    /// Offers the kernel buffers until the working set is in the ring, those given back
    /// last first; it may use them once [`publish`](Self::publish)ed.
    fn offer(&mut self) {
        let wanted = self.used.saturating_mul(2);
        self.working_set = self.working_set.max(wanted).min(self.count);
        self.used = 0;
        while self.offered < self.working_set {
            let Some(id) = self.spare.pop() else {
                return;
            };
            self.offer_one(id);
        }
    }

    fn offer_one(&mut self, id: u16) {
        let slot = usize::from(self.tail & (self.count - 1));
        let address = self.buffers as u64 + u64::from(id) * BUFFER_SIZE as u64;
        // SAFETY: `slot` is within the descriptor ring, which is never freed. The kernel
        // reads only the descriptors between its head and the published tail, which this
        // one is not, and the tail (the first descriptor's `resv`) is left alone: each
        // field is written through a raw pointer, so no reference covers what the kernel
        // may be reading.
        unsafe {
            let descriptor = self.descriptors.add(slot);
            (&raw mut (*descriptor).addr).write(address);
            (&raw mut (*descriptor).len).write(BUFFER_SIZE as u32);
            (&raw mut (*descriptor).bid).write(id);
        }
        self.tail = self.tail.wrapping_add(1);
        self.offered += 1;
    }

    /// Offers the working set ([`BufferRing`]) and lets the kernel use it.
    pub(super) fn publish(&mut self) {
        self.offer();
        // SAFETY: the first descriptor's `resv` is the ring's tail: a valid, aligned u16
        // for as long as the ring lives (never freed), which the kernel reads concurrently
        // and nothing here reads or writes but through this atomic.
        let tail = unsafe { AtomicU16::from_ptr(&raw mut (*self.descriptors).resv) };
        tail.store(self.tail, Ordering::Release);
    }
}

/// A receive buffer per link, which its single-shot receive fills ([`Ring::push_link_recv`]).
/// The links do not take the provided buffers: a multishot receive would go on draining the
/// socket into them after the connection stopped wanting input, until its cancel landed,
/// holding that much past the connection's bound and taking buffers from the clients.
///
/// Leaked on purpose, as the provided buffers are: the kernel may write into a link's buffer
/// until its receive completes, whenever the link closes or the ring is torn down. A page is
/// resident only once a receive has written to it.
pub(super) struct LinkBuffers {
    count: usize,
    buffers: *mut u8,
}

impl LinkBuffers {
    pub(super) fn new(count: usize) -> Self {
        let buffers =
            Box::leak(vec![0u8; count * LINK_BUFFER_SIZE].into_boxed_slice()).as_mut_ptr();
        LinkBuffers { count, buffers }
    }

    /// The first `len` bytes of link `index`'s buffer, which the completion of its receive
    /// says the kernel filled. The worker asks only while handling that completion, before
    /// it arms the link's next receive.
    pub(super) fn filled(&self, index: usize, len: usize) -> &[u8] {
        if index >= self.count {
            return &[];
        }
        // SAFETY: the buffer lies inside the leaked allocation. The kernel writes to it only
        // while a receive into it is in flight: the worker arms one at a time per link
        // (`LinkIo::receiving`), and the next only after handling this one's completion, by
        // which time the bytes returned here have been copied out.
        unsafe {
            std::slice::from_raw_parts(
                self.buffers.add(index * LINK_BUFFER_SIZE),
                len.min(LINK_BUFFER_SIZE),
            )
        }
    }
}

/// This thread's ring and the completions reaped from it but not handled yet.
pub(super) struct Ring {
    ring: IoUring,
    setup: RingSetup,
    completions: Vec<cqueue::Entry>,
}

impl Ring {
    /// The ring with the best flags the kernel takes, and a sparse file table of
    /// `direct_sockets` entries for the HTTP connections' sockets.
    pub(super) fn new(sqpoll: bool, direct_sockets: u32) -> io::Result<Ring> {
        let (ring, setup) = new_ring(sqpoll)?;
        ring.submitter()
            .register_files_sparse(direct_sockets)
            .map_err(|err| unusable("registering the file table", err))?;
        Ok(Ring {
            ring,
            setup,
            completions: Vec::with_capacity(COMPLETION_ENTRIES as usize),
        })
    }

    pub(super) fn setup(&self) -> RingSetup {
        self.setup
    }

    /// Swaps the completions reaped so far for `batch` (emptied).
    pub(super) fn take_completions(&mut self, batch: &mut Vec<cqueue::Entry>) {
        std::mem::swap(batch, &mut self.completions);
    }

    /// Moves the completions the kernel posted into `completions`; fails if it had to drop
    /// any. (With `FEAT_NODROP` it holds what does not fit, and drops only when it cannot
    /// allocate: then an operation's end is lost, with a buffer or a connection that would
    /// wait for it forever, and the worker ends rather than serve on with a leak.)
    pub(super) fn reap(&mut self) -> io::Result<()> {
        let mut queue = self.ring.completion();
        let dropped = queue.overflow();
        self.completions.extend(&mut queue);
        match dropped {
            0 => Ok(()),
            n => Err(completions_dropped(n)),
        }
    }

    /// Submits what is queued and waits for a completion or `timeout`; does not wait
    /// while completions reaped earlier wait to be handled.
    pub(super) fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let submitted = if self.completions.is_empty() {
            let timeout = types::Timespec::from(timeout);
            let args = types::SubmitArgs::new().timespec(&timeout);
            self.ring.submitter().submit_with_args(1, &args)
        } else {
            self.ring.submit()
        };
        match submitted {
            Ok(_) => Ok(()),
            Err(err) if err.raw_os_error() == Some(libc::ETIME) || is_transient(&err) => Ok(()),
            Err(err) if err.raw_os_error() == Some(libc::EBADR) => {
                Err(completions_dropped(self.ring.completion().overflow()))
            }
            Err(err) => Err(err),
        }
    }

    /// Queues an operation. When the queue is full, submits what is queued; when the
    /// kernel will not take it before completions are reaped (`EBUSY`), reaps them (they
    /// are handled with the next batch), so that the queue never stays full.
    ///
    /// # Safety
    ///
    /// Whatever memory `entry` points to must stay valid until its last completion.
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the caller keeps the entry's memory valid.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            let made_room = if self.ring.params().is_setup_sqpoll() {
                self.ring.submitter().squeue_wait()
            } else {
                self.ring.submit()
            };
            match made_room {
                Ok(_) => {}
                Err(err) if err.raw_os_error() == Some(libc::EINTR) => {}
                Err(err) if is_transient(&err) => {
                    let before = self.completions.len();
                    self.reap()?;
                    if self.completions.len() == before {
                        // Short of memory rather than of room: give the kernel a moment.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Queues an operation that points at no memory of ours (accepts and receives into
    /// the provided buffers, polls, shutdowns, cancels): nothing to keep alive.
    pub(super) fn push_plain(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: the entry points at no memory; the provided buffers a receive may fill
        // are leaked, so they outlive every operation.
        unsafe { self.push(entry) }
    }

    /// Queues a send of `bytes` with user data `data`, raising no SIGPIPE when the peer is
    /// gone; more than 4 GiB goes out in part (the completion says how much).
    ///
    /// The kernel reads `bytes` after this returns, so the worker calls it only with bytes
    /// the core holds in place until the send's completion is handled: an HTTP connection's
    /// unsent output (`Core::unsent`, advanced with `may_write` false while its send is in
    /// flight) or a PostgreSQL link's (`Core::link_unsent`, kept until `Core::link_sent`).
    pub(super) fn push_send(
        &mut self,
        socket: impl Into<Socket>,
        bytes: &[u8],
        data: u64,
    ) -> io::Result<()> {
        let (pointer, len) = (bytes.as_ptr(), bytes.len().min(u32::MAX as usize) as u32);
        let send = match socket.into() {
            Socket::Fixed(socket) => opcode::Send::new(socket, pointer, len),
            Socket::Fd(fd) => opcode::Send::new(fd, pointer, len),
        };
        let entry = send.flags(libc::MSG_NOSIGNAL).build().user_data(data);
        // SAFETY: the entry points into `bytes`, which stay in place and allocated until
        // the send completes. The core leaves a connection's output alone while the slot's
        // send is not `SendOp::Idle` (the worker advances it with `may_write` false), and a
        // link's unsent bytes until they are reported sent or the link closed. Neither is
        // freed early: a slot is released, and a link's socket closed, only once no
        // operation of theirs is in flight (`SlotIo::in_flight`, `LinkIo::in_flight`).
        unsafe { self.push(entry) }
    }

    /// Queues a single-shot receive from link `index`'s socket `fd` into its buffer in
    /// `buffers`, with user data `data`; `poll_first` when the socket was found empty last
    /// time, so that it waits for readability before it tries.
    ///
    /// The caller arms at most one receive per link at a time, and reads the buffer
    /// ([`LinkBuffers::filled`]) only on its completion: the kernel writes to it until then.
    pub(super) fn push_link_recv(
        &mut self,
        fd: types::Fd,
        buffers: &LinkBuffers,
        index: usize,
        poll_first: bool,
        data: u64,
    ) -> io::Result<()> {
        if index >= buffers.count {
            return Err(io::Error::other(format!(
                "no receive buffer for link {index}"
            )));
        }
        let buffer = buffers.buffers.wrapping_add(index * LINK_BUFFER_SIZE);
        let entry = opcode::Recv::new(fd, buffer, LINK_BUFFER_SIZE as u32)
            .ioprio(if poll_first { RECV_POLL_FIRST } else { 0 })
            .build()
            .user_data(data);
        // SAFETY: the entry points into the link's buffer (`index` is within the allocation,
        // just checked), leaked, so valid whenever the kernel writes to it. No other receive
        // into it is in flight and nothing reads it until this one completes (the caller's
        // part, above).
        unsafe { self.push(entry) }
    }
}

/// What a send goes to: an HTTP connection (an entry of the ring's file table) or a
/// PostgreSQL link (a descriptor).
pub(super) enum Socket {
    Fixed(types::Fixed),
    Fd(types::Fd),
}

impl From<types::Fixed> for Socket {
    fn from(socket: types::Fixed) -> Socket {
        Socket::Fixed(socket)
    }
}

impl From<types::Fd> for Socket {
    fn from(fd: types::Fd) -> Socket {
        Socket::Fd(fd)
    }
}

/// The kernel dropped `count` completions: it could not allocate room for them.
fn completions_dropped(count: u32) -> io::Error {
    io::Error::other(format!(
        "the kernel dropped {count} io_uring completion(s) (out of memory): the operations \
         they ended would never end, leaking connections and buffers"
    ))
}

/// Interrupted, or the kernel wants completions reaped first: try again.
fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(vars: &[(&str, &str)]) -> Result<UringOptions, String> {
        UringOptions::from_env(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        })
    }

    #[test]
    fn options_default_to_no_sqpoll_and_1024_buffers() {
        assert_eq!(
            options(&[]),
            Ok(UringOptions {
                sqpoll: false,
                buffers: 1024
            })
        );
        assert_eq!(
            options(&[("GNOSIS_SQPOLL", "1"), ("GNOSIS_URING_BUFFERS", "32768")]),
            Ok(UringOptions {
                sqpoll: true,
                buffers: 32_768
            })
        );
    }

    #[test]
    fn options_reject_what_the_kernel_would() {
        for vars in [
            [("GNOSIS_SQPOLL", "yes")],
            [("GNOSIS_URING_BUFFERS", "1000")],
            [("GNOSIS_URING_BUFFERS", "0")],
            [("GNOSIS_URING_BUFFERS", "65536")],
        ] {
            assert!(options(&vars).is_err(), "{vars:?}");
        }
    }
}
