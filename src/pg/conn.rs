//! One PostgreSQL connection as a state machine without socket I/O: its link (`link::Link`)
//! moves its bytes and tells it the time (it reads no clock). Its other dealings with the
//! system: the SCRAM nonce and key (`auth`), a new name lookup after a failed connect, and
//! failures logged to stderr.
//!
//! Its life is a `Phase` that carries what it needs, so losing the connection is one change
//! of phase: the start-up is `startup.rs`'s, the session that answers queries `session.rs`'s,
//! the reconnect policy and the failure log `failure.rs`'s.

mod failure;
mod session;
mod setup;
mod startup;

use std::sync::Arc;
use std::time::Instant;

use self::failure::{failure_kind, Backoff, FailureLog, MIN_ATTEMPT_GAP};
use self::session::{least_answer, Session};
use self::setup::Setup;
use self::startup::Handshake;
use super::protocol;
use super::target::Target;

pub use self::session::{Event, Floors, QueryError, Row, Sink};
pub use self::setup::{Options, Statement, DEFAULT_TIMEOUT, MAX_ROWS};
pub use super::error::DbError;
pub use super::protocol::Param;

const READ_BUF_INITIAL: usize = 64 * 1024;
/// `read_buffer` offers at least this much room when it can, moving or growing the buffer.
const MIN_READ_ROOM: usize = 4 * 1024;

pub use crate::link::Step;

/// Where the connection is in its life, with what it needs there.
enum Phase {
    /// No socket: waiting for the backoff to end.
    Idle(Retry),
    /// No socket until `unpark`; the backoff that was running, if one was.
    Parked(Option<Retry>),
    /// A socket is wanted from the driver.
    Connect,
    /// The driver's non-blocking connect is under way; the start-up must be done by
    /// `deadline`.
    Connecting {
        deadline: Instant,
    },
    /// Authentication, then every statement prepared.
    Handshake(Handshake),
    Ready(Session),
}

/// The next attempt to connect.
#[derive(Clone, Copy)]
struct Retry {
    at: Instant,
    /// Whether `wanted` may bring it forward: the last failure came before the connection
    /// was up (refused, timed out, the server still starting) and retrying may fix it.
    may_hurry: bool,
}

pub struct PgConn {
    setup: Setup,
    phase: Phase,
    /// Changes whenever a socket is given up, so that each socket the driver opens belongs to
    /// one generation.
    generation: u64,
    /// When the current or last attempt began (entered `Step::Connect`).
    attempt_started: Instant,
    backoff: Backoff,
    /// Bytes for the driver to send.
    output: Vec<u8>,
    /// Received bytes; `read_start..read_end` is the start of a message not complete yet.
    read_buf: Vec<u8>,
    read_start: usize,
    read_end: usize,
    last_error: Option<DbError>,
    log: FailureLog,
}

impl PgConn {
    /// A connection that wants its first socket at once (`Step::Connect`).
    pub fn new(
        target: Arc<Target>,
        statements: &'static [Statement],
        options: Options,
        now: Instant,
    ) -> PgConn {
        PgConn {
            setup: Setup {
                target,
                statements,
                least_answers: statements.iter().map(|s| least_answer(s.sql)).collect(),
                options,
                logging: true,
            },
            phase: Phase::Connect,
            generation: 0,
            attempt_started: now,
            backoff: Backoff::new(),
            output: Vec::with_capacity(64 * 1024),
            read_buf: vec![0; READ_BUF_INITIAL],
            read_start: 0,
            read_end: 0,
            last_error: None,
            log: FailureLog::default(),
        }
    }

    /// No log lines: for a client that returns every failure to its caller, which reports
    /// it (`BlockingClient`; the cache loader makes a new one per attempt).
    pub(crate) fn without_logging(mut self) -> PgConn {
        self.setup.logging = false;
        self
    }

    /// Where to connect; `target().address()` for `Step::Connect`.
    pub fn target(&self) -> &Arc<Target> {
        &self.setup.target
    }

    pub fn step(&self) -> Step {
        match self.phase {
            Phase::Idle(_) | Phase::Parked(_) => Step::Idle,
            Phase::Connect => Step::Connect,
            Phase::Connecting { .. } => Step::Connecting,
            Phase::Handshake(_) | Phase::Ready(_) => Step::Io,
        }
    }

