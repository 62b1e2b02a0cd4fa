//! One worker thread's PostgreSQL connections, and which of them a request's queries go to.

use std::sync::Arc;
use std::time::Instant;

use super::conn::{Event, Options, PgConn, Statement};
use super::target::Target;

/// Queries a connection holds before new requests go to the next one (see [`Pool::pick`]).
pub const SPILL_DEPTH: usize = 1024;

pub struct Pool {
    /// Where the connections' sockets connect to; `None` for a server without a database.
    target: Option<Arc<Target>>,
    conns: Vec<PgConn>,
}

impl Pool {
    /// `size` connections that start connecting at once.
    pub fn new(
        target: &Arc<Target>,
        statements: &'static [Statement],
        options: &Options,
        size: usize,
        now: Instant,
    ) -> Pool {
        Pool {
            target: Some(target.clone()),
            conns: (0..size)
                .map(|_| PgConn::new(target.clone(), statements, options.clone(), now))
                .collect(),
        }
    }

    /// For a server without a database.
    pub fn empty() -> Pool {
        Pool {
            target: None,
            conns: Vec::new(),
        }
    }

    pub fn target(&self) -> Option<&Arc<Target>> {
        self.target.as_ref()
    }

    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    pub fn get_mut(&mut self, index: usize) -> &mut PgConn {
        &mut self.conns[index]
    }

    pub fn iter(&self) -> impl Iterator<Item = &PgConn> {
        self.conns.iter()
    }

    /// The connection a new request's queries go to: the first ready one holding fewer than
    /// [`SPILL_DEPTH`] queries, else the least busy ready one. One deep pipeline keeps a
    /// backend busiest for the least overhead; the others take what it cannot keep up with.
    /// `None` while none is ready: the request is answered 503, and the connections that are
    /// down are told they are wanted, so that they try again soon.
    pub fn pick(&mut self, now: Instant) -> Option<&mut PgConn> {
        let ready = || (0..self.conns.len()).filter(|&i| self.conns[i].is_ready());
        let chosen = ready()
            .find(|&i| self.conns[i].queued() < SPILL_DEPTH)
            .or_else(|| ready().min_by_key(|&i| self.conns[i].queued()));
        match chosen {
            Some(index) => Some(&mut self.conns[index]),
            None => {
                for conn in &mut self.conns {
                    conn.wanted(now);
                }
                None
            }
        }
    }

    /// Every connection has either become ready or failed to: what the database is like
    /// right now is known.
    pub fn settled(&self) -> bool {
        self.conns
            .iter()
            .all(|conn| conn.is_ready() || conn.last_error().is_some())
    }

    /// When [`Pool::on_timer`] must run next.
    pub fn deadline(&self) -> Option<Instant> {
        self.conns.iter().filter_map(PgConn::deadline).min()
    }

    pub fn on_timer(&mut self, now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        for conn in &mut self.conns {
            if conn.deadline().is_some_and(|deadline| deadline <= now) {
                conn.on_timer(now, sink);
            }
        }
    }
}
