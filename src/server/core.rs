//! What a worker thread does whatever moves its bytes: the table of HTTP connections and of
//! PostgreSQL connections, the timers and the sweep, and every call into the application.
//!
//! A backend (`epoll.rs`, `uring.rs`) owns the waiting and the system calls that move bytes.
//! It tells the core what arrived, sent or failed, asks it what each socket needs next
//! ([`Core::advance`], [`Core::sync_link`]), and sends what the core has to send.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::http::{BufferPool, Connection, HttpDate, Ticket, TIMEOUTS};
use crate::pg::{DbError, Event, Pool, Step};
use crate::service::{Context, Finished, Service, Serving};
use crate::sys;

use super::Timers;

/// How long a closing connection may take to send its last bytes and see the peer's EOF.
const LINGER: Duration = Duration::from_secs(2);
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How long a new worker waits for its database connections before it takes connections:
/// requests that arrive meanwhile wait in the listen backlog rather than get a 503.
const DATABASE_GRACE: Duration = Duration::from_secs(3);

/// One HTTP connection. `K` is how the backend names its socket: a descriptor (epoll) or
/// an entry of the ring's file table (io_uring); the core only keeps it.
pub(super) struct Slot<K> {
    /// `None` while the slot is free.
    pub socket: Option<K>,
    pub conn: Connection,
    /// Our side has shut down writing: the slot only waits for the peer's EOF.
    pub lingering_since: Option<Instant>,
}

/// The socket of one PostgreSQL connection of the pool (same index).
#[derive(Default)]
pub(super) struct Link {
    pub socket: Option<OwnedFd>,
    /// The connection's generation this socket was opened for.
    pub generation: u64,
    /// Bytes taken from the connection for sending, and how many of them went out. The
    /// backend sends from here, so the connection may queue more meanwhile.
    pub out: Vec<u8>,
    pub sent: usize,
    /// The kernel is sending from `out` (io_uring): it must not change until that ends.
    pub in_flight: bool,
}

impl Link {
    /// The socket's descriptor, while there is one.
    pub fn fd(&self) -> Option<RawFd> {
        self.socket.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// What a connection needs from its backend after [`Core::advance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Keep it; read from it while `read` is set, send its [`Connection::unsent`] bytes.
    Keep { read: bool },
    /// Its last response is out: shut down writing, then read until the peer's EOF. Closing
    /// at once with unread input would reset the connection and could destroy the response
    /// the peer has not read yet.
    Linger,
    /// Done with it: close it.
    Close,
}

pub(super) struct Core<S, K> {
    pub service: S,
    pub pool: Pool,
    pub links: Vec<Link>,
    pub slots: Vec<Slot<K>>,
    free: Vec<usize>,
    /// The buffers the HTTP connections borrow while they have bytes in flight.
    pub buffers: BufferPool,
    /// Slots that received responses from the database since the backend last looked.
    pub completed: Vec<usize>,
    pub date: HttpDate,
    pub now: Instant,
    /// Requests to answer at a given time.
    timers: Timers,
    next_sweep: Instant,
    /// Until the worker takes connections: the latest time to start.
    listen_by: Option<Instant>,
}

impl<S: Service, K> Core<S, K> {
    pub fn new(service: S, pool: Pool) -> Self {
        let now = Instant::now();
        Core {
            service,
            links: (0..pool.len()).map(|_| Link::default()).collect(),
            pool,
            slots: Vec::new(),
            free: Vec::new(),
            buffers: BufferPool::default(),
            completed: Vec::new(),
            date: HttpDate::new(),
            now,
            timers: Timers::default(),
            next_sweep: now + SWEEP_EVERY,
            listen_by: Some(now + DATABASE_GRACE),
        }
    }

    /// Reads the clocks; called once per wake-up.
    pub fn refresh(&mut self) {
        self.now = Instant::now();
        self.date.refresh();
    }

    /// Whether the worker should start taking connections now: once its database
    /// connections have settled (ready, or failed so that database requests get a quick
    /// 503), or the grace period is over. True from then on.
    pub fn ready_to_listen(&mut self) -> bool {
        let Some(deadline) = self.listen_by else {
            return true;
        };
        if self.pool.settled() || self.now >= deadline {
            self.listen_by = None;
        }
        self.listen_by.is_none()
    }

    /// When the backend must wake up at the latest, whatever happens on the sockets.
    pub fn next_wake(&self) -> Instant {
        [self.pool.deadline(), self.listen_by, self.timers.earliest()]
            .into_iter()
            .flatten()
            .fold(self.next_sweep, Instant::min)
    }

