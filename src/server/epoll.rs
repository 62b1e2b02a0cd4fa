//! The epoll server: one thread per core, each with its own listener, epoll instance, HTTP
//! connections and PostgreSQL connections. Nothing is shared between threads.
//!
//! An iteration: wait for events; read and answer HTTP requests (database requests queue
//! their queries); read PostgreSQL answers and hand finished responses to their HTTP
//! connections; then send every queued query with one write per PostgreSQL connection.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::connection::{Connection, TIMEOUTS};
use crate::app::App;
use crate::http::HttpDate;
use crate::sys::{self, Epoll, READABLE, WRITABLE};

const LISTENER: u64 = u64::MAX;
/// Tokens from here up name PostgreSQL connections; below, HTTP connection slots.
const DATABASE: u64 = 1 << 32;
/// Bytes of free space a read asks for.
const READ_CHUNK: usize = 4096;
/// How long a closing connection may take to send its last bytes and see the peer's EOF.
pub(super) const LINGER: Duration = Duration::from_secs(2);
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How long a new worker waits for its database connections before it takes connections:
/// requests that arrive meanwhile wait in the listen backlog rather than get a 503.
const DATABASE_GRACE: Duration = Duration::from_secs(3);

struct Slot {
    /// `None` while the slot is free.
    socket: Option<OwnedFd>,
    conn: Connection,
    /// The events currently registered with epoll.
    interest: u32,
    /// Set once our side has shut down writing: the slot only waits for the peer's EOF.
    lingering_since: Option<Instant>,
}

/// What epoll watches of one PostgreSQL connection: its socket's generation and the events.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Registered {
    generation: u64,
    interest: u32,
}

pub struct Worker {
    epoll: Epoll,
    listener: OwnedFd,
    accepting: bool,
    slots: Vec<Slot>,
    free: Vec<usize>,
    app: App,
    /// Per PostgreSQL connection of the app.
    registered: Vec<Option<Registered>>,
    /// Slots that received responses from the database and need a flush.
    completed: Vec<usize>,
    date: HttpDate,
    now: Instant,
    next_sweep: Instant,
    /// Until the listener is added to epoll: the latest time to add it.
    listen_by: Option<Instant>,
}

impl Worker {
    pub fn new(listener: OwnedFd, mut app: App) -> io::Result<Self> {
        let epoll = Epoll::new()?;
        let now = Instant::now();
        Ok(Worker {
            epoll,
            listener,
            accepting: true,
            slots: Vec::new(),
            free: Vec::new(),
            registered: vec![None; app.database().map_or(0, |db| db.connections().len())],
            app,
            completed: Vec::new(),
            date: HttpDate::new(),
            now,
            next_sweep: now + SWEEP_EVERY,
            listen_by: Some(now + DATABASE_GRACE),
        })
    }

    /// Starts taking connections once the database connections have settled (ready, or
    /// failed so that database requests get a quick 503), or the grace period is over.
    fn listen_when_settled(&mut self) -> io::Result<()> {
        let Some(deadline) = self.listen_by else {
            return Ok(());
        };
        let settled = self.app.database().is_none_or(|db| db.settled());
        if settled || self.now >= deadline {
            self.epoll
                .add(self.listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
            self.listen_by = None;
        }
        Ok(())
    }

    pub fn run(mut self) -> io::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            self.listen_when_settled()?;
            self.register_database()?;
            let wake_at = [
                self.app.database().and_then(|db| db.next_timer()),
                self.listen_by,
            ]
            .into_iter()
            .flatten()
            .fold(self.next_sweep, Instant::min);
            let timeout = wake_at.saturating_duration_since(self.now);
            let ready = self
                .epoll
                .wait(&mut events, timeout.as_millis() as i32 + 1)?;
            self.now = Instant::now();
            self.date.refresh();
            for event in &events[..ready] {
                // epoll_event is packed: copy the fields out before matching on them.
                let (token, flags) = (event.u64, event.events);
                match token {
                    LISTENER => self.accept_all(),
                    token if token >= DATABASE => {
                        self.on_database_event((token - DATABASE) as usize, flags)
                    }
                    token => self.on_event(token as usize, flags),
                }
            }
            if let Some(db) = self.app.database() {
                db.on_timer(self.now);
            }
            self.flush_database();
            if self.now >= self.next_sweep {
                self.sweep();
            }
        }
    }

    fn on_database_event(&mut self, connection: usize, events: u32) {
        let Some(db) = self.app.database() else {
            return;
        };
        if events & WRITABLE != 0 {
            db.on_writable(connection);
        }
        if events & (READABLE | libc::EPOLLHUP as u32 | libc::EPOLLERR as u32) != 0 {
            db.on_readable(connection);
        }
        self.deliver_responses();
    }

    /// Sends the queries queued in this iteration. Sending can fail requests, and answering
    /// them can let held-back requests queue more queries, so repeat until nothing changes.
    fn flush_database(&mut self) {
        loop {
            let Some(db) = self.app.database() else {
                return;
            };
            db.flush();
            if !self.deliver_responses() {
                return;
            }
        }
    }

    /// Hands the database's finished responses to their HTTP connections and sends them;
    /// returns whether there were any.
    fn deliver_responses(&mut self) -> bool {
        let Worker {
            app,
            slots,
            completed,
            date,
            ..
        } = self;
        let Some(db) = app.database() else {
            return false;
        };
        db.take_finished(|ticket, status, content_type, body| {
            let slot = &mut slots[ticket.slot as usize];
            if slot.socket.is_some() {
                slot.conn.complete(ticket, date, status, content_type, body);
                completed.push(ticket.slot as usize);
            }
        });
        if completed.is_empty() {
            return false;
        }
        let mut completed = std::mem::take(&mut self.completed);
        for &index in &completed {
            self.flush(index);
        }
        completed.clear();
        self.completed = completed;
        true
    }

    /// Keeps epoll watching each PostgreSQL connection's current socket for what it waits on.
    fn register_database(&mut self) -> io::Result<()> {
        let Some(db) = self.app.database() else {
            return Ok(());
        };
        for (index, pg) in db.connections().iter().enumerate() {
            let wanted = pg.socket().map(|(fd, generation)| {
                let interest = match pg.wants_write() {
                    true => READABLE | WRITABLE,
                    false => READABLE,
                };
                (
                    fd,
                    Registered {
                        generation,
                        interest,
                    },
                )
            });
            let registered = &mut self.registered[index];
            let (fd, wanted) = match (wanted, *registered) {
                (None, _) => {
                    *registered = None;
                    continue;
                }
                (Some((_, wanted)), Some(current)) if wanted == current => continue,
                (Some(wanted), _) => wanted,
            };
            let token = DATABASE + index as u64;
            // A new socket is added; the old one left epoll when it was closed.
            match *registered {
                Some(current) if current.generation == wanted.generation => {
                    self.epoll.modify(fd, wanted.interest, token)?
                }
                _ => self.epoll.add(fd, wanted.interest, token)?,
            }
            *registered = Some(wanted);
        }
        Ok(())
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
                    conn: Connection::new(self.slots.len() as u32, self.now),
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
                slot.conn.process(&mut self.app, &self.date, self.now);
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
                slot.conn.process(&mut self.app, &self.date, self.now);
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
