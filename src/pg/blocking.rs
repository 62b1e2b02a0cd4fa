//! Driving a `PgConn` with plain system calls: `Driver` moves its link's (`link::Link`) bytes
//! over a descriptor with readiness from poll(2) (`poll_once`), and `BlockingClient` runs one
//! query at a time on it, for start-up work such as loading the 10,000-row cache, and for
//! tests.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{
    DbError, Event, Options, Param, PgConn, QueryError, Row, Sink, Statement, Step, DEFAULT_TIMEOUT,
};
use super::link::{Link, Order};
use super::target::Target;
use crate::sys;

/// A `PgConn`'s link and the link's socket: opens, closes, reads and writes the socket as
/// the link orders. Every method that can change the connection ends by doing what the link
/// orders.
pub struct Driver {
    link: Link,
    socket: Option<OwnedFd>,
    /// The connect of `socket` is under way.
    connecting: bool,
}

impl Driver {
    pub fn new(conn: PgConn) -> Driver {
        Driver {
            link: Link::new(conn),
            socket: None,
            connecting: false,
        }
    }

    pub fn conn(&self) -> &PgConn {
        self.link.conn()
    }

    pub fn conn_mut(&mut self) -> &mut PgConn {
        self.link.conn_mut()
    }

    /// The socket and the connection generation it belongs to, for an event loop to watch.
    pub fn socket(&self) -> Option<(RawFd, u64)> {
        self.socket
            .as_ref()
            .map(|socket| (socket.as_raw_fd(), self.conn().generation()))
    }

    /// Whether to wait for the socket to be writable: a connect under way, or bytes unsent.
    pub fn wants_write(&self) -> bool {
        self.socket.is_some() && (self.connecting || self.link.has_unsent())
    }

    /// Sends what the connection has queued, as far as the socket takes it.
    pub fn flush(&mut self, sink: &mut impl Sink) {
        self.settle(Instant::now(), sink);
    }

    /// Lets the connection act on its deadlines (`conn.deadline()`).
    pub fn on_timer(&mut self, now: Instant, sink: &mut impl Sink) {
        self.conn_mut().on_timer(now, sink);
        self.settle(now, sink);
    }

    /// One step without an event loop: waits with poll(2) for the socket, or for the
    /// connection's deadline, at most until `deadline`, and lets the connection act on what
    /// happened. Blocks; waits for a host name being resolved too.
    pub fn poll_once(&mut self, deadline: Instant, sink: &mut impl Sink) {
        let now = Instant::now();
        let target = self.conn().target();
        if self.conn().step() == Step::Connect && target.address().is_none() {
            target.wait_resolved(deadline.saturating_duration_since(now));
        }
        self.settle(now, sink);
        let wake = self.conn().deadline().unwrap_or(deadline).min(deadline);
        let timeout = wake.saturating_duration_since(Instant::now());
        match &self.socket {
            Some(socket) => match sys::poll_socket(socket, self.wants_write(), timeout) {
                Ok(ready) => {
                    let now = Instant::now();
                    if ready.writable {
                        self.finish_connect(now, sink);
                        self.send(now, sink);
                    }
                    if ready.readable {
                        self.read(now, sink);
                    }
                }
                Err(error) => self.link.failed(error, Instant::now(), sink),
            },
            None if !timeout.is_zero() => std::thread::sleep(timeout),
            None => {}
        }
        self.on_timer(Instant::now(), sink);
    }

    /// Does what the link orders, then sends what it can.
    fn settle(&mut self, now: Instant, sink: &mut impl Sink) {
        while let Some(order) = self.link.order(now, sink) {
            match order {
                Order::Connect(address) => match sys::connect_nonblocking(&address) {
                    Ok(socket) => {
                        self.socket = Some(socket);
                        self.connecting = true;
                    }
                    Err(error) => self.link.connected(Err(error), now, sink),
                },
                Order::Close => {
                    // Nothing but this thread refers to the descriptor.
                    self.socket = None;
                    self.connecting = false;
                    self.link.closed();
                }
            }
        }
        self.send(now, sink);
    }

    fn finish_connect(&mut self, now: Instant, sink: &mut impl Sink) {
        let Some(socket) = self.socket.as_ref().filter(|_| self.connecting) else {
            return;
        };
        self.connecting = false;
        let result = sys::take_socket_error(socket);
        self.link.connected(result, now, sink);
    }

    /// Reads until the socket is empty, handing each read to the link.
    fn read(&mut self, now: Instant, sink: &mut impl Sink) {
        if self.connecting {
            // Readable before connected: the connect failed, and SO_ERROR says why.
            return self.finish_connect(now, sink);
        }
        loop {
            // None once the socket is no longer the connection's (it failed, say).
            let (Some(socket), Some(buffer)) = (&self.socket, self.link.read_buffer(false)) else {
                return;
            };
            let room = buffer.len();
            match sys::receive(socket, buffer) {
                Ok(n) => {
                    self.link.filled(n, now, sink);
                    // EOF, or a short read emptied the socket: skip the read that would
                    // say EAGAIN.
                    if n < room {
                        return;
                    }
                }
                Err(error) => match error.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => {}
                    _ => return self.link.failed(error, now, sink),
                },
            }
        }
    }

    fn send(&mut self, now: Instant, sink: &mut impl Sink) {
        let Some(socket) = &self.socket else {
            return;
        };
        loop {
            let unsent = self.link.unsent();
            if unsent.is_empty() {
                return;
            }
            match sys::send(socket, unsent) {
                Ok(0) => return,
                Ok(n) => self.link.sent(n),
                Err(error) => match error.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => {}
                    _ => return self.link.failed(error, now, sink),
                },
            }
        }
    }
}