    /// Changes whenever a new socket is wanted: a driver whose socket is of an older
    /// generation closes it, and drops whatever that socket still delivers.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// When `on_timer` must be called next: the backoff's end, the start-up deadline, the
    /// oldest query's deadline, a short poll while a SCRAM key is derived, or the next try
    /// at preparing an unavailable statement.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Idle(retry) => Some(retry.at),
            Phase::Parked(_) | Phase::Connect => None,
            Phase::Connecting { deadline } => Some(*deadline),
            Phase::Handshake(handshake) => Some(handshake.deadline()),
            Phase::Ready(session) => session.deadline(),
        }
    }

    /// Acts on whatever deadline has passed; harmless to call at any time.
    pub fn on_timer(&mut self, now: Instant, sink: &mut impl Sink) {
        let result = match &mut self.phase {
            Phase::Idle(retry) if retry.at <= now => {
                self.start_attempt(now);
                Ok(())
            }
            Phase::Connecting { deadline } if *deadline <= now => Err(DbError::Timeout),
            Phase::Handshake(handshake) => handshake.on_timer(&mut self.output, now),
            Phase::Ready(session) => session.on_timer(&self.setup, &mut self.output, now, sink),
            _ => Ok(()),
        };
        if let Err(error) = result {
            self.fail(error, now, sink);
        }
    }

    /// The driver has started its connect: the start-up deadline runs from now.
    pub(super) fn connecting(&mut self, now: Instant) {
        if let Phase::Connect = self.phase {
            let deadline = now + self.setup.options.connect_timeout;
            self.phase = Phase::Connecting { deadline };
        }
    }

    /// The socket is connected: the StartupMessage is the first output.
    pub(super) fn connected(&mut self, now: Instant) {
        self.connecting(now);
        if let Phase::Connecting { deadline } = self.phase {
            self.phase = Phase::Handshake(Handshake::new(deadline));
            let config = self.setup.target.config();
            if let Err(error) = protocol::startup(&mut self.output, &config.user, &config.database)
            {
                // Before start-up no query is held: nothing to deliver to.
                self.fail(error.into(), now, &mut |_, _| {});
            }
        }
    }

    /// The socket failed: EOF, reset, refused connect, send error, no socket to be had.
    /// Fails every query held (`ConnectionLost`) and schedules the next attempt. Ignored while
    /// Idle (the driver reports a socket already given up).
    pub(super) fn transport_failed(&mut self, error: DbError, now: Instant, sink: &mut impl Sink) {
        if self.step() != Step::Idle {
            self.fail(error, now, sink);
        }
    }

    pub(super) fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Moves every byte waiting to be sent to the end of `out`, swapping buffers when `out`
    /// is empty so that the common case copies nothing. The driver sends from its own buffer:
    /// nothing the connection does later can move bytes the kernel is still sending.
    pub(super) fn take_output(&mut self, out: &mut Vec<u8>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.output);
        } else {
            out.extend_from_slice(&self.output);
            self.output.clear();
        }
    }

    /// Free room to receive into: never empty, at least a few KiB, and as large as the
    /// message being received needs.
    pub(super) fn read_buffer(&mut self) -> &mut [u8] {
        if self.read_start == self.read_end {
            self.read_start = 0;
            self.read_end = 0;
        }
        if self.read_buf.len() - self.read_end < MIN_READ_ROOM {
            if self.read_start > 0 {
                self.read_buf.copy_within(self.read_start..self.read_end, 0);
                self.read_end -= self.read_start;
                self.read_start = 0;
            }
            // What is left is the start of one message: room for all of it, at least. The
            // decoder has refused lengths over `max_message_len`, so this is bounded.
            let head = &self.read_buf[..self.read_end];
            let message_len = match head.get(1..5) {
                Some(len) => 1 + u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize,
                None => 0,
            }
            .min(1 + self.setup.options.max_message_len);
            let wanted = (self.read_end + MIN_READ_ROOM).max(message_len);
            if wanted > self.read_buf.len() {
                let len = wanted.max(self.read_buf.len() * 2);
                self.read_buf.resize(len, 0);
            }
        }
        &mut self.read_buf[self.read_end..]
    }

    /// `n` bytes were written at the start of `read_buffer()`: decode and deliver.
    pub(super) fn filled(&mut self, n: usize, now: Instant, sink: &mut impl Sink) {
        if self.step() != Step::Io {
            return;
        }
        self.read_end = (self.read_end + n).min(self.read_buf.len());
        if let Err(error) = self.process(now, sink) {
            self.fail(error, now, sink);
        }
    }

    /// Appends Bind/Execute/Sync for one query; its deadline starts now.
    pub fn query(
        &mut self,
        statement: &Statement,
        params: &[Param],
        token: u64,
        now: Instant,
    ) -> Result<(), QueryError> {
        let statements = self.setup.statements;
        let Some(index) = statements.iter().position(|s| std::ptr::eq(s, statement)) else {
            return Err(QueryError::NotPrepared(statement.name));
        };
        let Phase::Ready(session) = &mut self.phase else {
            return Err(QueryError::NotConnected);
        };
        session.query(&self.setup, &mut self.output, index, params, token, now)
    }

    /// A request needed this connection while it was down: a retry that may hurry (see
    /// `Retry`) comes no later than `MIN_ATTEMPT_GAP` after the last attempt began, so that
    /// the database is used again soon after it is back; never earlier.
    pub fn wanted(&mut self) {
        if let Phase::Idle(retry) = &mut self.phase {
            let early = self.attempt_started + MIN_ATTEMPT_GAP;
            if retry.may_hurry && retry.at > early {
                retry.at = early;
            }
        }
    }

    /// Gives the connection up and stays Idle until `unpark`: for a thread that hands back a
    /// connection slot it does not need. Every query held fails with `ConnectionLost`; a
    /// connected socket gets a Terminate in the output, for the driver to send if it likes.
    pub fn park(&mut self, sink: &mut impl Sink) {
        match self.phase {
            Phase::Parked(_) => {}
            Phase::Idle(retry) => self.phase = Phase::Parked(Some(retry)),
            _ => {
                let connected = self.step() == Step::Io;
                self.drop_connection(Phase::Parked(None), sink);
                if connected {
                    protocol::terminate(&mut self.output);
                }
            }
        }
    }

    /// Connects again (at once, or when a backoff still running from before `park` ends).
    pub fn unpark(&mut self, now: Instant) {
        match self.phase {
            Phase::Parked(Some(retry)) if retry.at > now => self.phase = Phase::Idle(retry),
            Phase::Parked(_) => self.start_attempt(now),
            _ => {}
        }
    }

    pub fn is_parked(&self) -> bool {
        matches!(self.phase, Phase::Parked(_))
    }

    /// Authenticated and every statement prepared or found unavailable: `query` accepts
    /// queries (of the available statements).
    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready(_))
    }

    /// The fewest bytes the socket must still deliver before the oldest request's queries
    /// are all answered, and in all (what is buffered undecoded counted as delivered); `None`
    /// while nothing is awaited, 1 while the connection starts up. A mover may ask the kernel
    /// not to wake it for fewer (`SO_RCVLOWAT`), but never for more than is owed.
    pub fn read_low_water(&self) -> Option<Floors> {
        let buffered = self.read_end - self.read_start;
        let less_buffered = |floor: usize| floor.saturating_sub(buffered).max(1);
        match &self.phase {
            Phase::Ready(session) => session.answer_floors(&self.setup).map(|floors| Floors {
                request: less_buffered(floors.request),
                owed: less_buffered(floors.owed),
            }),
            _ => Some(Floors {
                request: 1,
                owed: 1,
            }),
        }
    }

    /// Queries held, not answered yet.
    pub fn queued(&self) -> usize {
        match &self.phase {
            Phase::Ready(session) => session.queued(),
            _ => 0,
        }
    }

    /// Why the last connection attempt failed or the last connection was lost; `None` again
    /// once a start-up succeeds.
    pub fn last_error(&self) -> Option<&DbError> {
        self.last_error.as_ref()
    }

    /// Queues a Terminate, for a driver about to close a connected socket for good (output
    /// always ends at a message boundary, so it is never inside another message).
    pub(super) fn goodbye(&mut self) {
        if self.step() == Step::Io {
            protocol::terminate(&mut self.output);
        }
    }

    fn start_attempt(&mut self, now: Instant) {
        self.phase = Phase::Connect;
        self.attempt_started = now;
        // A goodbye to the socket before is not sent on this one.
        self.output.clear();
    }

    /// Decodes and handles every complete message received.
    fn process(&mut self, now: Instant, sink: &mut impl Sink) -> Result<(), DbError> {
        // Taken out so that rows can borrow it while `self` handles them.
        let buf = std::mem::take(&mut self.read_buf);
        let max_message_len = self.setup.options.max_message_len;
        let mut at = self.read_start;
        let result = loop {
            match protocol::decode_within(&buf[at..self.read_end], max_message_len) {
                Ok(Some((message, used))) => {
                    at += used;
                    if let Err(error) = self.handle(message, now, sink) {
                        break Err(error);
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(DbError::Protocol(e.to_string())),
            }
        };
        self.read_buf = buf;
        self.read_start = at;
        result
    }

    fn handle(
        &mut self,
        message: protocol::Message<'_>,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<(), DbError> {
        match &mut self.phase {
            Phase::Ready(session) => {
                if session.answer(message, &self.setup, now, sink)? {
                    // The database works: a failure from now on starts from the shortest
                    // backoff again.
                    self.backoff.reset();
                    if let Some(line) = self.log.recovered(&self.setup.target, now) {
                        self.setup.log(line);
                    }
                }
            }
            Phase::Handshake(handshake) => {
                let prepared = handshake.handle(message, &self.setup, &mut self.output, now)?;
                if let Some(column_types) = prepared {
                    self.phase = Phase::Ready(Session::new(column_types, now));
                    self.last_error = None;
                }
            }
            _ => return Err(DbError::Protocol("data before start-up".into())),
        }
        Ok(())
    }

    /// Gives the connection up: fails every query held, logs, and schedules the next attempt.
    fn fail(&mut self, error: DbError, now: Instant, sink: &mut impl Sink) {
        let permanent = error.is_permanent();
        let was_ready = self.is_ready();
        let retry = Retry {
            at: now + self.backoff.next(permanent),
            // Refused, timed out, or the server still starting: it may be back any moment.
            may_hurry: !was_ready && !permanent,
        };
        let lost = self.drop_connection(Phase::Idle(retry), sink);
        let proven = match lost {
            Phase::Connect | Phase::Connecting { .. } => {
                // The address may be stale (the database moved): look the name up again.
                self.setup.target.connect_failed();
                false
            }
            Phase::Ready(session) => session.is_proven(),
            _ => false,
        };
        let query_ms = self.setup.options.query_timeout.as_millis();
        let connect_ms = self.setup.options.connect_timeout.as_millis();
        let reason = match (&error, was_ready) {
            (DbError::Timeout, true) => format!("no answer to a query within {query_ms} ms"),
            (DbError::Timeout, false) => format!("start-up not done within {connect_ms} ms"),
            (error, _) => error.to_string(),
        };
        let (target, kind) = (&self.setup.target, failure_kind(&error));
        if let Some(line) = self.log.failed(target, kind, &reason, proven, now) {
            self.setup.log(line);
        }
        self.last_error = Some(error);
    }

    /// Forgets the socket and everything on it (its queries fail with `ConnectionLost`) for
    /// `next`, and returns the phase it was in; the driver sees a new generation.
    fn drop_connection(&mut self, next: Phase, sink: &mut impl Sink) -> Phase {
        let mut lost = std::mem::replace(&mut self.phase, next);
        if let Phase::Ready(session) = &mut lost {
            session.fail_all(&DbError::ConnectionLost, sink);
        }
        self.generation += 1;
        self.output.clear();
        self.read_start = 0;
        self.read_end = 0;
        if self.read_buf.len() > 4 * READ_BUF_INITIAL {
            // Grown for one large message: not kept for the next connection.
            self.read_buf = vec![0; READ_BUF_INITIAL];
        }
        lost
    }
}

#[cfg(test)]
mod tests;
