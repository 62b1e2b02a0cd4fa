//! One worker thread's PostgreSQL connections, and which of them a request's queries go to.
//!
//! The first connection is always wanted; the others open only when it is busy, and a thread
//! gives them back when another thread has none (the server's connection slots are shared
//! by all threads and may be scarce).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::conn::{Options, PgConn, Sink, Statement};
use super::link::Link;
use super::target::Target;

/// Queries a connection holds before new requests go to the next one (see [`Pool::pick`]).
pub const SPILL_DEPTH: usize = 1024;

#[derive(Default)]
pub struct Pool {
    /// Each connection with the socket it wants.
    links: Vec<Link>,
    /// Shared by the pools of all threads.
    threads: Arc<Threads>,
    /// This pool is counted in `threads.starving`.
    starving: bool,
}

/// What the pools of all threads tell each other.
#[derive(Default)]
pub struct Threads {
    /// Pools with no ready connection that keep failing to get one.
    starving: AtomicUsize,
}

impl Pool {
    /// Up to `size` connections; the first starts connecting at once, the others when
    /// needed. `threads` is shared by the pools of all threads.
    pub fn new(
        target: &Arc<Target>,
        statements: &'static [Statement],
        options: &Options,
        size: usize,
        threads: &Arc<Threads>,
        now: Instant,
    ) -> Pool {
        let links = (0..size)
            .map(|index| {
                let mut conn = PgConn::new(target.clone(), statements, *options, now);
                if index > 0 {
                    conn.park(&mut |_, _| {});
                }
                Link::new(conn)
            })
            .collect();
        Pool {
            links,
            threads: threads.clone(),
            starving: false,
        }
    }

    /// For a server without a database.
    pub fn empty() -> Pool {
        Pool::default()
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn link(&self, index: usize) -> &Link {
        &self.links[index]
    }

    pub fn link_mut(&mut self, index: usize) -> &mut Link {
        &mut self.links[index]
    }

    fn conns(&self) -> impl Iterator<Item = &PgConn> {
        self.links.iter().map(Link::conn)
    }

    fn conns_mut(&mut self) -> impl Iterator<Item = &mut PgConn> {
        self.links.iter_mut().map(Link::conn_mut)
    }

    /// The connection a new request's queries go to: the first ready one holding fewer than
    /// [`SPILL_DEPTH`] queries, else the least busy ready one. One deep pipeline keeps a
    /// backend busiest for the least overhead; the others take what it cannot keep up with.
    /// `None` while none is ready: the request is answered 503, and the connections that are
    /// down are told they are wanted, so that they try again soon.
    pub fn pick(&mut self, now: Instant) -> Option<&mut PgConn> {
        let conn = |index: usize| self.links[index].conn();
        let ready = || (0..self.links.len()).filter(|&i| conn(i).is_ready());
        let chosen = ready()
            .find(|&i| conn(i).queued() < SPILL_DEPTH)
            .or_else(|| ready().min_by_key(|&i| conn(i).queued()));
        match chosen {
            Some(index) => {
                if conn(index).queued() >= SPILL_DEPTH {
                    self.open_spare(now);
                }
                Some(self.links[index].conn_mut())
            }
            None => {
                for conn in self.conns_mut() {
                    conn.wanted();
                }
                None
            }
        }
    }

    /// Opens a parked connection for the overflow, unless another thread has none.
    fn open_spare(&mut self, now: Instant) {
        if self.threads.starving.load(Ordering::Relaxed) > 0 {
            return;
        }
        if let Some(spare) = self.conns_mut().find(|conn| conn.is_parked()) {
            spare.unpark(now);
        }
    }

    /// Keeps the count of starving threads true, and while another thread starves, gives
    /// back the connections this one can do without: every ready one but the busiest that
    /// holds no query, and every one still trying.
    pub fn balance(&mut self) {
        let has_ready = self.conns().any(PgConn::is_ready);
        let starving = !has_ready
            && self
                .conns()
                .any(|conn| !conn.is_parked() && conn.last_error().is_some());
        if starving != self.starving {
            self.starving = starving;
            match starving {
                true => self.threads.starving.fetch_add(1, Ordering::Relaxed),
                false => self.threads.starving.fetch_sub(1, Ordering::Relaxed),
            };
        }
        if starving || !has_ready || self.threads.starving.load(Ordering::Relaxed) == 0 {
            return;
        }
        let keep = (0..self.links.len())
            .filter(|&i| self.links[i].conn().is_ready())
            .max_by_key(|&i| self.links[i].conn().queued());
        for (index, conn) in self.conns_mut().enumerate() {
            let idle = !conn.is_ready() || conn.queued() == 0;
            if Some(index) != keep && !conn.is_parked() && idle {
                conn.park(&mut |_, _| {});
            }
        }
    }

    /// Every connection has either become ready or failed to (or waits parked): what the
    /// database is like right now is known.
    pub fn settled(&self) -> bool {
        self.conns()
            .all(|conn| conn.is_ready() || conn.is_parked() || conn.last_error().is_some())
    }

    /// When [`Pool::on_timer`] must run next.
    pub fn deadline(&self) -> Option<Instant> {
        self.conns().filter_map(PgConn::deadline).min()
    }

    pub fn on_timer(&mut self, now: Instant, sink: &mut impl Sink) {
        for conn in self.conns_mut() {
            if conn.deadline().is_some_and(|deadline| deadline <= now) {
                conn.on_timer(now, sink);
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if self.starving {
            self.threads.starving.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
