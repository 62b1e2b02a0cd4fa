//! What a worker's connections share, whatever carries them: the application, the
//! thread's PostgreSQL, Redis and upstream connections, the buffers, the budget, the clocks and the timers.
//!
//! [`Slots`](super::slots::Slots), the table of stream (TCP) connections, sits beside it in
//! [`Core`](super::Core); a datagram endpoint (QUIC: one UDP socket, its connections by
//! connection ID, each with a deadline in [`Timers`]) is the other table it is shaped for.
//! Either borrows the worker's parts while one of its connections is served.

use std::sync::Arc;
use std::time::Instant;

use super::{Limits, DATABASE_GRACE, SWEEP_EVERY};
use crate::http::{AltSvc, BufferPool, HttpDate};
use crate::pg::Pool;
use crate::redis::Redis;
use crate::service::Service;
use crate::timers::{Timers, Wakeup};
use crate::transport::TlsConfig;
use crate::upstream::Proxy;

pub(super) struct Worker<S> {
    pub service: S,
    /// The thread's PostgreSQL connections, each with the socket it wants (its link).
    pub pool: Pool,
    /// The thread's Redis connections, when the app has a Redis server (never at the edge).
    pub redis: Option<Redis>,
    /// In edge mode, the thread's upstream connections, each with the socket it wants.
    pub upstream: Option<Proxy>,
    /// The buffers the connections borrow while they have bytes in flight.
    pub buffers: BufferPool,
    pub budget: Budget,
    /// Requests to answer at a given time.
    pub timers: Timers<Wakeup>,
    pub date: HttpDate,
    pub now: Instant,
    pub limits: Limits,
    /// The TLS listener's configuration, when there is one.
    pub tls: Option<Arc<TlsConfig>>,
    /// Where HTTP/3 is served, when it is: what answers over TLS say (`Alt-Svc`).
    pub alt_svc: Option<AltSvc>,
    /// When the 1 s sweep of the connections' deadlines runs next (`core/sweep.rs`).
    pub next_sweep: Instant,
    /// Until the worker takes connections: the latest time to start.
    listen_by: Option<Instant>,
    /// Once the worker drains: when it ends, whatever is left (`core/drain.rs`).
    pub drain_by: Option<Instant>,
}

impl<S: Service> Worker<S> {
    pub fn new(service: S, pool: Pool, limits: Limits) -> Self {
        let now = Instant::now();
        let upstream = limits.upstream.clone().map(Proxy::new);
        Worker {
            service,
            pool,
            redis: None,
            upstream,
            buffers: BufferPool::default(),
            budget: Budget::new(limits.max_buffered),
            timers: Timers::default(),
            date: HttpDate::new(),
            alt_svc: None,
            now,
            limits,
            tls: None,
            next_sweep: now + SWEEP_EVERY,
            listen_by: Some(now + DATABASE_GRACE),
            drain_by: None,
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

    /// When the worker must wake up at the latest, whatever happens on the sockets.
    pub fn next_wake(&self) -> Instant {
        let deadlines = [
            self.pool.deadline(),
            self.redis.as_ref().and_then(Redis::deadline),
            self.upstream.as_ref().and_then(Proxy::deadline),
            self.listen_by,
            self.timers.earliest(),
            self.drain_by,
        ];
        deadlines
            .into_iter()
            .flatten()
            .fold(self.next_sweep, Instant::min)
    }
}

/// The buffer memory a worker's connections hold, against its limit
/// ([`Limits::max_buffered`]): each connection's part is counted where it is kept, the sum
/// here.
pub(super) struct Budget {
    max: usize,
    held: usize,
    /// The QUIC endpoint's part (its connections are counted there, `Endpoint::held`).
    quic: u32,
}

impl Budget {
    fn new(max: usize) -> Self {
        Budget {
            max,
            held: 0,
            quic: 0,
        }
    }

    /// The buffer memory all connections hold.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held
    }

    /// What each of `open` connections may hold once the worker has spent its budget: an
    /// equal share of it. Unbounded (the connection's own high-water mark) until then.
    pub fn share(&self, open: usize) -> usize {
        match self.held > self.max {
            true => self.max / open.max(1),
            false => usize::MAX,
        }
    }

    /// A connection that was counted for `counted` bytes now holds `holds`: the count
    /// (u32, so that a slot stays small; a connection's buffers are bounded far below
    /// 4 GiB) and the sum follow.
    pub fn recount(&mut self, counted: &mut u32, holds: usize) {
        let holds = u32::try_from(holds).unwrap_or(u32::MAX);
        self.held = self.held - *counted as usize + holds as usize;
        *counted = holds;
    }

    /// The QUIC endpoint's connections now hold `holds`.
    pub fn recount_quic(&mut self, holds: usize) {
        let mut counted = self.quic;
        self.recount(&mut counted, holds);
        self.quic = counted;
    }
}
