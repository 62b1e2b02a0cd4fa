//! A blocking client for start-up work (e.g. loading the 10,000-row cache): a `PgConn`
//! driven by `poll(2)` until each answer is complete.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{DbError, Event, Param, PgConn, QueryError, Row, Statement};
use super::target::Config;

pub struct BlockingClient {
    config: Arc<Config>,
    statements: &'static [Statement],
    conn: PgConn,
    timeout: Duration,
}

impl BlockingClient {
    /// Connects and prepares `statements`, retrying (with the connection's backoff) until
    /// `timeout`; a wrong password or a missing database fails at once.
    pub fn connect(
        config: Arc<Config>,
        statements: &'static [Statement],
        timeout: Duration,
    ) -> Result<BlockingClient, DbError> {
        let mut client = BlockingClient {
            conn: PgConn::new(config.clone(), statements),
            config,
            statements,
            timeout,
        };
        client.wait_ready(Instant::now() + timeout)?;
        Ok(client)
    }

    /// Runs one query, calling `on_row` for each row. The first error `on_row` returns is
    /// returned once the query has finished (its other rows are skipped).
    pub fn query(
        &mut self,
        statement: usize,
        params: &[Param],
        mut on_row: impl FnMut(Row<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let deadline = Instant::now() + self.timeout;
        self.wait_ready(deadline)?;
        match self.conn.query(statement, params, 0) {
            Ok(()) => {}
            Err(QueryError::NotConnected) => return Err(DbError::ConnectionLost),
            Err(QueryError::QueueFull) => unreachable!("one query at a time"),
        }
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
        self.conn.flush(&mut sink);
        let result = loop {
            if let Some(result) = outcome.take() {
                break result;
            }
            if Instant::now() >= deadline {
                // The answer may still come: drop the connection so it cannot be mistaken
                // for the next query's.
                self.conn = PgConn::new(self.config.clone(), self.statements);
                return Err(DbError::Timeout);
            }
            poll_once(&mut self.conn, deadline, &mut sink);
        };
        match (result, row_error) {
            (Ok(()), Some(error)) => Err(error),
            (result, _) => result,
        }
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), DbError> {
        let mut sink = |_: u64, _: Event<'_>| {};
        while !self.conn.is_ready() {
            if let Some(error) = self.conn.last_error().filter(|e| e.is_permanent()) {
                return Err(error.clone());
            }
            if Instant::now() >= deadline {
                return Err(self
                    .conn
                    .last_error()
                    .map_or(DbError::Timeout, DbError::clone));
            }
            poll_once(&mut self.conn, deadline, &mut sink);
        }
        Ok(())
    }
}

/// Waits for `conn`'s socket or timer (at most until `deadline`) and lets the connection act
/// on what happened: one step of driving a `PgConn` without an event loop.
pub fn poll_once(conn: &mut PgConn, deadline: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
    let now = Instant::now();
    let wake = conn.next_timer().map_or(deadline, |t| t.min(deadline));
    let timeout_ms = wake.saturating_duration_since(now).as_millis().min(1000) as i32;
    match conn.socket() {
        Some((fd, _)) => {
            let mut events = libc::POLLIN;
            if conn.wants_write() {
                events |= libc::POLLOUT;
            }
            let mut pollfd = libc::pollfd {
                fd,
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut pollfd, 1, timeout_ms.max(1)) };
            if n > 0 {
                if pollfd.revents & libc::POLLOUT != 0 {
                    conn.on_writable(sink);
                }
                if pollfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
                    conn.on_readable(sink);
                }
            }
        }
        None => std::thread::sleep(Duration::from_millis(timeout_ms.max(1) as u64)),
    }
    conn.on_timer(Instant::now(), sink);
}
