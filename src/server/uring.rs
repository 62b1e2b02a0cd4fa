//! The io_uring server for all seven tests: one ring per thread, each with its own
//! listener, connections, PostgreSQL links and buffers. Nothing is shared between threads.
//!
//! Per connection there is at most one multishot receive (into the ring's provided buffers)
//! and at most one send in flight. Completions are handled in batches: received bytes are
//! appended to the connection's input and the buffer goes straight back to the kernel;
//! after the batch each touched connection answers all its complete requests and sends
//! them with one send, which the next wait submits together with everything else.
//!
//! A link (PostgreSQL, upstream, Redis) has at most one single-shot receive in flight, into
//! a buffer of its own, armed again after each completion only while its connection wants
//! input: one that stops wanting it takes at most that read past its bound.
mod quic;
mod ring;
mod slot;

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};

use self::ring::{unusable, BufferRing, LinkBuffers, Ring, BUFFER_GROUP, COMPLETION_ENTRIES};
pub use self::ring::{RingSetup, UringOptions};
use self::slot::{Life, RecvOp, SendOp, SlotIo};
use super::core::{Core, LinkOrder, Next, Swept};
use super::udp::QuicSocket;
use super::Listener;
use crate::service::Service;
use crate::sys;
use crate::transport::Listening;

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
/// (24 bits), then the slot index (for an accept: the listener's).
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const CANCEL: u64 = 4;
const LINK_CONNECT: u64 = 5;
const LINK_RECV: u64 = 6;
const LINK_SEND: u64 = 7;
const SHUTDOWN: u64 = 8;
const CLOSE: u64 = 9;
const LINK_CANCEL: u64 = 10;
/// The poll on the eventfd that says to drain (`signals.rs`).
const WAKE: u64 = 11;
/// The multishot poll on the QUIC socket for datagrams, and the poll for room to send.
const QUIC_READABLE: u64 = 12;
const QUIC_WRITABLE: u64 = 13;
const GENERATION_MASK: u32 = 0xff_ffff;

fn user_data(kind: u64, generation: u32, index: usize) -> u64 {
    kind << 56 | u64::from(generation & GENERATION_MASK) << 32 | index as u64
}

/// The cancel of the operation of `kind` for `generation` and `index`: what it ends
/// completes with ECANCELED; the cancel's own completion reports nothing we need.
fn cancel(kind: u64, generation: u32, index: usize) -> io_uring::squeue::Entry {
    opcode::AsyncCancel::new(user_data(kind, generation, index))
        .build()
        .user_data(user_data(CANCEL, generation, index))
}

fn decode(user_data: u64) -> (u64, u32, usize) {
    (
        user_data >> 56,
        (user_data >> 32) as u32 & GENERATION_MASK,
        (user_data & 0xffff_ffff) as usize,
    )
}

/// The io_uring state of one link (same index as the core's link): its socket, and the
/// operations under way on it.
#[derive(Default)]
struct LinkIo {
    socket: Option<OwnedFd>,
    /// Waiting for the connect to end (a poll for writability).
    connecting: bool,
    /// The kernel is receiving into the link's buffer (`LinkBuffers`).
    receiving: bool,
    /// The last receive's completion said bytes still wait in the socket: the next tries at
    /// once rather than waiting for readability first.
    more_waiting: bool,
    /// The kernel is sending from the core's link output.
    sending: bool,
    cancelling: bool,
    /// The core ordered it closed: it is, once no operation names the descriptor, so that
    /// no operation can reach a socket that gets the descriptor's number next.
    closing: bool,
}

impl LinkIo {
    fn in_flight(&self) -> bool {
        self.connecting || self.receiving || self.sending || self.cancelling
    }