    /// Takes a new HTTP connection into a slot and returns the slot's index.
    pub fn open(&mut self, socket: K) -> usize {
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index].conn.reset(self.now);
                index
            }
            None => {
                self.slots.push(Slot {
                    socket: None,
                    conn: Connection::new(self.slots.len() as u32, self.now),
                    lingering_since: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.socket = Some(socket);
        slot.lingering_since = None;
        index
    }

    /// Frees a slot; its socket is returned for the backend to close when it is safe. The
    /// kernel must be done with the connection's output (io_uring: no send in flight).
    pub fn release(&mut self, index: usize) -> Option<K> {
        let slot = &mut self.slots[index];
        let socket = slot.socket.take()?;
        slot.conn.give_back_all(&mut self.buffers);
        self.free.push(index);
        Some(socket)
    }

    /// Brings an HTTP connection up to date after bytes arrived or went out: answers the
    /// requests that can be answered and decides whether to read, to linger or to close.
    /// `may_write` is false while the kernel sends from the connection's output (io_uring):
    /// then nothing is added to it.
    pub fn advance(&mut self, index: usize, may_write: bool) -> Next {
        let next = self.answer(index, may_write);
        // Whatever happened, a connection with nothing buffered holds no buffer.
        self.slots[index].conn.give_back_idle(&mut self.buffers);
        next
    }

    fn answer(&mut self, index: usize, may_write: bool) -> Next {
        let Core {
            service,
            pool,
            slots,
            buffers,
            date,
            now,
            timers,
            ..
        } = self;
        let slot = &mut slots[index];
        if slot.socket.is_none() {
            return Next::Close;
        }
        if slot.lingering_since.is_some() {
            return match slot.conn.peer_eof() {
                true => Next::Close,
                false => Next::Keep { read: true },
            };
        }
        if may_write {
            slot.conn.collect(buffers);
            let mut serving = Serving {
                service,
                cx: Context {
                    date,
                    now: *now,
                    db: pool,
                    timers,
                },
            };
            slot.conn.process(&mut serving, date, *now, buffers);
            if slot.conn.is_finished() {
                if slot.conn.peer_eof() {
                    return Next::Close;
                }
                slot.lingering_since = Some(*now);
                return Next::Linger;
            }
        }
        Next::Keep {
            read: slot.conn.wants_input(),
        }
    }

    /// `n` bytes of the connection's [`Connection::unsent`] went out: the kernel is done
    /// with them. Its output buffer goes back once all of it is sent.
    pub fn sent(&mut self, index: usize, n: usize) {
        let conn = &mut self.slots[index].conn;
        conn.mark_sent(n, self.now);
        conn.give_back_idle(&mut self.buffers);
    }

    /// Calls `expire` for every connection that idled, lingered or stalled too long, once a
    /// second; returns whether it ran.
    pub fn sweep(&mut self, mut expire: impl FnMut(&mut Self, usize)) -> bool {
        if self.now < self.next_sweep {
            return false;
        }
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
                expire(self, index);
            }
        }
        true
    }

    /// Answers the requests whose time has come, runs the database connections' timers
    /// (reconnects, deadlines), and gives back connections another thread needs more.
    pub fn on_timers(&mut self) {
        let mut timers = std::mem::take(&mut self.timers);
        let (_, mut deliver) = self.split();
        timers.run(deliver.now, |ticket, token| deliver.timer(ticket, token));
        timers.sweep_when_grown(|ticket| is_live(&self.slots, ticket));
        self.timers = timers;

        let (pool, mut deliver) = self.split();
        let now = deliver.now;
        pool.on_timer(now, &mut |token, event| deliver.event(token, event));
        pool.balance(now);
    }

    // The PostgreSQL connections' sockets.

    /// Opens or closes link `index`'s socket as its connection wants. Returns the socket of
    /// a connect just started, for the backend to watch for writability.
    pub fn sync_link(&mut self, index: usize) -> Option<RawFd> {
        let link = &mut self.links[index];
        let pg = self.pool.get_mut(index);
        let step = pg.step();
        let stale =
            link.generation != pg.generation() || matches!(step, Step::Idle | Step::Connect);
        if link.socket.is_some() && stale {
            close_link(link);
        }
        // A send still in flight on the old socket owns the link's buffer a little longer.
        if step != Step::Connect || link.in_flight {
            return None;
        }
        let target = self.pool.target()?.clone();
        let opened = target
            .address()
            .ok_or_else(|| target.unresolved())
            .and_then(|address| sys::connect_nonblocking(&address).map_err(DbError::Io));
        match opened {
            Ok(socket) => {
                let fd = socket.as_raw_fd();
                let pg = self.pool.get_mut(index);
                pg.connecting(self.now);
                let link = &mut self.links[index];
                link.generation = pg.generation();
                link.socket = Some(socket);
                Some(fd)
            }
            Err(error) => {
                target.connect_failed();
                self.link_failed(index, error);
                None
            }
        }
    }

    /// The link's connect completed (its socket became writable, or failed).
    pub fn link_connected(&mut self, index: usize) {
        let Some(socket) = &self.links[index].socket else {
            return;
        };
        match sys::take_socket_error(socket) {
            Ok(()) => self.pool.get_mut(index).connected(self.now),
            Err(err) => {
                if let Some(target) = self.pool.target() {
                    target.connect_failed();
                }
                self.link_failed(index, DbError::Io(err));
            }
        }
    }

