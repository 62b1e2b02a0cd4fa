//! The epoll backend: readiness events, then `read` and `send` on the sockets that are
//! ready. Everything else is the worker core's.
//!
//! An iteration: wait for events; read and answer HTTP requests (database requests queue
//! their queries); read PostgreSQL answers, whose finished responses go to their HTTP
//! connections; then send every queued query with one write per PostgreSQL connection.
//! Before waiting, each PostgreSQL socket gets the receive low-water mark its link asks for,
//! so that the answers to a request's queries wake the worker a few times, not once each.

use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;

use super::core::{Core, LinkOrder, Next, Swept};
use super::udp::QuicSocket;
use super::Listener;
use crate::service::Service;
use crate::sys::{self, Epoll, Events, ACCEPTABLE, HANGUP, READABLE, WRITABLE};
use crate::transport::Listening;

/// Tokens from here up name the listeners (one per port).
const LISTENERS: u64 = u64::MAX - 15;
/// The token of the eventfd that says to drain (`signals.rs`).
const WAKE: u64 = LISTENERS - 1;
/// The token of the QUIC socket.
const QUIC: u64 = WAKE - 1;
/// Tokens from here up (to the listeners) name PostgreSQL connections; below, HTTP
/// connection slots.
const DATABASE: u64 = 1 << 32;
/// Bytes of free space a read asks for.
const READ_CHUNK: usize = 4096;

pub struct Worker<S> {
    core: Core<S, OwnedFd>,
    epoll: Epoll,
    /// Closed when the drain begins.
    listeners: Vec<Listener>,
    /// Readable once a signal asked the worker to drain.
    wake: OwnedFd,
    listening: bool,
    /// Out of descriptors, or at the connection cap: no accepting until the next sweep.
    accept_paused: bool,
    /// The events registered for each HTTP slot.
    interest: Vec<u32>,
    /// Each PostgreSQL link's socket, while it has one.
    links: Vec<LinkSocket>,
    /// Slots the database answered in this iteration, being sent.
    completed: Vec<usize>,
    /// Connections that left input to process for their next pass (a connection processes a
    /// bounded amount per pass): flushed again after the next wait, which does not block.
    again: Vec<usize>,
    /// The QUIC endpoint's UDP socket, if the worker serves HTTP/3.
    quic: Option<QuicSocket>,
}

#[derive(Default)]
struct LinkSocket {
    socket: Option<OwnedFd>,
    /// Its connect is under way.
    connecting: bool,
    /// The events registered for it (`None`: not registered; 0, none while its connection
    /// wants neither to read nor to send).
    interest: Option<u32>,
}

impl<S: Service> Worker<S> {
    pub fn new(
        listeners: Vec<Listener>,
        wake: OwnedFd,
        core: Core<S, OwnedFd>,
    ) -> io::Result<Self> {
        let links = core.links();
        let epoll = Epoll::new()?;
        epoll.add(&wake, ACCEPTABLE, WAKE)?;
        let (quic, listeners) = QuicSocket::take_from(listeners);
        Ok(Worker {
            core,
            epoll,
            listeners,
            wake,
            listening: false,
            accept_paused: false,
            interest: Vec::new(),
            links: (0..links).map(|_| LinkSocket::default()).collect(),
            completed: Vec::new(),
            again: Vec::new(),
            quic,
        })
    }

