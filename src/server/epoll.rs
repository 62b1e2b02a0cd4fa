//! The epoll backend: readiness events, then `read` and `send` on the sockets that are
//! ready. Everything else is the worker core's.
//!
//! An iteration: wait for events; read and answer HTTP requests (database requests queue
//! their queries); read PostgreSQL answers, whose finished responses go to their HTTP
//! connections; then send every queued query with one write per PostgreSQL connection.

use std::io;
use std::os::fd::OwnedFd;

use super::core::{Core, Next};
use crate::pg::{DbError, Pool, Step};
use crate::service::Service;
use crate::sys::{self, Epoll, Events, ACCEPTABLE, HANGUP, READABLE, WRITABLE};

const LISTENER: u64 = u64::MAX;
/// Tokens from here up name PostgreSQL connections; below, HTTP connection slots.
const DATABASE: u64 = 1 << 32;
/// Bytes of free space a read asks for.
const READ_CHUNK: usize = 4096;

pub struct Worker<S> {
    core: Core<S, OwnedFd>,
    epoll: Epoll,
    listener: OwnedFd,
    listening: bool,
    /// Out of descriptors: no accepting until the next sweep.
    accept_paused: bool,
    /// The events registered for each HTTP slot.
    interest: Vec<u32>,
    /// The events registered for each PostgreSQL link's socket (0: not registered).
    link_interest: Vec<u32>,
}