    fn fd(&self) -> Option<RawFd> {
        self.socket.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// Where a single-shot accept writes its client's address: leaked, since the kernel may
/// write it until the accept completes, whenever the ring is torn down.
struct ClientAddress {
    address: libc::sockaddr_storage,
    len: libc::socklen_t,
}

pub struct Worker<S> {
    /// Declared first so that it is dropped first.
    ring: Ring,
    buffers: BufferRing,
    link_buffers: LinkBuffers,
    core: Core<S, types::Fixed>,
    /// The listeners, each with whether its multishot accept is armed; closed when the
    /// drain begins.
    listeners: Vec<(Listener, bool)>,
    /// Readable once a signal asked the worker to drain; polled from the start (held open
    /// for the poll).
    _wake: OwnedFd,
    /// With the clients' addresses wanted (edge mode), where each listener's accept writes
    /// its client's address (multishot accepts say none); `None` otherwise.
    client_addresses: Option<Vec<&'static mut ClientAddress>>,
    /// Out of descriptors, or at the connection cap: no accepting until the next sweep.
    accept_paused: bool,
    /// Accepted past the cap: opened in arrival order as slots free.
    waiting: VecDeque<(types::Fixed, Listening, Option<IpAddr>)>,
    io: Vec<SlotIo>,
    links: Vec<LinkIo>,
    dirty: Vec<usize>,
    /// Connections that left input to process for their next pass (a connection processes a
    /// bounded amount per pass): advanced again after the next wait, which does not block.
    again: Vec<usize>,
    completed: Vec<usize>,
    /// The QUIC endpoint's UDP socket, if the worker serves HTTP/3, and whether its
    /// multishot poll for datagrams is armed.
    quic: Option<(QuicSocket, bool)>,
}

impl<S: Service> Worker<S> {
    pub fn new(
        listeners: Vec<Listener>,
        wake: OwnedFd,
        core: Core<S, types::Fixed>,
        options: UringOptions,
    ) -> io::Result<Self> {
        let direct_sockets = sys::open_files_limit()?.min(MAX_DIRECT_SOCKETS) as u32;
        let mut ring = Ring::new(options.sqpoll, direct_sockets)?;
        let poll = opcode::PollAdd::new(types::Fd(wake.as_raw_fd()), libc::POLLIN as u32)
            .build()
            .user_data(user_data(WAKE, 0, 0));
        ring.push_plain(poll)?;
        let buffers = BufferRing::register(&ring, options.buffers)?;
        let links = (0..core.links()).map(|_| LinkIo::default()).collect();
        let link_buffers = LinkBuffers::new(core.links());
        let (quic, listeners) = QuicSocket::take_from(listeners);
        let quic = quic.map(|quic| (quic, false));
        let client_addresses = core.wants_client_addresses().then(|| {
            listeners
                .iter()
                .map(|_| {
                    Box::leak(Box::new(ClientAddress {
                        // SAFETY: all-zero bytes are a valid sockaddr_storage.
                        address: unsafe { std::mem::zeroed() },
                        len: 0,
                    }))
                })
                .collect()
        });
        Ok(Worker {
            ring,
            buffers,
            link_buffers,
            core,
            listeners: listeners
                .into_iter()
                .map(|listener| (listener, false))
                .collect(),
            _wake: wake,
            client_addresses,
            accept_paused: false,
            waiting: VecDeque::new(),
            io: Vec::new(),
            links,
            dirty: Vec::new(),
            again: Vec::new(),
            completed: Vec::new(),
            quic,
        })
    }

    pub fn setup(&self) -> RingSetup {
        self.ring.setup()
    }

    /// Serves until something fails that the worker cannot recover from (returned), or
    /// until its drain is over.
    pub fn run(mut self) -> io::Result<()> {
        let mut batch = Vec::with_capacity(COMPLETION_ENTRIES as usize);
        while !self.core.drained() {
            if !self.accept_paused && self.core.ready_to_listen() {
                self.arm_accepts()?;
                self.arm_quic()?;
            }
            self.sync_links()?;
            let timeout = match self.again.is_empty() {
                true => self
                    .core
                    .next_wake()
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
                // Only what arrived meanwhile: input already in waits for its pass.
                false => Duration::ZERO,
            };
            self.ring.wait(timeout)?;
            self.core.refresh();
            self.ring.reap()?;
            // Completions reaped while handling these (to make room for submissions) are
            // the next batch's.
            self.ring.take_completions(&mut batch);
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
                    let Some((socket, kind, client)) = self.waiting.pop_front() else {
                        break;
                    };
                    self.open(socket, kind, client)?;
                }
                self.accept_paused = self.core.is_full();
            }
            self.advance_dirty()?;
            self.send_links()?;
            self.send_datagrams()?;
        }
        Ok(())
    }