    /// Room to receive the link's bytes into; [`Core::link_filled`] says how many came.
    pub fn link_read_buffer(&mut self, index: usize) -> &mut [u8] {
        self.pool.get_mut(index).read_buffer()
    }

    pub fn link_filled(&mut self, index: usize, n: usize) {
        let (pool, mut deliver) = self.split();
        let now = deliver.now;
        pool.get_mut(index)
            .filled(n, now, &mut |token, event| deliver.event(token, event));
    }

    /// Bytes that arrived for the link elsewhere (io_uring's provided buffers).
    pub fn link_received(&mut self, index: usize, bytes: &[u8]) {
        let (pool, mut deliver) = self.split();
        let now = deliver.now;
        pool.get_mut(index)
            .receive(bytes, now, &mut |token, event| deliver.event(token, event));
    }

    /// The link's socket failed (EOF, reset, refused): its queries fail and it reconnects.
    pub fn link_failed(&mut self, index: usize, error: DbError) {
        close_link(&mut self.links[index]);
        let (pool, mut deliver) = self.split();
        let now = deliver.now;
        pool.get_mut(index)
            .transport_failed(error, now, &mut |token, event| deliver.event(token, event));
    }

    /// The bytes the link has to send, taking what its connection queued once the previous
    /// batch is out. Empty while connecting or when there is nothing.
    pub fn link_unsent(&mut self, index: usize) -> &[u8] {
        let link = &mut self.links[index];
        if link.socket.is_none() || self.pool.get_mut(index).step() != Step::Io {
            return &[];
        }
        if link.sent == link.out.len() && !link.in_flight {
            link.out.clear();
            link.sent = 0;
            self.pool.get_mut(index).take_output(&mut link.out);
        }
        &link.out[link.sent..]
    }

    pub fn link_sent(&mut self, index: usize, n: usize) {
        let link = &mut self.links[index];
        link.sent = (link.sent + n).min(link.out.len());
    }

    /// The pool apart from what its events are delivered to: the app, and the HTTP
    /// connections that the app's finished responses go to.
    fn split(&mut self) -> (&mut Pool, Deliverer<'_, S, K>) {
        let deliverer = Deliverer {
            service: &mut self.service,
            slots: &mut self.slots,
            completed: &mut self.completed,
            buffers: &mut self.buffers,
            date: &self.date,
            now: self.now,
        };
        (&mut self.pool, deliverer)
    }
}

/// Closes a link's socket. Shutting it down first ends any operation the kernel still has
/// on it (io_uring), whose completion then finds a newer generation and is ignored.
fn close_link(link: &mut Link) {
    if let Some(socket) = link.socket.take() {
        sys::shutdown_both(&socket);
    }
    if !link.in_flight {
        link.out.clear();
        link.sent = 0;
    }
}

/// Hands database events to the app, and the responses they finish to their connections.
struct Deliverer<'a, S, K> {
    service: &'a mut S,
    slots: &'a mut [Slot<K>],
    completed: &'a mut Vec<usize>,
    buffers: &'a mut BufferPool,
    date: &'a HttpDate,
    now: Instant,
}

impl<S: Service, K> Deliverer<'_, S, K> {
    fn event(&mut self, token: u64, event: Event<'_>) {
        self.finish(|service| service.on_database_event(token, event));
    }

    fn timer(&mut self, ticket: Ticket, token: u64) {
        if is_live(self.slots, &ticket) {
            self.finish(|service| service.on_timer(ticket, token));
        }
    }

    /// Writes the response `answer` finishes, if any, into its connection's line, and notes
    /// the connection for the backend to send it.
    fn finish(&mut self, answer: impl for<'s> FnOnce(&'s mut S) -> Option<Finished<'s>>) {
        let Some(finished) = answer(self.service) else {
            return;
        };
        let index = finished.ticket.slot as usize;
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.socket.is_none() {
            return;
        }
        slot.conn.complete(
            finished.ticket,
            self.date,
            finished.status,
            finished.content_type,
            finished.body,
            self.now,
            self.buffers,
        );
        self.completed.push(index);
    }
}

/// Whether the connection `ticket` was given to is still open.
fn is_live<K>(slots: &[Slot<K>], ticket: &Ticket) -> bool {
    slots
        .get(ticket.slot as usize)
        .is_some_and(|slot| slot.socket.is_some() && slot.conn.generation() == ticket.generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection ever open at once keeps its slot: it must stay far below the buffers
    /// an idle connection no longer holds.
    #[test]
    fn a_slot_stays_small() {
        assert!(
            std::mem::size_of::<Slot<OwnedFd>>() <= 192,
            "{}",
            std::mem::size_of::<Slot<OwnedFd>>()
        );
    }
}