impl<S: Service> Worker<S> {
    pub fn new(listener: OwnedFd, service: S, pool: Pool) -> io::Result<Self> {
        let links = pool.len();
        Ok(Worker {
            core: Core::new(service, pool),
            epoll: Epoll::new()?,
            listener,
            listening: false,
            accept_paused: false,
            interest: Vec::new(),
            link_interest: vec![0; links],
        })
    }

    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            if !self.listening && self.core.ready_to_listen() {
                self.epoll.add(&self.listener, ACCEPTABLE, LISTENER)?;
                self.listening = true;
            }
            self.sync_links()?;
            let timeout = self
                .core
                .next_wake()
                .saturating_duration_since(self.core.now);
            self.epoll
                .wait(&mut events, timeout.as_millis() as i32 + 1)?;
            self.core.refresh();
            for (token, flags) in events.iter() {
                match token {
                    LISTENER => self.accept_all(),
                    token if token >= DATABASE => {
                        self.on_link_event((token - DATABASE) as usize, flags)
                    }
                    token => self.on_event(token as usize, flags),
                }
            }
            self.core.on_timers();
            self.flush_links();
            self.deliver_completed();
            let mut expired = Vec::new();
            if self.core.sweep(|_, index| expired.push(index)) {
                for index in expired {
                    self.close(index);
                }
                self.resume_accepting();
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match sys::accept(&self.listener) {
                Ok(Some(socket)) => self.open(socket),
                Ok(None) => return,
                Err(err) if sys::is_out_of_descriptors(&err) => {
                    // Level-triggered epoll would wake us for the same backlog at once:
                    // stop listening until the next sweep, when some may have closed.
                    crate::log!("cannot accept: {err}; pausing accepts for a second");
                    self.accept_paused = true;
                    let _ = self.epoll.modify(&self.listener, 0, LISTENER);
                    return;
                }
                // The peer gave up before we took it (ECONNABORTED) and the like.
                Err(_) => continue,
            }
        }
    }

    fn resume_accepting(&mut self) {
        if self.accept_paused
            && self
                .epoll
                .modify(&self.listener, ACCEPTABLE, LISTENER)
                .is_ok()
        {
            self.accept_paused = false;
        }
    }

    fn open(&mut self, socket: OwnedFd) {
        let index = self.core.open(socket);
        if index >= self.interest.len() {
            self.interest.resize(index + 1, 0);
        }
        let socket = self.core.slots[index].socket.as_ref();
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
        let Core { slots, buffers, .. } = &mut self.core;
        let Some(slot) = slots.get_mut(index) else {
            return;
        };
        let Some(socket) = &slot.socket else {
            return;
        };
        if events & HANGUP != 0 {
            // Reset, or closed both ways: nothing can be sent any more, and epoll would
            // report this again and again whatever the interest.
            return self.close(index);
        }
        if events & READABLE != 0 {
            let lingering = slot.lingering_since.is_some();
            if lingering || slot.conn.wants_input() {
                let input = slot.conn.input(buffers);
                let read = sys::read_into(socket, input, READ_CHUNK);
                if lingering {
                    // Only the peer's EOF is awaited; anything it still sends is dropped.
                    input.clear();
                }
                match read {
                    Ok(0) => slot.conn.peer_closed(),
                    Ok(_) => {}
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return self.close(index),
                }
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
                    if let Some(socket) = &self.core.slots[index].socket {
                        sys::shutdown_write(socket);
                    }
                    true
                }
                Next::Keep { read } => read,
            };
            let slot = &mut self.core.slots[index];
            let Some(socket) = &slot.socket else {
                return;
            };
            let unsent = slot.conn.unsent();
            if unsent.is_empty() {
                break read;
            }
            match sys::send(socket, unsent) {
                Ok(n) => self.core.sent(index, n),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break read,
                Err(_) => return self.close(index),
            }
            // All sent: requests held back while the output was full can be answered now,
            // and a finished connection can close.
            let conn = &self.core.slots[index].conn;
            if !conn.unsent().is_empty() || !(conn.has_backlog() || conn.is_finished()) {
                break read;
            }
        };
        let slot = &self.core.slots[index];
        let Some(socket) = &slot.socket else {
            return;
        };
        let mut interest = 0;
        if read {
            interest |= READABLE;
        }
        if !slot.conn.unsent().is_empty() {
            interest |= WRITABLE;
        }
        if interest != self.interest[index] {
            self.interest[index] = interest;
            if self.epoll.modify(socket, interest, index as u64).is_err() {
                self.close(index);
            }
        }
    }

    /// Sends the responses the database finished in this iteration.
    fn deliver_completed(&mut self) {
        while !self.core.completed.is_empty() {
            let completed = std::mem::take(&mut self.core.completed);
            for &index in &completed {
                self.flush(index);
            }
            // Answering them can let held-back requests queue more queries.
            self.flush_links();
            let mut completed = completed;
            completed.clear();
            if self.core.completed.is_empty() {
                self.core.completed = completed;
            }
        }
    }

    fn on_link_event(&mut self, index: usize, events: u32) {
        if index >= self.core.links.len() {
            return;
        }
        if self.core.pool.get_mut(index).step() == Step::Connecting {
            if events & (WRITABLE | HANGUP) != 0 {
                self.core.link_connected(index);
            }
            return;
        }
        if events & (READABLE | HANGUP) != 0 {
            self.read_link(index);
        }
        if events & WRITABLE != 0 {
            self.send_link(index);
        }
    }

    /// Reads until the socket is empty, handing every answer to the core as it comes.
    fn read_link(&mut self, index: usize) {
        loop {
            let Some((socket, room)) = self.core.link_read_buffer(index) else {
                return;
            };
            let wanted = room.len();
            match sys::receive(socket, room) {
                Ok(0) => {
                    return self.core.link_failed(
                        index,
                        DbError::Protocol("the server closed the connection".into()),
                    )
                }
                Ok(n) => {
                    self.core.link_filled(index, n);
                    // A short read emptied the socket: skip the read that would say EAGAIN.
                    if n < wanted {
                        return;
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) => return self.core.link_failed(index, DbError::Io(err)),
            }
        }
    }

    /// Sends what the link has queued, one `send` per call.
    fn send_link(&mut self, index: usize) {
        if self.core.link_unsent(index).is_empty() {
            return;
        }
        let link = &self.core.links[index];
        let Some(socket) = &link.socket else {
            return;
        };
        match sys::send(socket, &link.out[link.sent..]) {
            Ok(n) => self.core.link_sent(index, n),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => self.core.link_failed(index, DbError::Io(err)),
        }
    }

    fn flush_links(&mut self) {
        for index in 0..self.core.links.len() {
            self.send_link(index);
        }
    }

    /// Opens and closes the links' sockets as their connections want, and keeps epoll
    /// watching each for what it waits on.
    fn sync_links(&mut self) -> io::Result<()> {
        for index in 0..self.core.links.len() {
            if self.core.sync_link(index).is_some() {
                // A new socket: the old one (if any) left epoll when it was closed.
                self.link_interest[index] = 0;
            }
            let link = &self.core.links[index];
            let Some(socket) = &link.socket else {
                self.link_interest[index] = 0;
                continue;
            };
            let interest = match self.core.pool.get_mut(index).step() {
                Step::Connecting => WRITABLE,
                _ if link.sent < link.out.len() => READABLE | WRITABLE,
                _ => READABLE,
            };
            let token = DATABASE + index as u64;
            match self.link_interest[index] {
                current if current == interest => {}
                0 => self.epoll.add(socket, interest, token)?,
                _ => self.epoll.modify(socket, interest, token)?,
            }
            self.link_interest[index] = interest;
        }
        Ok(())
    }
}
