//! The io_uring server for all seven tests: one ring per thread, each with its own
//! listener, connections, PostgreSQL links and buffers. Nothing is shared between threads.
//!
//! Per connection there is at most one multishot receive (into the ring's provided buffers)
//! and at most one send in flight. Completions are handled in batches: received bytes are
//! appended to the connection's input and the buffer goes straight back to the kernel;
//! after the batch each touched connection answers all its complete requests and sends
//! them with one send, which the next wait submits together with everything else.
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::core::{Core, LinkOrder, Next, Swept};
use crate::service::Service;
use crate::sys;

const SUBMISSION_ENTRIES: u32 = 2048;
/// Room for a receive and a send completion from thousands of connections per wait; more
/// are held by the kernel (overflow) and delivered on the next wait, never dropped.
const COMPLETION_ENTRIES: u32 = 16 * 1024;
/// The size of each receive buffer: a pipelined batch of 16 TFB requests is about 2.7 KB.
const BUFFER_SIZE: usize = 4096;
const BUFFER_GROUP: u16 = 0;
/// Received but unanswered bytes above which a connection stops receiving until its
/// responses have gone out (a multishot receive delivers while a send is in flight, when
/// nothing is answered), unless the request at the front may be longer: it must be able to
/// arrive whole (`Core::longest_request`).
const MAX_BUFFERED_INPUT: usize = 64 * 1024;
/// Connections the multishot accept took past the connection cap before its cancel landed,
/// held unserved (as the backlog holds them for epoll) until slots free; beyond this many,
/// closed at once.
const MAX_WAITING: usize = 1024;
/// The most entries of a ring's file table, which holds its HTTP connections' sockets as
/// direct descriptors (no `fget` per operation, no descriptor in the process's table). The
/// open-files limit caps it, as it caps descriptors; when it is full, accepts pause as
/// they do when descriptors run out. The kernel keeps 8 bytes per entry.
const MAX_DIRECT_SOCKETS: u64 = 64 * 1024;

/// What a completion belongs to: the kind in the top byte, then the slot's generation
/// (24 bits), then the slot index.
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const CANCEL: u64 = 4;
const LINK_CONNECT: u64 = 5;
const LINK_RECV: u64 = 6;
const LINK_SEND: u64 = 7;
const SHUTDOWN: u64 = 8;
const CLOSE: u64 = 9;
const CANCEL_ALL: u64 = 10;
const LINK_CANCEL: u64 = 11;
const GENERATION_MASK: u32 = 0xff_ffff;

fn user_data(kind: u64, generation: u32, index: usize) -> u64 {
    kind << 56 | u64::from(generation & GENERATION_MASK) << 32 | index as u64
}