impl Drop for Driver {
    /// Says goodbye (Terminate) when nothing is half-sent; the socket closes with the driver.
    fn drop(&mut self) {
        if let Some(socket) = &self.socket {
            if !self.link.has_unsent() {
                self.link.conn_mut().goodbye();
                let goodbye = self.link.unsent();
                let _ = sys::send(socket, goodbye);
            }
        }
    }
}

pub struct BlockingClient {
    driver: Driver,
    timeout: Duration,
    /// Whether a failed connection attempt is followed by another (until the timeout).
    retry: bool,
}

impl BlockingClient {
    /// Connects and prepares `statements`, retrying (with the connection's backoff) until
    /// `timeout`; a wrong password or a missing database fails at once. Each query may take
    /// up to `timeout` too. Failures are returned, not logged.
    pub fn connect(
        target: impl Into<Arc<Target>>,
        statements: &'static [Statement],
        timeout: Duration,
    ) -> Result<BlockingClient, DbError> {
        Self::start(target.into(), statements, timeout, true)
    }

    /// [`BlockingClient::connect`] with one attempt only: the first failure (a refused
    /// connection, say) is returned at once, while a slow database gets all of `timeout`.
    pub fn connect_once(
        target: impl Into<Arc<Target>>,
        statements: &'static [Statement],
        timeout: Duration,
    ) -> Result<BlockingClient, DbError> {
        Self::start(target.into(), statements, timeout, false)
    }

    fn start(
        target: Arc<Target>,
        statements: &'static [Statement],
        timeout: Duration,
        retry: bool,
    ) -> Result<BlockingClient, DbError> {
        let options = Options {
            connect_timeout: timeout.min(DEFAULT_TIMEOUT),
            query_timeout: timeout,
            ..Options::default()
        };
        let conn = PgConn::new(target, statements, options, Instant::now()).without_logging();
        let mut client = BlockingClient {
            driver: Driver::new(conn),
            timeout,
            retry,
        };
        client.wait_ready(Instant::now() + timeout)?;
        Ok(client)
    }

    /// Runs one query, calling `on_row` for each row. The first error `on_row` returns is
    /// returned once the query has finished (its other rows are skipped).
    pub fn query(
        &mut self,
        statement: &Statement,
        params: &[Param],
        mut on_row: impl FnMut(Row<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let deadline = Instant::now() + self.timeout;
        self.wait_ready(deadline)?;
        let now = Instant::now();
        let queued = self.driver.conn_mut().query(statement, params, 0, now);
        queued.map_err(|error| match error {
            QueryError::NotConnected => DbError::ConnectionLost,
            QueryError::QueueFull => unreachable!("one query at a time"),
            QueryError::Unencodable(error) => error.into(),
            QueryError::NotPrepared(name) | QueryError::Unavailable(name) => {
                DbError::NotPrepared(name)
            }
        })?;
        let outcome: Cell<Option<Result<(), DbError>>> = Cell::new(None);
        let mut row_error: Option<DbError> = None;
        let mut sink = |_token: u64, event: Event<'_>| match event {
            Event::Row(row) => {
                if row_error.is_none() {
                    row_error = on_row(row).err();
                }
            }
            Event::Done => outcome.set(Some(Ok(()))),
            Event::Failed(error) => outcome.set(Some(Err(error.clone()))),
        };
        // The connection fails the query at its own deadline; this is only a backstop.
        let backstop = deadline + Duration::from_secs(1);
        let result = loop {
            if let Some(result) = outcome.take() {
                break result;
            }
            if Instant::now() >= backstop {
                // The answer may still come: drop the connection so that it cannot be taken
                // for the next query's.
                self.driver.conn_mut().park(&mut sink);
                self.driver.conn_mut().unpark(Instant::now());
                return Err(DbError::Timeout);
            }
            self.driver.poll_once(backstop, &mut sink);
        };
        result.and(row_error.map_or(Ok(()), Err))
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), DbError> {
        let mut sink = |_: u64, _: Event<'_>| {};
        while !self.driver.conn().is_ready() {
            let conn = self.driver.conn_mut();
            if let Some(error) = conn
                .last_error()
                .filter(|e| e.is_permanent() || !self.retry)
            {
                return Err(error.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(conn.last_error().map_or(DbError::Timeout, DbError::clone));
            }
            // Waiting for the database: try again as soon as the policy allows.
            conn.wanted();
            self.driver.poll_once(deadline, &mut sink);
        }
        Ok(())
    }
}