    /// A signal asked the worker to stop: it cancels its accepts and closes its listeners
    /// (once every worker has, the kernel refuses new connections), and tells every
    /// connection (`core/drain.rs`), each advanced after this batch.
    fn drain(&mut self) -> io::Result<()> {
        for (which, (_, armed)) in self.listeners.iter().enumerate() {
            if *armed {
                self.ring.push_plain(cancel(ACCEPT, 0, which))?;
            }
        }
        // An accept holds its listener until its cancel lands.
        self.listeners.clear();
        let mut open = Vec::new();
        self.core.drain(|index| open.push(index));
        for index in open {
            self.mark_dirty(index);
        }
        Ok(())
    }

    /// Brings every connection touched in this batch up to date, including those that
    /// received responses from the database.
    fn advance_dirty(&mut self) -> io::Result<()> {
        let mut completed = std::mem::take(&mut self.completed);
        self.core.take_completed(&mut completed);
        completed.append(&mut self.again);
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

    /// Arms the accept of each listener that has none: a multishot one, or, when the
    /// clients' addresses are wanted, a single-shot one that writes its client's address
    /// (the multishot accept has nowhere to write them), armed again as it completes.
    fn arm_accepts(&mut self) -> io::Result<()> {
        for (which, (listener, armed)) in self.listeners.iter_mut().enumerate() {
            if *armed {
                continue;
            }
            let socket = types::Fd(listener.socket.as_raw_fd());
            let entry = match self.client_addresses.as_mut() {
                Some(addresses) => {
                    let slot = &mut *addresses[which];
                    slot.len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                    opcode::Accept::new(socket, (&raw mut slot.address).cast(), &raw mut slot.len)
                        .file_index(Some(types::DestinationSlot::auto_target()))
                        .build()
                }
                None => opcode::AcceptMulti::new(socket)
                    .allocate_file_index(true)
                    .build(),
            };
            self.ring
                .push_plain(entry.user_data(user_data(ACCEPT, 0, which)))?;
            *armed = true;
        }
        Ok(())
    }

    fn on_completion(&mut self, data: u64, result: i32, flags: u32) -> io::Result<()> {
        let (kind, generation, index) = decode(data);
        match kind {
            ACCEPT => self.on_accept(index, result, flags),
            RECV => self.on_recv(index, generation, result, flags),
            SEND => self.on_send(index, generation, result),
            SHUTDOWN => self.on_shutdown(index, generation),
            LINK_CONNECT => self.on_link_connect(index, result),
            LINK_RECV => self.on_link_recv(index, result, flags),
            LINK_SEND => self.on_link_send(index, result),
            LINK_CANCEL => self.on_link_cancel(index),
            WAKE => self.drain(),
            QUIC_READABLE | QUIC_WRITABLE => self.on_quic(kind, flags),
            // The cancels of one receive report nothing we need (the receive completes
            // too), nor do closes.
            _ => Ok(()),
        }
    }

    /// A connection accepted by listener `which`, or its accept's failure.
    fn on_accept(&mut self, which: usize, result: i32, flags: u32) -> io::Result<()> {
        let Some((listener, armed)) = self.listeners.get_mut(which) else {
            // Closed for the drain: what its accept took before its cancel landed is closed
            // unanswered, as the kernel resets what waited in its backlog.
            if result < 0 {
                return Ok(());
            }
            let entry = opcode::Close::new(types::Fixed(result as u32))
                .build()
                .user_data(user_data(CLOSE, 0, 0));
            return self.ring.push_plain(entry);
        };
        if !cqueue::more(flags) {
            *armed = false;
        }
        let kind = listener.kind;
        if result >= 0 {
            // The new socket's entry in the file table (with TCP_NODELAY from the listener).
            let socket = types::Fixed(result as u32);
            let client = self.client_addresses.as_ref().and_then(|addresses| {
                let slot = &addresses[which];
                sys::ip_of(&slot.address, slot.len)
            });
            // Those the accept took before its cancel landed wait for a slot.
            if self.core.is_full() {
                return self.wait_for_slot(socket, kind, client);
            }
            return self.open(socket, kind, client);
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
        for (which, (_, armed)) in self.listeners.iter().enumerate() {
            if *armed {
                self.ring.push_plain(cancel(ACCEPT, 0, which))?;
            }
        }
        Ok(())
    }

    fn open(
        &mut self,
        socket: types::Fixed,
        kind: Listening,
        client: Option<IpAddr>,
    ) -> io::Result<()> {
        let index = self.core.open(socket, kind, client);
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
    fn wait_for_slot(
        &mut self,
        socket: types::Fixed,
        kind: Listening,
        client: Option<IpAddr>,
    ) -> io::Result<()> {
        if self.waiting.len() < MAX_WAITING {
            self.waiting.push_back((socket, kind, client));
            return self.pause_accepting();
        }
        let entry = opcode::Close::new(socket)
            .build()
            .user_data(user_data(CLOSE, 0, 0));
        self.ring.push_plain(entry)
    }

    fn arm_recv(&mut self, index: usize) -> io::Result<()> {
        let Some(&socket) = self.core.socket(index) else {
            return Ok(());
        };
        let entry = opcode::RecvMulti::new(socket, BUFFER_GROUP)
            .build()
            .user_data(user_data(RECV, self.core.generation(index), index));
        self.io[index].recv = RecvOp::Armed;
        self.ring.push_plain(entry)
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
        if live && !self.io[index].closing() {
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
            self.io[index].recv = RecvOp::Idle;
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
        io.send = SendOp::Idle;
        if result <= 0 {
            // The peer is gone (EPIPE, ECONNRESET), or we cancelled the send.
            return self.begin_close(index);
        }
        if !io.closing() {
            let sent = (result as usize).min(self.core.unsent(index).len());
            self.core.sent(index, sent);
        }
        self.mark_dirty(index);
        Ok(())
    }

    /// A connection's shutdown ended.
    fn on_shutdown(&mut self, index: usize, generation: u32) -> io::Result<()> {
        if !self.live(index, generation) {
            return Ok(());
        }
        let io = &mut self.io[index];
        io.shutdown_ended();
        if io.closing() {
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
        if io.closing() {
            return self.begin_close(index);
        }
        let sending = io.send != SendOp::Idle;
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
                self.io[index].life = Life::ShuttingDown;
                self.ring.push_plain(entry)?;
                true
            }
            Next::Keep { read } => read,
        };
        let unsent = self.core.unsent(index);
        if !sending && !unsent.is_empty() {
            self.io[index].send = SendOp::Sending;
            self.ring
                .push_send(socket, unsent, user_data(SEND, generation, index))?;
        }
        let wants_input = read
            && (self.core.is_lingering(index)
                || self.core.buffered_input(index)
                    < MAX_BUFFERED_INPUT.max(self.core.longest_request()));
        if wants_input && self.io[index].recv == RecvOp::Idle {
            self.arm_recv(index)?;
        } else if !wants_input {
            // Stop reading until the client has taken its responses.
            self.cancel_recv(index, generation)?;
        }
        // With a send in flight, its completion brings the connection back.
        if self.io[index].send == SendOp::Idle && self.core.owes_a_pass(index) {
            self.again.push(index);
        }
        Ok(())
    }

    /// Cancels the connection's receive if it is armed and not cancelled already.
    fn cancel_recv(&mut self, index: usize, generation: u32) -> io::Result<()> {
        let io = &mut self.io[index];
        if io.recv == RecvOp::Armed {
            io.recv = RecvOp::Cancelling;
            self.ring.push_plain(cancel(RECV, generation, index))?;
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
        io.begin_close();
        if !io.in_flight() {
            *io = SlotIo::default();
            self.core.release(index);
            let entry = opcode::Close::new(socket)
                .build()
                .user_data(user_data(CLOSE, generation, index));
            return self.ring.push_plain(entry);
        }
        // Each operation is cancelled by its user data, a hash lookup: a cancel by
        // descriptor walks every armed operation of the ring, thousands under load. Their
        // completions bring it back here; a cancel itself names no descriptor.
        self.cancel_recv(index, generation)?;
        let io = &mut self.io[index];
        if io.send == SendOp::Sending {
            io.send = SendOp::Cancelling;
            self.ring.push_plain(cancel(SEND, generation, index))?;
        }
        Ok(())
    }

    // The PostgreSQL links: the core orders, this moves the bytes.

    /// Opens and closes the links' sockets as the core orders. A new socket is polled for
    /// its connect to end; a closing one is closed once nothing names it any more. Each
    /// open one gets the receive low-water mark the core asks for before the wait.
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
                            self.ring.push_plain(entry)?;
                        }
                        Err(err) => self.core.link_connected(index, Err(err)),
                    },
                    LinkOrder::Close => {
                        self.links[index].closing = true;
                        self.close_link(index)?;
                    }
                }
            }
            let link = &self.links[index];
            if let (Some(socket), false, false) = (&link.socket, link.connecting, link.closing) {
                if let Some(bytes) = self.core.link_low_water(index) {
                    if let Err(err) = sys::set_receive_low_water(socket, bytes) {
                        self.core.link_failed(index, err);
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
        self.ring.push_plain(entry)
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

    /// Arms the link's receive while its connection wants input and none is under way. One
    /// at a time, armed again only after the last one's bytes were handed over: a connection
    /// that stops wanting input (a full pipe) takes at most that one read past it.
    fn arm_link_recv(&mut self, index: usize) -> io::Result<()> {
        let link = &self.links[index];
        let Some(fd) = link.fd() else {
            return Ok(());
        };
        if link.connecting || link.closing || link.receiving {
            return Ok(());
        }
        if !self.core.link_wants_input(index) {
            return Ok(());
        }
        let poll_first = !link.more_waiting;
        self.links[index].receiving = true;
        let data = user_data(LINK_RECV, 0, index);
        self.ring
            .push_link_recv(types::Fd(fd), &self.link_buffers, index, poll_first, data)
    }

    fn on_link_recv(&mut self, index: usize, result: i32, flags: u32) -> io::Result<()> {
        let Some(link) = self.links.get_mut(index) else {
            return Ok(());
        };
        link.receiving = false;
        link.more_waiting = cqueue::sock_nonempty(flags);
        if !link.closing {
            match result {
                // All of it, wanted or not: 0 is the peer's EOF.
                0.. => {
                    let data = self.link_buffers.filled(index, result as usize);
                    self.core.link_received(index, data);
                }
                _ => self
                    .core
                    .link_failed(index, io::Error::from_raw_os_error(-result)),
            }
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

    /// Sends what each link has queued, one send in flight per link, and arms the receive of
    /// each that wants input and has none under way.
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
            self.links[index].sending = true;
            self.ring
                .push_send(types::Fd(fd), unsent, user_data(LINK_SEND, 0, index))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        let data = user_data(SEND, GENERATION_MASK + 5, 123_456);
        assert_eq!(decode(data), (SEND, 4, 123_456));
    }
}