    /// Serves until something fails that the worker cannot recover from (returned), or
    /// until its drain is over.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        while !self.core.drained() {
            if !self.listening && self.core.ready_to_listen() {
                for (i, listener) in self.listeners.iter().enumerate() {
                    self.epoll
                        .add(&listener.socket, ACCEPTABLE, LISTENERS + i as u64)?;
                }
                if let Some(quic) = &self.quic {
                    self.epoll.add(&quic.socket, READABLE, QUIC)?;
                }
                self.listening = true;
            }
            self.sync_links()?;
            let timeout = self
                .core
                .next_wake()
                .saturating_duration_since(self.core.now());
            let timeout = match self.again.is_empty() {
                true => timeout.as_millis() as i32 + 1,
                // Only what is ready meanwhile: input already in waits for its pass.
                false => 0,
            };
            self.epoll.wait(&mut events, timeout)?;
            // Owed from the last iteration: those this one leaves are the next one's.
            let owed = std::mem::take(&mut self.again);
            self.core.refresh();
            for (token, flags) in events.iter() {
                match token {
                    token if token >= LISTENERS => self.accept_all((token - LISTENERS) as usize),
                    WAKE => self.drain(),
                    QUIC => self.on_quic_event(flags),
                    token if token >= DATABASE => {
                        self.on_link_event((token - DATABASE) as usize, flags)
                    }
                    token => self.on_event(token as usize, flags),
                }
            }
            self.take_turns(owed);
            self.core.on_timers();
            self.flush_links();
            self.deliver_completed();
            self.send_datagrams();
            let mut found = Vec::new();
            if self.core.sweep(|index, swept| found.push((index, swept))) {
                for (index, swept) in found {
                    match swept {
                        Swept::Expired => self.close(index),
                        Swept::Resumable => self.flush(index),
                    }
                }
                self.resume_accepting();
            }
        }
        Ok(())
    }

    /// The QUIC socket is readable (every datagram waiting is taken) or writable again
    /// (sent at the end of the iteration).
    fn on_quic_event(&mut self, flags: u32) {
        if let Some(quic) = self.quic.as_mut().filter(|_| flags & READABLE != 0) {
            quic.receive_all(&mut self.core);
        }
    }

    /// Sends the QUIC endpoint's batches; while the socket's buffer is full, it is
    /// watched for room.
    fn send_datagrams(&mut self) {
        let Some(quic) = &mut self.quic else { return };
        let was_blocked = quic.blocked;
        quic.blocked = quic.send_all(&mut self.core);
        if quic.blocked != was_blocked {
            let interest = match quic.blocked {
                true => READABLE | WRITABLE,
                false => READABLE,
            };
            let _ = self.epoll.modify(&quic.socket, interest, QUIC);
        }
    }

    /// A signal asked the worker to stop: it closes its listeners (once every worker has,
    /// the kernel refuses new connections) and tells every connection (`core/drain.rs`).
    fn drain(&mut self) {
        // Level-triggered: it would wake every wait from now on.
        let _ = self.epoll.modify(&self.wake, 0, WAKE);
        self.listeners.clear();
        let mut open = Vec::new();
        self.core.drain(|index| open.push(index));
        for index in open {
            self.flush(index);
        }
    }

    /// Accepts what listener `which` has waiting.
    fn accept_all(&mut self, which: usize) {
        let Some(kind) = self.listeners.get(which).map(|listener| listener.kind) else {
            return;
        };
        loop {
            if self.core.is_full() {
                // The backlog waits until connections close (checked at the next sweep).
                return self.pause_accepting();
            }
            match sys::accept(&self.listeners[which].socket) {
                Ok(Some((socket, peer))) => self.open(socket, kind, peer),
                Ok(None) => return,
                Err(err) if sys::is_out_of_descriptors(&err) => {
                    crate::log!("cannot accept: {err}; pausing accepts for a second");
                    return self.pause_accepting();
                }
                // The peer gave up before we took it (ECONNABORTED) and the like.
                Err(_) => continue,
            }
        }
    }

    /// Level-triggered epoll would wake us for the same backlog at once: stop listening
    /// until the next sweep, when some connections may have closed.
    fn pause_accepting(&mut self) {
        self.accept_paused = true;
        for (i, listener) in self.listeners.iter().enumerate() {
            let _ = self.epoll.modify(&listener.socket, 0, LISTENERS + i as u64);
        }
    }

    fn resume_accepting(&mut self) {
        if !self.accept_paused || self.core.is_full() {
            return;
        }
        let resumed = self.listeners.iter().enumerate().all(|(i, listener)| {
            let token = LISTENERS + i as u64;
            self.epoll
                .modify(&listener.socket, ACCEPTABLE, token)
                .is_ok()
        });
        self.accept_paused = !resumed;
    }

    fn open(&mut self, socket: OwnedFd, kind: Listening, peer: Option<IpAddr>) {
        let index = self.core.open(socket, kind, peer);
        if index >= self.interest.len() {
            self.interest.resize(index + 1, 0);
        }
        let socket = self.core.socket(index);
        let added = socket.map(|socket| self.epoll.add(socket, READABLE, index as u64));
        if !matches!(added, Some(Ok(()))) {
            self.core.release(index);
            return;
        }
        self.interest[index] = READABLE;
    }

    fn close(&mut self, index: usize) {
        // Closing the descriptor also removes it from epoll.
        drop(self.core.release(index));
    }

    fn on_event(&mut self, index: usize, events: u32) {
        if self.core.socket(index).is_none() {
            return;
        }
        if events & HANGUP != 0 {
            // Reset, or closed both ways: nothing can be sent any more, and epoll would
            // report this again and again whatever the interest.
            return self.close(index);
        }
        if events & READABLE != 0 {
            let read = self.core.read(index, |socket, input| {
                sys::read_into(socket, input, READ_CHUNK)
            });
            match read {
                Some(Err(err)) if err.kind() != io::ErrorKind::WouldBlock => {
                    return self.close(index)
                }
                _ => {}
            }
        }
        self.flush(index);
    }

    /// Answers what can be answered and sends it, reading on while the output drains, and
    /// keeps the epoll registration in line with what the connection waits for.
    fn flush(&mut self, index: usize) {
        let read = loop {
            let read = match self.core.advance(index, true) {
                Next::Close => return self.close(index),
                Next::Linger => {
                    if let Some(socket) = self.core.socket(index) {
                        sys::shutdown_write(socket);
                    }
                    true
                }
                Next::Keep { read } => read,
            };
            let Some(socket) = self.core.socket(index) else {
                return;
            };
            let unsent = self.core.unsent(index);
            if unsent.is_empty() {
                break read;
            }
            match sys::send(socket, unsent) {
                // All sent: requests held back while the output was full can be answered
                // now, and a finished connection can close.
                Ok(n) if self.core.sent(index, n) => {}
                Ok(_) => break read,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break read,
                Err(_) => return self.close(index),
            }
        };
        let Some(socket) = self.core.socket(index) else {
            return;
        };
        if self.core.owes_a_pass(index) {
            self.again.push(index);
        }
        let mut interest = 0;
        if read {
            interest |= READABLE;
        }
        if !self.core.unsent(index).is_empty() {
            interest |= WRITABLE;
        }
        if interest != self.interest[index] {
            self.interest[index] = interest;
            if self.epoll.modify(socket, interest, index as u64).is_err() {
                self.close(index);
            }
        }
    }

    /// Gives the connections that left input to process the pass they were owed (each once,
    /// whatever else happened to them in this iteration).
    fn take_turns(&mut self, mut owed: Vec<usize>) {
        owed.sort_unstable();
        owed.dedup();
        for &index in &owed {
            self.flush(index);
        }
    }

    /// Sends the responses the database finished in this iteration.
    fn deliver_completed(&mut self) {
        let mut completed = std::mem::take(&mut self.completed);
        loop {
            self.core.take_completed(&mut completed);
            if completed.is_empty() {
                break;
            }
            for &index in &completed {
                self.flush(index);
            }
            // Answering them can let held-back requests queue more queries.
            self.flush_links();
        }
        self.completed = completed;
    }

    fn on_link_event(&mut self, index: usize, events: u32) {
        let Some(link) = self.links.get(index) else {
            return;
        };
        let Some(socket) = &link.socket else {
            return;
        };
        if link.connecting {
            if events & (WRITABLE | HANGUP) != 0 {
                let result = sys::take_socket_error(socket);
                self.links[index].connecting = false;
                self.core.link_connected(index, result);
            }
            return;
        }
        // A hang-up is reported whatever the interest: read it to its error or end, wanted
        // or not, else it would be reported again at every wait.
        if events & (READABLE | HANGUP) != 0 {
            self.read_link(index, events & HANGUP != 0);
        }
        if events & WRITABLE != 0 {
            self.send_link(index);
        }
    }

    /// Reads until the socket is empty, or its connection wants no more unless `anyway`,
    /// handing every answer to the core as it comes.
    fn read_link(&mut self, index: usize, anyway: bool) {
        let Some(socket) = self.links[index].socket.as_ref() else {
            return;
        };
        loop {
            // None once the socket is no longer its connection's (it failed, say).
            let Some(room) = self.core.link_read_buffer(index, anyway) else {
                return;
            };
            let wanted = room.len();
            match sys::receive(socket, room) {
                Ok(n) => {
                    self.core.link_filled(index, n);
                    // EOF, or a short read emptied the socket: skip the read that would
                    // say EAGAIN.
                    if n < wanted {
                        return;
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return self.core.link_failed(index, err),
            }
        }
    }

    /// Sends what the link has queued, one `send` per call.
    fn send_link(&mut self, index: usize) {
        let Some(socket) = self.links[index].socket.as_ref() else {
            return;
        };
        let unsent = self.core.link_unsent(index);
        if unsent.is_empty() {
            return;
        }
        match sys::send(socket, unsent) {
            Ok(n) => self.core.link_sent(index, n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => self.core.link_failed(index, err),
        }
    }

    fn flush_links(&mut self) {
        for index in 0..self.links.len() {
            self.send_link(index);
        }
    }

    /// Opens and closes the links' sockets as the core orders, and keeps epoll watching
    /// each for what it waits on, from the receive low-water mark the core asks for.
    fn sync_links(&mut self) -> io::Result<()> {
        for index in 0..self.links.len() {
            // A socket closed at once may be followed by the connect of the next.
            while let Some(order) = self.core.link_order(index) {
                match order {
                    LinkOrder::Connect(address) => match sys::connect_nonblocking(&address) {
                        Ok(socket) => {
                            self.links[index] = LinkSocket {
                                socket: Some(socket),
                                connecting: true,
                                interest: None,
                            }
                        }
                        Err(err) => self.core.link_connected(index, Err(err)),
                    },
                    LinkOrder::Close => {
                        // Closing the descriptor also removes it from epoll; nothing else
                        // refers to it.
                        self.links[index] = LinkSocket::default();
                        self.core.link_closed(index);
                    }
                }
            }
            let link = &mut self.links[index];
            let Some(socket) = &link.socket else {
                continue;
            };
            let interest = match link.connecting {
                true => WRITABLE,
                false => {
                    let read = match self.core.link_wants_input(index) {
                        true => READABLE,
                        false => 0,
                    };
                    match self.core.link_has_unsent(index) {
                        true => read | WRITABLE,
                        false => read,
                    }
                }
            };
            let token = DATABASE + index as u64;
            match link.interest {
                Some(current) if current == interest => {}
                None => self.epoll.add(socket, interest, token)?,
                Some(_) => self.epoll.modify(socket, interest, token)?,
            }
            link.interest = Some(interest);
            if !link.connecting {
                if let Some(bytes) = self.core.link_low_water(index) {
                    if let Err(err) = sys::set_receive_low_water(socket, bytes) {
                        self.core.link_failed(index, err);
                    }
                }
            }
        }
        Ok(())
    }
}