fn decode(user_data: u64) -> (u64, u32, usize) {
    (
        user_data >> 56,
        (user_data >> 32) as u32 & GENERATION_MASK,
        (user_data & 0xffff_ffff) as usize,
    )
}

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
fn unusable(step: &str, err: io::Error) -> io::Error {
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

/// The provided buffers a multishot receive takes from: a ring of descriptors shared with
/// the kernel, and the buffers themselves.
///
/// Both allocations are leaked on purpose: a worker lives as long as the process, and
/// memory that is never freed can never be written by the kernel after it was freed,
/// whatever order the ring is torn down in.
struct BufferRing {
    /// A power of two.
    count: u16,
    descriptors: *mut BufDescriptor,
    buffers: *mut u8,
    /// Our copy of the tail: descriptors up to it are written, not yet all published.
    tail: u16,
}

impl BufferRing {
    fn register(ring: &IoUring, count: u16) -> io::Result<Self> {
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
            ring.submitter().register_buf_ring_with_flags(
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
        };
        for id in 0..count {
            ring.give_back(id);
        }
        ring.publish();
        Ok(ring)
    }

    /// The first `len` bytes of buffer `id`, which a completion says the kernel filled.
    fn filled(&self, id: u16, len: usize) -> &[u8] {
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

    /// Returns buffer `id` to the kernel; it may use it once [`publish`](Self::publish)ed.
    fn give_back(&mut self, id: u16) {
        if id >= self.count {
            return;
        }
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
    }

    /// Lets the kernel use every buffer given back so far.
    fn publish(&self) {
        // SAFETY: the first descriptor's `resv` is the ring's tail: a valid, aligned u16
        // for as long as the ring lives (never freed), which the kernel reads concurrently
        // and nothing here reads or writes but through this atomic.
        let tail = unsafe { AtomicU16::from_ptr(&raw mut (*self.descriptors).resv) };
        tail.store(self.tail, Ordering::Release);
    }
}

/// The io_uring state of one HTTP connection (same index as the core's slot).
#[derive(Default)]
struct SlotIo {
    recv_armed: bool,
    /// A cancel of the receive was submitted (to stop reading for a while).
    recv_cancelled: bool,
    /// The kernel is reading the connection's unsent output: nothing may change it until
    /// the send completes.
    sending: bool,
    /// A shutdown is under way. io_uring runs shutdowns on its worker threads, which look
    /// the socket's file-table entry up only when they get to it.
    shutting_down: bool,
    /// The cancel of all its operations is under way.
    cancelling: bool,
    /// Being closed: waiting for its operations to end before the socket is closed.
    closing: bool,
    /// Queued to be brought up to date after the current batch of completions.
    dirty: bool,
}

impl SlotIo {
    /// Whether an operation the kernel holds still names the socket's file-table entry:
    /// until none does, closing it could let the entry's next socket get that operation.
    fn in_flight(&self) -> bool {
        self.recv_armed || self.sending || self.shutting_down || self.cancelling
    }
}

/// The io_uring state of one PostgreSQL link (same index as the core's link): its socket,
/// and the operations under way on it.
#[derive(Default)]
struct LinkIo {
    socket: Option<OwnedFd>,
    /// Waiting for the connect to end (a poll for writability).
    connecting: bool,
    recv_armed: bool,
    /// The kernel is sending from the core's link output.
    sending: bool,
    cancelling: bool,
    /// The core ordered it closed: it is, once no operation names the descriptor, so that
    /// no operation can reach a socket that gets the descriptor's number next.
    closing: bool,
}

impl LinkIo {
    fn in_flight(&self) -> bool {
        self.connecting || self.recv_armed || self.sending || self.cancelling
    }

    fn fd(&self) -> Option<RawFd> {
        self.socket.as_ref().map(AsRawFd::as_raw_fd)
    }
}

pub struct Worker<S> {
    /// Declared first so that it is dropped first.
    ring: IoUring,
    setup: RingSetup,
    buffers: BufferRing,
    core: Core<S, types::Fixed>,
    listener: OwnedFd,
    accept_armed: bool,
    /// Out of descriptors, or at the connection cap: no accepting until the next sweep.
    accept_paused: bool,
    /// Accepted past the cap: opened in arrival order as slots free.
    waiting: VecDeque<types::Fixed>,
    io: Vec<SlotIo>,
    links: Vec<LinkIo>,
    dirty: Vec<usize>,
    completed: Vec<usize>,
    /// Completions reaped and not handled yet.
    completions: Vec<cqueue::Entry>,
}

impl<S: Service> Worker<S> {
    pub fn new(
        listener: OwnedFd,
        core: Core<S, types::Fixed>,
        options: UringOptions,
    ) -> io::Result<Self> {
        let (ring, setup) = new_ring(options.sqpoll)?;
        let buffers = BufferRing::register(&ring, options.buffers)?;
        let direct_sockets = sys::open_files_limit()?.min(MAX_DIRECT_SOCKETS) as u32;
        ring.submitter()
            .register_files_sparse(direct_sockets)
            .map_err(|err| unusable("registering the file table", err))?;
        let links = (0..core.links()).map(|_| LinkIo::default()).collect();
        Ok(Worker {
            ring,
            setup,
            buffers,
            core,
            listener,
            accept_armed: false,
            accept_paused: false,
            waiting: VecDeque::new(),
            io: Vec::new(),
            links,
            dirty: Vec::new(),
            completed: Vec::new(),
            completions: Vec::with_capacity(COMPLETION_ENTRIES as usize),
        })
    }

    pub fn setup(&self) -> RingSetup {
        self.setup
    }

    /// Serves until something fails that the worker cannot recover from, and returns it.
    pub fn run(mut self) -> io::Error {
        match self.serve() {
            Err(err) => err,
            Ok(never) => match never {},
        }
    }

    fn serve(&mut self) -> io::Result<std::convert::Infallible> {
        let mut batch = Vec::with_capacity(COMPLETION_ENTRIES as usize);
        loop {
            if !self.accept_armed && !self.accept_paused && self.core.ready_to_listen() {
                self.arm_accept()?;
            }
            self.sync_links()?;
            self.wait()?;
            self.core.refresh();
            self.reap()?;
            // Completions reaped while handling these (to make room for submissions) are
            // the next batch's.
            std::mem::swap(&mut batch, &mut self.completions);
            for completion in &batch {
                self.on_completion(
                    completion.user_data(),
                    completion.result(),
                    completion.flags(),
                )?;
            }
            batch.clear();
            // Every buffer of the batch is back before any receive is re-armed.
            self.buffers.publish();
            self.core.on_timers();
            let mut found = Vec::new();
            if self.core.sweep(|index, swept| found.push((index, swept))) {
                for (index, swept) in found {
                    match swept {
                        Swept::Expired => self.begin_close(index)?,
                        Swept::Resumable => self.mark_dirty(index),
                    }
                }
                while !self.core.is_full() {
                    let Some(socket) = self.waiting.pop_front() else {
                        break;
                    };
                    self.open(socket)?;
                }
                self.accept_paused = self.core.is_full();
            }
            self.advance_dirty()?;
            self.send_links()?;
        }
    }

    /// Moves the completions the kernel posted into `completions`; fails if it had to drop
    /// any. (With `FEAT_NODROP` it holds what does not fit, and drops only when it cannot
    /// allocate: then an operation's end is lost, with a buffer or a connection that would
    /// wait for it forever, and the worker ends rather than serve on with a leak.)
    fn reap(&mut self) -> io::Result<()> {
        let mut queue = self.ring.completion();
        let dropped = queue.overflow();
        self.completions.extend(&mut queue);
        match dropped {
            0 => Ok(()),
            n => Err(completions_dropped(n)),
        }
    }

    /// Brings every connection touched in this batch up to date, including those that
    /// received responses from the database.
    fn advance_dirty(&mut self) -> io::Result<()> {
        let mut completed = std::mem::take(&mut self.completed);
        self.core.take_completed(&mut completed);
        for &index in &completed {
            self.mark_dirty(index);
        }
        self.completed = completed;
        let mut dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            self.advance(index)?;
        }
        dirty.clear();
        self.dirty = dirty;
        Ok(())
    }

    /// Submits what is queued and waits for a completion or the core's next timer; does
    /// not wait while completions reaped earlier wait to be handled.
    fn wait(&mut self) -> io::Result<()> {
        let submitted = if self.completions.is_empty() {
            let timeout = self
                .core
                .next_wake()
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
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
    fn push_plain(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: the entry points at no memory; the provided buffers a receive may fill
        // are leaked, so they outlive every operation.
        unsafe { self.push(entry) }
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
            .allocate_file_index(true)
            .build()
            .user_data(user_data(ACCEPT, 0, 0));
        self.push_plain(entry)?;
        self.accept_armed = true;
        Ok(())
    }

    fn on_completion(&mut self, data: u64, result: i32, flags: u32) -> io::Result<()> {
        let (kind, generation, index) = decode(data);
        match kind {
            ACCEPT => self.on_accept(result, flags),
            RECV => self.on_recv(index, generation, result, flags),
            SEND => self.on_send(index, generation, result),
            SHUTDOWN | CANCEL_ALL => self.on_slot_op(kind, index, generation),
            LINK_CONNECT => self.on_link_connect(index, result),
            LINK_RECV => self.on_link_recv(index, result, flags),
            LINK_SEND => self.on_link_send(index, result),
            LINK_CANCEL => self.on_link_cancel(index),
            // The cancels of one receive report nothing we need (the receive completes
            // too), nor do closes.
            _ => Ok(()),
        }
    }

    fn on_accept(&mut self, result: i32, flags: u32) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.accept_armed = false;
        }
        if result >= 0 {
            // The new socket's entry in the file table (with TCP_NODELAY from the listener).
            let socket = types::Fixed(result as u32);
            // Those the accept took before its cancel landed wait for a slot.
            if self.core.is_full() {
                return self.wait_for_slot(socket);
            }
            return self.open(socket);
        }
        let err = io::Error::from_raw_os_error(-result);
        if result == -libc::EINVAL {
            return Err(unusable("multishot accept", err));
        }
        if sys::is_out_of_descriptors(&err) {
            crate::log!("cannot accept: {err}; pausing accepts for a second");
            return self.pause_accepting();
        }
        // Anything else (the peer gave up before we took it, ...) concerns one connection.
        Ok(())
    }

    /// Stops the multishot accept until the next sweep finds room (it is not re-armed
    /// while paused); the backlog waits in the kernel.
    fn pause_accepting(&mut self) -> io::Result<()> {
        if self.accept_paused {
            return Ok(());
        }
        self.accept_paused = true;
        if !self.accept_armed {
            return Ok(());
        }
        let entry = opcode::AsyncCancel::new(user_data(ACCEPT, 0, 0))
            .build()
            .user_data(user_data(CANCEL, 0, 0));
        self.push_plain(entry)
    }

    fn open(&mut self, socket: types::Fixed) -> io::Result<()> {
        let index = self.core.open(socket);
        if index >= self.io.len() {
            self.io.resize_with(index + 1, SlotIo::default);
        }
        self.io[index] = SlotIo::default();
        self.arm_recv(index)?;
        if self.core.is_full() {
            self.pause_accepting()?;
        }
        Ok(())
    }

    /// Holds a connection accepted past the cap until a slot frees, or closes it if too
    /// many already wait.
    fn wait_for_slot(&mut self, socket: types::Fixed) -> io::Result<()> {
        if self.waiting.len() < MAX_WAITING {
            self.waiting.push_back(socket);
            return self.pause_accepting();
        }
        let entry = opcode::Close::new(socket)
            .build()
            .user_data(user_data(CLOSE, 0, 0));
        self.push_plain(entry)
    }

    fn arm_recv(&mut self, index: usize) -> io::Result<()> {
        let Some(&socket) = self.core.socket(index) else {
            return Ok(());
        };
        let entry = opcode::RecvMulti::new(socket, BUFFER_GROUP)
            .build()
            .user_data(user_data(RECV, self.core.generation(index), index));
        let io = &mut self.io[index];
        io.recv_armed = true;
        io.recv_cancelled = false;
        self.push_plain(entry)
    }

    /// The slot `index`, if it still belongs to the connection of `generation`.
    fn live(&self, index: usize, generation: u32) -> bool {
        self.core.socket(index).is_some()
            && self.core.generation(index) & GENERATION_MASK == generation
    }

    fn on_recv(
        &mut self,
        index: usize,
        generation: u32,
        result: i32,
        flags: u32,
    ) -> io::Result<()> {
        let buffer = cqueue::buffer_select(flags);
        let live = self.live(index, generation);
        if live && !self.io[index].closing {
            match (buffer, result) {
                (Some(id), 1..) => {
                    let data = self.buffers.filled(id, result as usize);
                    self.core.received(index, data);
                }
                (_, 0) => self.core.received(index, &[]),
                _ => {}
            }
        }
        if let Some(id) = buffer {
            self.buffers.give_back(id);
        }
        if !live {
            return Ok(());
        }
        if !cqueue::more(flags) {
            let io = &mut self.io[index];
            io.recv_armed = false;
            io.recv_cancelled = false;
        }
        match result {
            0.. => {}
            // Out of buffers (re-armed after the batch, when they are back) or cancelled by us.
            _ if result == -libc::ENOBUFS || result == -libc::ECANCELED => {}
            _ if result == -libc::EINVAL => {
                return Err(unusable(
                    "multishot receive",
                    io::Error::from_raw_os_error(libc::EINVAL),
                ))
            }
            // Reset by the peer and the like.
            _ => return self.begin_close(index),
        }
        self.mark_dirty(index);
        Ok(())
    }

    fn on_send(&mut self, index: usize, generation: u32, result: i32) -> io::Result<()> {
        if !self.live(index, generation) {
            return Ok(());
        }
        let io = &mut self.io[index];
        io.sending = false;
        if result <= 0 {
            // The peer is gone (EPIPE, ECONNRESET), or we cancelled the send.
            return self.begin_close(index);
        }
        if !io.closing {
            let sent = (result as usize).min(self.core.unsent(index).len());
            self.core.sent(index, sent);
        }
        self.mark_dirty(index);
        Ok(())
    }

    /// A shutdown or a cancel of all a connection's operations ended.
    fn on_slot_op(&mut self, kind: u64, index: usize, generation: u32) -> io::Result<()> {
        if !self.live(index, generation) {
            return Ok(());
        }
        let io = &mut self.io[index];
        match kind {
            SHUTDOWN => io.shutting_down = false,
            _ => io.cancelling = false,
        }
        if io.closing {
            self.mark_dirty(index);
        }
        Ok(())
    }

    fn mark_dirty(&mut self, index: usize) {
        let io = &mut self.io[index];
        if !io.dirty {
            io.dirty = true;
            self.dirty.push(index);
        }
    }

    /// Brings a connection up to date after its completions: answers what arrived, sends
    /// it, starts or stops receiving, and closes it once it is done.
    fn advance(&mut self, index: usize) -> io::Result<()> {
        let io = &mut self.io[index];
        io.dirty = false;
        if io.closing {
            return self.begin_close(index);
        }
        let sending = io.sending;
        let next = self.core.advance(index, !sending);
        let Some(&socket) = self.core.socket(index) else {
            return Ok(());
        };
        let generation = self.core.generation(index);
        let read = match next {
            Next::Close => return self.begin_close(index),
            Next::Linger => {
                let entry = opcode::Shutdown::new(socket, libc::SHUT_WR)
                    .build()
                    .user_data(user_data(SHUTDOWN, generation, index));
                self.io[index].shutting_down = true;
                self.push_plain(entry)?;
                true
            }
            Next::Keep { read } => read,
        };
        let unsent = self.core.unsent(index);
        if !sending && !unsent.is_empty() {
            let entry = send_entry(socket, unsent, user_data(SEND, generation, index));
            self.io[index].sending = true;
            // SAFETY: the output is left alone while `sending` is set, and the slot (and
            // with it the connection's buffers) is not reused before the send completes.
            unsafe { self.push(entry) }?;
        }
        let wants_input = read
            && (self.core.is_lingering(index)
                || self.core.buffered_input(index)
                    < MAX_BUFFERED_INPUT.max(self.core.longest_request()));
        let io = &mut self.io[index];
        if wants_input && !io.recv_armed {
            self.arm_recv(index)?;
        } else if !wants_input && io.recv_armed && !io.recv_cancelled {
            // Stop reading until the client has taken its responses.
            io.recv_cancelled = true;
            let entry = opcode::AsyncCancel::new(user_data(RECV, generation, index))
                .build()
                .user_data(user_data(CANCEL, generation, index));
            self.push_plain(entry)?;
        }
        Ok(())
    }

    /// Cancels the connection's operations and closes it once they have all completed:
    /// until then its file-table entry stays taken, so no new connection can get it while
    /// an operation of this one still names it.
    fn begin_close(&mut self, index: usize) -> io::Result<()> {
        let Some(&socket) = self.core.socket(index) else {
            return Ok(());
        };
        let generation = self.core.generation(index);
        let io = &mut self.io[index];
        io.closing = true;
        if !io.in_flight() {
            *io = SlotIo::default();
            self.core.release(index);
            let entry = opcode::Close::new(socket)
                .build()
                .user_data(user_data(CLOSE, generation, index));
            return self.push_plain(entry);
        }
        if io.cancelling || !(io.recv_armed || io.sending) {
            // Cancelled already, or only a shutdown to wait for: the completions bring it
            // back here.
            return Ok(());
        }
        io.cancelling = true;
        let entry = opcode::AsyncCancel2::new(types::CancelBuilder::fd(socket).all())
            .build()
            .user_data(user_data(CANCEL_ALL, generation, index));
        self.push_plain(entry)
    }

    // The PostgreSQL links: the core orders, this moves the bytes.

    /// Opens and closes the links' sockets as the core orders. A new socket is polled for
    /// its connect to end; a closing one is closed once nothing names it any more.
    fn sync_links(&mut self) -> io::Result<()> {
        for index in 0..self.links.len() {
            // A socket closed at once may be followed by the connect of the next.
            while let Some(order) = self.core.link_order(index) {
                match order {
                    LinkOrder::Connect(address) => match sys::connect_nonblocking(&address) {
                        Ok(socket) => {
                            let entry = opcode::PollAdd::new(
                                types::Fd(socket.as_raw_fd()),
                                libc::POLLOUT as u32,
                            )
                            .build()
                            .user_data(user_data(
                                LINK_CONNECT,
                                0,
                                index,
                            ));
                            self.links[index] = LinkIo {
                                socket: Some(socket),
                                connecting: true,
                                ..LinkIo::default()
                            };
                            self.push_plain(entry)?;
                        }
                        Err(err) => self.core.link_connected(index, Err(err)),
                    },
                    LinkOrder::Close => {
                        self.links[index].closing = true;
                        self.close_link(index)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Closes a closing link's socket once no operation names it, cancelling them first.
    fn close_link(&mut self, index: usize) -> io::Result<()> {
        let link = &mut self.links[index];
        let Some(fd) = link.fd() else {
            // The socket could not even be made.
            *link = LinkIo::default();
            self.core.link_closed(index);
            return Ok(());
        };
        if !link.in_flight() {
            *link = LinkIo::default();
            self.core.link_closed(index);
            return Ok(());
        }
        if link.cancelling {
            return Ok(());
        }
        // Shut down too: a receive or send that a cancel misses ends on its own.
        if let Some(socket) = &link.socket {
            sys::shutdown_both(socket);
        }
        link.cancelling = true;
        let entry = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
            .build()
            .user_data(user_data(LINK_CANCEL, 0, index));
        self.push_plain(entry)
    }

    /// An operation on link `index` ended: a closing link may close now.
    fn link_op_ended(&mut self, index: usize) -> io::Result<()> {
        match self.links[index].closing {
            true => self.close_link(index),
            false => Ok(()),
        }
    }

    fn on_link_connect(&mut self, index: usize, result: i32) -> io::Result<()> {
        let Some(link) = self.links.get_mut(index) else {
            return Ok(());
        };
        link.connecting = false;
        if !link.closing {
            if let Some(socket) = &link.socket {
                let result = match result {
                    ..0 => Err(io::Error::from_raw_os_error(-result)),
                    _ => sys::take_socket_error(socket),
                };
                self.core.link_connected(index, result);
            }
        }
        self.link_op_ended(index)
    }

    fn arm_link_recv(&mut self, index: usize) -> io::Result<()> {
        let link = &mut self.links[index];
        let Some(fd) = link.fd() else {
            return Ok(());
        };
        if link.recv_armed || link.connecting || link.closing {
            return Ok(());
        }
        let entry = opcode::RecvMulti::new(types::Fd(fd), BUFFER_GROUP)
            .build()
            .user_data(user_data(LINK_RECV, 0, index));
        link.recv_armed = true;
        self.push_plain(entry)
    }

    fn on_link_recv(&mut self, index: usize, result: i32, flags: u32) -> io::Result<()> {
        let buffer = cqueue::buffer_select(flags);
        let Some(link) = self.links.get_mut(index) else {
            return Ok(());
        };
        if !cqueue::more(flags) {
            link.recv_armed = false;
        }
        if !link.closing {
            match (buffer, result) {
                (Some(id), 1..) => {
                    let data = self.buffers.filled(id, result as usize);
                    self.core.link_received(index, data);
                }
                (_, 0) => self.core.link_received(index, &[]),
                // Out of buffers (re-armed at the next round of sends, when they are back).
                (_, _) if result == -libc::ENOBUFS || result == -libc::ECANCELED => {}
                _ => self
                    .core
                    .link_failed(index, io::Error::from_raw_os_error(-result)),
            }
        }
        if let Some(id) = buffer {
            self.buffers.give_back(id);
        }
        self.link_op_ended(index)
    }

    fn on_link_send(&mut self, index: usize, result: i32) -> io::Result<()> {
        let Some(link) = self.links.get_mut(index) else {
            return Ok(());
        };
        link.sending = false;
        if !link.closing {
            match result {
                1.. => self.core.link_sent(index, result as usize),
                _ => self
                    .core
                    .link_failed(index, io::Error::from_raw_os_error(-result.min(-1))),
            }
        }
        self.link_op_ended(index)
    }

    fn on_link_cancel(&mut self, index: usize) -> io::Result<()> {
        let Some(link) = self.links.get_mut(index) else {
            return Ok(());
        };
        link.cancelling = false;
        self.link_op_ended(index)
    }

    /// Sends what each link has queued, one send in flight per link, and re-arms the
    /// receives that ran out of buffers.
    fn send_links(&mut self) -> io::Result<()> {
        for index in 0..self.links.len() {
            self.arm_link_recv(index)?;
            let link = &self.links[index];
            let Some(fd) = link.fd() else {
                continue;
            };
            if link.sending || link.connecting || link.closing {
                continue;
            }
            let unsent = self.core.link_unsent(index);
            if unsent.is_empty() {
                continue;
            }
            let entry = send_entry(types::Fd(fd), unsent, user_data(LINK_SEND, 0, index));
            self.links[index].sending = true;
            // SAFETY: the core leaves the link's unsent bytes as they are until they are
            // reported sent or the socket closed, and the socket closes only once this
            // send has completed.
            unsafe { self.push(entry) }?;
        }
        Ok(())
    }
}

/// A send of `bytes` that raises no SIGPIPE when the peer is gone; more than 4 GiB goes out
/// in part (the completion says how much). The entry points into `bytes`: the caller keeps
/// them in place until the send completes.
fn send_entry(socket: impl Into<Socket>, bytes: &[u8], data: u64) -> squeue::Entry {
    let (pointer, len) = (bytes.as_ptr(), bytes.len().min(u32::MAX as usize) as u32);
    let send = match socket.into() {
        Socket::Fixed(socket) => opcode::Send::new(socket, pointer, len),
        Socket::Fd(fd) => opcode::Send::new(fd, pointer, len),
    };
    send.flags(libc::MSG_NOSIGNAL).build().user_data(data)
}

/// What a send goes to: an HTTP connection (an entry of the ring's file table) or a
/// PostgreSQL link (a descriptor).
enum Socket {
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

    #[test]
    fn user_data_round_trips() {
        let data = user_data(SEND, GENERATION_MASK + 5, 123_456);
        assert_eq!(decode(data), (SEND, 4, 123_456));
    }
}
