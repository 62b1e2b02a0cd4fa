//! The epoll server: one thread per core, each with its own listener, epoll instance and
//! connections. Nothing is shared between threads.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::connection::{Connection, Handler, TIMEOUTS};
use super::sys::{self, Epoll, READABLE, WRITABLE};
use crate::http::HttpDate;

const LISTENER: u64 = u64::MAX;
/// Bytes of free space a read asks for.
const READ_CHUNK: usize = 4096;
/// How long a closing connection may take to send its last bytes and see the peer's EOF.
pub(super) const LINGER: Duration = Duration::from_secs(2);
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct Slot {
    /// `None` while the slot is free.
    socket: Option<OwnedFd>,
    conn: Connection,
    /// The events currently registered with epoll.
    interest: u32,
    /// Set once our side has shut down writing: the slot only waits for the peer's EOF.
    lingering_since: Option<Instant>,
}

pub struct Worker<H: Handler> {
    epoll: Epoll,
    listener: OwnedFd,
    accepting: bool,
    slots: Vec<Slot>,
    free: Vec<usize>,
    handler: H,
    date: HttpDate,
    now: Instant,
    next_sweep: Instant,
}

impl<H: Handler> Worker<H> {
    pub fn new(listener: OwnedFd, handler: H) -> io::Result<Self> {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
        let now = Instant::now();
        Ok(Worker {
            epoll,
            listener,
            accepting: true,
            slots: Vec::new(),
            free: Vec::new(),
            handler,
            date: HttpDate::new(),
            now,
            next_sweep: now + SWEEP_EVERY,
        })
    }

    pub fn run(mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            let timeout = self.next_sweep.saturating_duration_since(self.now);
            let ready = self
                .epoll
                .wait(&mut events, timeout.as_millis() as i32 + 1)?;
            self.now = Instant::now();
            self.date.refresh();
            for event in &events[..ready] {
                match event.u64 {
                    LISTENER => self.accept_all(),
                    token => self.on_event(token as usize, event.events),
                }
            }
            if self.now >= self.next_sweep {
                self.sweep();
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match sys::accept(&self.listener) {
                Ok(Some(socket)) => self.open(socket),
                Ok(None) => return,
                Err(err) if is_out_of_descriptors(&err) => {
                    // Level-triggered epoll would wake us for the same backlog at once:
                    // stop listening until the next sweep, when some may have closed.
                    eprintln!("gnosis: cannot accept: {err}; pausing accepts for a second");
                    self.accepting = false;
                    let _ = self.epoll.modify(self.listener.as_raw_fd(), 0, LISTENER);
                    return;
                }
                // The peer gave up before we took it (ECONNABORTED) and the like.
                Err(_) => continue,
            }
        }
    }

    fn open(&mut self, socket: OwnedFd) {
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index].conn.reset(self.now);
                index
            }
            None => {
                self.slots.push(Slot {
                    socket: None,
                    conn: Connection::new(self.now),
                    interest: 0,
                    lingering_since: None,
                });
                self.slots.len() - 1
            }
        };
        if self
            .epoll
            .add(socket.as_raw_fd(), READABLE, index as u64)
            .is_err()
        {
            self.free.push(index);
            return;
        }
        let slot = &mut self.slots[index];
        slot.socket = Some(socket);
        slot.interest = READABLE;
        slot.lingering_since = None;
    }

    fn close(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        // Closing the descriptor also removes it from epoll.
        if slot.socket.take().is_some() {
            self.free.push(index);
        }
    }

    fn on_event(&mut self, index: usize, events: u32) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        let Some(socket) = &slot.socket else {
            return;
        };
        if events & (READABLE | libc::EPOLLHUP as u32 | libc::EPOLLERR as u32) != 0 {
            if slot.lingering_since.is_some() {
                // Only the peer's EOF is awaited; anything it still sends is dropped.
                let input = slot.conn.input();
                let result = sys::read_into(socket, input, READ_CHUNK);
                input.clear();
                match result {
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Ok(n) if n > 0 => {}
                    _ => self.close(index),
                }
                return;
            }
            if slot.conn.wants_input() {
                match sys::read_into(socket, slot.conn.input(), READ_CHUNK) {
                    Ok(0) => slot.conn.peer_closed(),
                    Ok(_) => {}
                    Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return self.close(index),
                }
                slot.conn.process(&mut self.handler, &self.date, self.now);
            }
        }
        self.flush(index);
    }

    /// Sends what is buffered, reads on when the output has drained, and keeps the epoll
    /// registration in line with what the connection waits for.
    fn flush(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        let Some(socket) = &slot.socket else {
            return;
        };
        loop {
            let unsent = slot.conn.unsent();
            if unsent.is_empty() {
                break;
            }
            match sys::send(socket, unsent) {
                Ok(n) => slot.conn.mark_sent(n),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return self.close(index),
            }
            // Requests held back while the output was full can be answered now.
            if slot.conn.unsent().is_empty() && slot.conn.has_backlog() {
                slot.conn.process(&mut self.handler, &self.date, self.now);
            }
        }
        if slot.conn.is_finished() && slot.lingering_since.is_none() {
            // Shut down writing and wait for the peer's EOF rather than closing at once:
            // closing with unread input would reset the connection and could destroy the
            // response the peer has not read yet.
            sys::shutdown_write(socket);
            slot.lingering_since = Some(self.now);
        }
        let mut interest = 0;
        if slot.conn.wants_input() || slot.lingering_since.is_some() {
            interest |= READABLE;
        }
        if !slot.conn.unsent().is_empty() {
            interest |= WRITABLE;
        }
        if interest != slot.interest {
            slot.interest = interest;
            if self
                .epoll
                .modify(socket.as_raw_fd(), interest, index as u64)
                .is_err()
            {
                self.close(index);
            }
        }
    }

    /// Closes connections that idled or lingered too long, and resumes accepting.
    fn sweep(&mut self) {
        self.next_sweep = self.now + SWEEP_EVERY;
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.socket.is_none() {
                continue;
            }
            let expired = match slot.lingering_since {
                Some(since) => self.now.duration_since(since) > LINGER,
                None => slot.conn.timed_out(self.now, &TIMEOUTS),
            };
            if expired {
                self.close(index);
            }
        }
        if !self.accepting
            && self
                .epoll
                .modify(self.listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)
                .is_ok()
        {
            self.accepting = true;
        }
    }
}

pub(super) fn is_out_of_descriptors(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
