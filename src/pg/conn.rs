//! One PostgreSQL connection as a state machine without socket I/O (sans-I/O): its driver,
//! the link (`link::Link`, whose bytes a server's worker or `blocking::Driver` moves), owns
//! the socket, moves bytes in and out, and tells the connection the time (it reads no
//! clock). Its other dealings with the system: 18 random bytes from getrandom(2) for each
//! SCRAM nonce, SCRAM's key derived on a helper thread (`auth`), a failed connect starting a
//! new name lookup on the target's helper thread, and failures logged to stderr.
//!
//! Start-up (StartupMessage, authentication, Parse + Describe of every statement, each in its
//! own Sync group) happens inside the connection; a statement the database cannot prepare
//! (its table is not there) is unavailable on that connection, the others serve, and it is
//! prepared again now and then (a schema loaded after the server started is found). Afterwards
//! each `query` appends exactly Bind/Execute/Sync to the output, and the bytes the driver
//! hands to `filled`/`receive` are decoded into each query's rows, then `Done` or `Failed`,
//! delivered to the sink with the query's token, in order.
//! Deadlines (start-up, each query) and the reconnect policy (a jittered, capped backoff) live
//! here too; `step()` says what the driver must do next, `deadline()` when to call `on_timer`.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::auth::{self, Scram};
use super::protocol::{self, Auth, ColumnValue, DataRow, EncodeError, Message};
use super::target::{Host, Target};

pub use super::error::DbError;
pub use super::protocol::Param;

/// Queries a connection holds (written or not) before `query` answers `QueueFull`: TFB's worst
/// case is 512 connections x 20 queries spread over the threads.
pub const MAX_QUEUED: usize = 16_384;
/// The default for [`Options::connect_timeout`] and [`Options::query_timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The first pause after a failure; it doubles with every failure after that.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Low enough that a restarted database is back in use within about a second of accepting
/// connections; a refused connect costs next to nothing.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// After an error that retrying does not fix (a wrong password), retries need not be fast.
pub const BACKOFF_MAX_PERMANENT: Duration = Duration::from_secs(10);
/// Each pause is the backoff times a random factor in 1 +- this, so that the connections of
/// many threads do not all reconnect in the same instant.
pub const BACKOFF_JITTER: f64 = 0.2;
/// `wanted` brings the next attempt forward, but never closer than this to the last one.
pub const MIN_ATTEMPT_GAP: Duration = Duration::from_millis(100);
/// How often to look whether a SCRAM key being derived on a helper thread is there.
const SCRAM_POLL: Duration = Duration::from_millis(2);
/// A statement the database could not prepare is tried again this long after, then at
/// doubling intervals up to `REPREPARE_MAX`: a schema loaded just after the server started
/// is found within a second or two, a table that never comes costs a refused Parse now and
/// then (and a line in the database's log).
pub const REPREPARE_MIN: Duration = Duration::from_secs(1);
pub const REPREPARE_MAX: Duration = Duration::from_secs(30);
/// While a failure lasts, a line that sums it up at most this often.
const FAILURE_SUMMARY_EVERY: Duration = Duration::from_secs(60);
/// Distinct reasons of failure logged in one outage; more are only counted.
const MAX_REASONS_LOGGED: usize = 8;
/// The default for [`Options::max_rows`]: the largest result any route reads is the cache
/// loader's whole world table, TFB's 10,000 rows; the fortunes table has 12.
pub const MAX_ROWS: usize = 16_384;
/// The default for [`Options::max_result_bytes`]: the cache loader's 10,000 rows are about
/// 220 KB, the fortunes under 3 KB. With it, what one query can make a worker hold is a few
/// MB, not `max_rows` times `max_message_len` (1 GiB).
pub const MAX_RESULT_BYTES: usize = 4 << 20;
const READ_BUF_INITIAL: usize = 64 * 1024;
/// `read_buffer` offers at least this much room when it can, moving or growing the buffer.
const MIN_READ_ROOM: usize = 4 * 1024;

/// A statement prepared once per connection under `name`. A query names it by reference (a
/// `static` of the list the connection was made with, e.g. `static W: &Statement = &LIST[0]`,
/// whose index the compiler checks): no index reaches the connection.
#[derive(Debug)]
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub param_types: &'static [u32],
}

/// What happens to one query: zero or more `Row`s, then exactly one `Done` or `Failed`.
/// Rows stream as they arrive, so a query that fails after sending rows (rare: an error at
/// the implicit commit) delivers those rows before `Failed`; discard them then.
pub enum Event<'a> {
    Row(Row<'a>),
    Done,
    Failed(&'a DbError),
}

/// One result row, borrowing the connection's read buffer.
pub struct Row<'a> {
    data: DataRow<'a>,
    types: &'a [u32],
}

impl<'a> Row<'a> {
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn column(&self, index: usize, accepted: &[u32], wanted: &str) -> Result<&'a [u8], DbError> {
        if !self.types.get(index).is_some_and(|t| accepted.contains(t)) {
            return Err(DbError::Column(format!("column {index} is not {wanted}")));
        }
        match self.data.get(index) {
            Some(Some(value)) => Ok(value),
            Some(None) => Err(DbError::Column(format!("column {index} is NULL"))),
            None => Err(DbError::Column(format!("no column {index}"))),
        }
    }

    /// Column `index` as `T` (bool, i32, i64, &str, Jsonb), its type checked against the
    /// statement's Describe; a wrong type, a NULL or bad bytes is an error, never a panic.
    pub fn get<T: ColumnValue<'a>>(&self, index: usize) -> Result<T, DbError> {
        let value = self.column(index, T::OIDS, T::NAME)?;
        T::decode(value).map_err(|error| DbError::Column(format!("column {index}: {error}")))
    }

    pub fn int4(&self, index: usize) -> Result<i32, DbError> {
        self.get(index)
    }

    /// A text, varchar, char or name column.
    pub fn text(&self, index: usize) -> Result<&'a str, DbError> {
        self.get(index)
    }
}

static CONNECTION_LOST: DbError = DbError::ConnectionLost;
static TIMED_OUT: DbError = DbError::Timeout;

/// Why `query` refused a query at once: 503 for the first two, a defect for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryError {
    NotConnected,
    QueueFull,
    /// Its Bind message cannot be written (too many parameters, an array too long).
    Unencodable(EncodeError),
    /// The statement (named here) is not one of the connection's list.
    NotPrepared(&'static str),
    /// The database could not prepare the statement (named here): its table or a column is
    /// not there (SQLSTATE class 42). The route answers as if the database were down.
    Unavailable(&'static str),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::NotConnected => f.write_str("database connection not ready"),
            QueryError::QueueFull => f.write_str("database queue full"),
            QueryError::Unencodable(error) => write!(f, "cannot encode the query: {error}"),
            QueryError::NotPrepared(name) => {
                write!(f, "statement {name} is not prepared on this connection")
            }
            QueryError::Unavailable(name) => {
                write!(f, "statement {name} is unavailable in this database")
            }
        }
    }
}

impl std::error::Error for QueryError {}

/// Limits of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Connect + authentication + prepare must finish within this (default 5 s).
    pub connect_timeout: Duration,
    /// A query unanswered this long fails with `DbError::Timeout`, and so does every other
    /// query held; the connection is dropped and replaced (default 5 s).
    pub query_timeout: Duration,
    /// Queries held (written or not) before `query` answers `QueueFull` (default 16,384).
    pub max_queued: usize,
    /// The longest backend message taken (default `protocol::MAX_MESSAGE_LEN`, 64 KiB): a
    /// longer one is refused from its header and the connection replaced, so that the read
    /// buffer never grows past about twice this.
    pub max_message_len: usize,
    /// Rows one query may answer (default [`MAX_ROWS`]): past it the query fails with a
    /// protocol error and the connection is replaced, its other queries failing with
    /// `ConnectionLost`.
    pub max_rows: usize,
    /// Bytes of rows one query may answer (default [`MAX_RESULT_BYTES`], 4 MiB); past it, as
    /// past `max_rows`.
    pub max_result_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: DEFAULT_TIMEOUT,
            query_timeout: DEFAULT_TIMEOUT,
            max_queued: MAX_QUEUED,
            max_message_len: protocol::MAX_MESSAGE_LEN,
            max_rows: MAX_ROWS,
            max_result_bytes: MAX_RESULT_BYTES,
        }
    }
}

/// What the connection needs from its driver (`link::Link`) right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Open a socket to `target().address()` and start a non-blocking connect, then call
    /// `connecting(now)`; if the socket cannot even be created (or there is no address yet),
    /// `transport_failed`.
    Connect,
    /// The driver's connect is under way: call `connected(now)` when the socket is writable
    /// and SO_ERROR is 0, else `transport_failed`.
    Connecting,
    /// Exchange bytes: read whenever readable (`read_buffer` + `filled`, or `receive`), send
    /// whatever `take_output` gives.
    Io,
    /// No socket wanted (backoff, or parked): the driver closes any socket it holds for this
    /// connection (after sending what `take_output` still gives, if it likes: a goodbye) and
    /// calls `on_timer` at `deadline()`.
    Idle,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No socket: waiting for the backoff to end, or parked.
    Idle,
    /// A socket is wanted from the driver.
    Connect,
    /// The driver's non-blocking connect is under way.
    Connecting,
    /// StartupMessage sent; authentication until the first ReadyForQuery.
    Authenticating,
    /// Parse + Describe + Sync of every statement sent, waiting for each one's ReadyForQuery.
    Preparing,
    Ready,
}

/// The answer to the Parse + Describe of the statement being prepared, so far.
enum Preparation {
    Waiting,
    Described(Vec<u32>),
    /// Refused with this error of SQLSTATE class 42 (undefined table, column, function; no
    /// privilege): the database does not have what the statement needs.
    Unavailable(String),
}

struct Pending {
    /// The query's token; `None` for the Parse + Describe of an unavailable statement
    /// (see `reprepare`), whose answer goes to no sink.
    token: Option<u64>,
    /// The statement's place in the connection's list (and so in `column_types`).
    statement: usize,
    /// When the query fails with `Timeout` if still unanswered.
    deadline: Instant,
}

pub struct PgConn {
    target: Arc<Target>,
    statements: &'static [Statement],
    options: Options,
    phase: Phase,
    parked: bool,
    /// Changes whenever a socket is given up, so that each socket the driver opens belongs to
    /// one generation.
    generation: u64,
    /// While Idle: when to start the next attempt.
    retry_at: Option<Instant>,
    /// From `connecting` until ready: when the attempt counts as failed.
    startup_deadline: Option<Instant>,
    /// When the current or last attempt began (entered `Step::Connect`).
    attempt_started: Instant,
    /// Whether `wanted` may bring the next attempt forward (see there).
    retry_early: bool,
    backoff: Backoff,
    /// A query has been answered on this connection: it has proven itself.
    proven: bool,
    scram: Option<Scram>,
    /// SASL has begun on this socket: a password asked for in clear or as MD5 from now on
    /// is a downgrade, refused.
    sasl_begun: bool,
    /// The method the server asked for last, logged once authentication succeeds.
    auth_method: auth::Method,
    /// While the SCRAM key is derived on a helper thread: when to look for it again.
    scram_poll: Option<Instant>,
    /// Result column types of each statement, from Describe at start-up; `None` for one
    /// the database could not prepare (unavailable on this connection).
    column_types: Vec<Option<Vec<u32>>>,
    /// While Preparing: the answer to the statement `column_types.len()`.
    preparation: Preparation,
    /// While Preparing: each unavailable statement so far, with why.
    unavailable: Vec<(&'static str, String)>,
    /// While Ready with statements unavailable: when to try preparing them again, and the
    /// pause after that.
    reprepare_at: Option<Instant>,
    reprepare_every: Duration,
    /// Queries written to the output, oldest first; the front one is being answered.
    pending: VecDeque<Pending>,
    /// The ErrorResponse of the front query, delivered at its ReadyForQuery.
    front_error: Option<DbError>,
    /// Rows the front query has answered so far, and their bytes.
    front_rows: usize,
    front_bytes: usize,
    /// Bytes for the driver to send.
    output: Vec<u8>,
    /// Received bytes; `read_start..read_end` is the start of a message not complete yet.
    read_buf: Vec<u8>,
    read_start: usize,
    read_end: usize,
    last_error: Option<DbError>,
    log: FailureLog,
    /// Whether failures and recoveries are logged (see `without_logging`).
    logging: bool,
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
            target,
            statements,
            options,
            phase: Phase::Connect,
            parked: false,
            generation: 0,
            retry_at: None,
            startup_deadline: None,
            attempt_started: now,
            retry_early: false,
            backoff: Backoff::new(),
            proven: false,
            scram: None,
            sasl_begun: false,
            auth_method: auth::Method::Trust,
            scram_poll: None,
            column_types: Vec::with_capacity(statements.len()),
            preparation: Preparation::Waiting,
            unavailable: Vec::new(),
            reprepare_at: None,
            reprepare_every: REPREPARE_MIN,
            pending: VecDeque::with_capacity(1024),
            front_error: None,
            front_rows: 0,
            front_bytes: 0,
            output: Vec::with_capacity(64 * 1024),
            read_buf: vec![0; READ_BUF_INITIAL],
            read_start: 0,
            read_end: 0,
            last_error: None,
            log: FailureLog::default(),
            logging: true,
        }
    }

    /// No log lines: for a client that returns every failure to its caller, which reports
    /// it (`BlockingClient`; the cache loader makes a new one per attempt).
    pub(crate) fn without_logging(mut self) -> PgConn {
        self.logging = false;
        self
    }

    /// Where to connect; `target().address()` for `Step::Connect`.
    pub fn target(&self) -> &Arc<Target> {
        &self.target
    }

    pub fn step(&self) -> Step {
        match self.phase {
            Phase::Idle => Step::Idle,
            Phase::Connect => Step::Connect,
            Phase::Connecting => Step::Connecting,
            Phase::Authenticating | Phase::Preparing | Phase::Ready => Step::Io,
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
        match self.phase {
            Phase::Idle if self.parked => None,
            Phase::Idle => self.retry_at,
            Phase::Connect => None,
            Phase::Connecting | Phase::Authenticating | Phase::Preparing => self
                .startup_deadline
                .into_iter()
                .chain(self.scram_poll)
                .min(),
            Phase::Ready => {
                let front = self.pending.front().map(|query| query.deadline);
                front.into_iter().chain(self.reprepare_at).min()
            }
        }
    }

    /// Acts on whatever deadline has passed; harmless to call at any time.
    pub fn on_timer(&mut self, now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        let passed = |deadline: Option<Instant>| deadline.is_some_and(|at| at <= now);
        match self.phase {
            Phase::Idle => {
                if !self.parked && passed(self.retry_at) {
                    self.start_attempt(now);
                }
            }
            Phase::Connect => {}
            Phase::Connecting | Phase::Authenticating | Phase::Preparing => {
                if passed(self.startup_deadline) {
                    self.fail(DbError::Timeout, now, sink);
                } else if passed(self.scram_poll) {
                    if let Err(error) = self.continue_scram(now) {
                        self.fail(error, now, sink);
                    }
                }
            }
            Phase::Ready => {
                if passed(self.pending.front().map(|query| query.deadline)) {
                    // The connection stopped answering: every query held waited on it in
                    // vain, whether its own deadline has come or not.
                    while let Some(query) = self.pending.pop_front() {
                        if let Some(token) = query.token {
                            sink(token, Event::Failed(&TIMED_OUT));
                        }
                    }
                    self.fail(DbError::Timeout, now, sink);
                } else if passed(self.reprepare_at) {
                    self.reprepare(now);
                }
            }
        }
    }

    /// The driver has started its connect: the start-up deadline runs from now.
    pub fn connecting(&mut self, now: Instant) {
        if self.phase == Phase::Connect {
            self.phase = Phase::Connecting;
            self.startup_deadline = Some(now + self.options.connect_timeout);
        }
    }

    /// The socket is connected: the StartupMessage is the first output.
    pub fn connected(&mut self, now: Instant) {
        if self.phase == Phase::Connect {
            self.connecting(now);
        }
        if self.phase == Phase::Connecting {
            self.phase = Phase::Authenticating;
            let config = self.target.config();
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
    pub fn transport_failed(
        &mut self,
        error: DbError,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) {
        if self.phase != Phase::Idle {
            self.fail(error, now, sink);
        }
    }

    /// Whether there are bytes waiting to be sent.
    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Moves every byte waiting to be sent to the end of `out`, swapping buffers when `out`
    /// is empty so that the common case copies nothing. The driver sends from its own buffer:
    /// nothing the connection does later can move bytes the kernel is still sending.
    pub fn take_output(&mut self, out: &mut Vec<u8>) {
        if out.is_empty() {
            std::mem::swap(out, &mut self.output);
        } else {
            out.extend_from_slice(&self.output);
            self.output.clear();
        }
    }

    /// Free room to receive into: never empty, at least a few KiB, and as large as the
    /// message being received needs.
    pub fn read_buffer(&mut self) -> &mut [u8] {
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
            .min(1 + self.options.max_message_len);
            let wanted = (self.read_end + MIN_READ_ROOM).max(message_len);
            if wanted > self.read_buf.len() {
                let len = wanted.max(self.read_buf.len() * 2);
                self.read_buf.resize(len, 0);
            }
        }
        &mut self.read_buf[self.read_end..]
    }

    /// `n` bytes were written at the start of `read_buffer()`: decode and deliver.
    pub fn filled(&mut self, n: usize, now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        if self.step() != Step::Io {
            return;
        }
        self.read_end = (self.read_end + n).min(self.read_buf.len());
        if let Err(error) = self.process(now, sink) {
            self.fail(error, now, sink);
        }
    }

    /// `bytes` arrived (copied in: for drivers that receive into buffers of their own).
    pub fn receive(&mut self, bytes: &[u8], now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        let generation = self.generation;
        let mut rest = bytes;
        while !rest.is_empty() && self.generation == generation && self.step() == Step::Io {
            let room = self.read_buffer();
            let n = room.len().min(rest.len());
            room[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            self.filled(n, now, sink);
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
        let Some(index) = self
            .statements
            .iter()
            .position(|s| std::ptr::eq(s, statement))
        else {
            return Err(QueryError::NotPrepared(statement.name));
        };
        if self.phase != Phase::Ready {
            return Err(QueryError::NotConnected);
        }
        if self.column_types[index].is_none() {
            return Err(QueryError::Unavailable(statement.name));
        }
        if self.pending.len() >= self.options.max_queued {
            return Err(QueryError::QueueFull);
        }
        protocol::bind(&mut self.output, statement.name, params)
            .map_err(QueryError::Unencodable)?;
        protocol::execute(&mut self.output);
        protocol::sync(&mut self.output);
        self.pending.push_back(Pending {
            token: Some(token),
            statement: index,
            deadline: now + self.options.query_timeout,
        });
        Ok(())
    }

    /// A request needed this connection while it was down. If the last failure came before
    /// the connection was up (refused, timed out, the server still starting) and a retry may
    /// fix it, the next attempt comes no later than `MIN_ATTEMPT_GAP` after the last one
    /// began, so that the database is used again soon after it is back; never earlier.
    pub fn wanted(&mut self, _now: Instant) {
        if self.phase != Phase::Idle || self.parked || !self.retry_early {
            return;
        }
        let early = self.attempt_started + MIN_ATTEMPT_GAP;
        if self.retry_at.is_some_and(|at| at > early) {
            self.retry_at = Some(early);
        }
    }

    /// Gives the connection up and stays Idle until `unpark`: for a thread that hands back a
    /// connection slot it does not need. Every query held fails with `ConnectionLost`; a
    /// connected socket gets a Terminate in the output, for the driver to send if it likes.
    pub fn park(&mut self, _now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        if self.parked {
            return;
        }
        let connected = self.step() == Step::Io;
        if self.phase != Phase::Idle {
            self.drop_connection(sink);
        }
        if connected {
            protocol::terminate(&mut self.output);
        }
        self.parked = true;
    }

    /// Connects again (at once, or when a backoff still running from before `park` ends).
    pub fn unpark(&mut self, now: Instant) {
        if !self.parked {
            return;
        }
        self.parked = false;
        if self.retry_at.is_none_or(|at| at <= now) {
            self.start_attempt(now);
        }
    }

    pub fn is_parked(&self) -> bool {
        self.parked
    }

    /// Authenticated and every statement prepared or found unavailable: `query` accepts
    /// queries (of the available statements).
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Queries held, not answered yet.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// Why the last connection attempt failed or the last connection was lost; `None` again
    /// once a start-up succeeds.
    pub fn last_error(&self) -> Option<&DbError> {
        self.last_error.as_ref()
    }

    /// Queues a Terminate, for a driver about to close a connected socket for good (output
    /// always ends at a message boundary, so it is never inside another message).
    pub fn goodbye(&mut self) {
        if self.step() == Step::Io {
            protocol::terminate(&mut self.output);
        }
    }

    fn start_attempt(&mut self, now: Instant) {
        self.phase = Phase::Connect;
        self.attempt_started = now;
        self.retry_at = None;
        // A goodbye to the socket before is not sent on this one.
        self.output.clear();
    }

    /// Decodes and handles every complete message received.
    fn process(
        &mut self,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Result<(), DbError> {
        // Taken out so that rows can borrow it while `self` handles them.
        let buf = std::mem::take(&mut self.read_buf);
        let mut at = self.read_start;
        let mut result = Ok(());
        while at < self.read_end {
            match protocol::decode_within(&buf[at..self.read_end], self.options.max_message_len) {
                Ok(Some((message, used))) => {
                    at += used;
                    result = self.handle(message, now, sink);
                    if result.is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    result = Err(DbError::Protocol(e.to_string()));
                    break;
                }
            }
        }
        self.read_buf = buf;
        self.read_start = at;
        result
    }

    fn handle(
        &mut self,
        message: Message<'_>,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Result<(), DbError> {
        match self.phase {
            Phase::Ready => self.handle_answer(message, now, sink),
            Phase::Authenticating => match message {
                Message::Authentication(request) => self.authenticate(request, now),
                Message::ParameterStatus
                | Message::BackendKeyData
                | Message::NoticeResponse
                | Message::NegotiateProtocolVersion => Ok(()),
                Message::ErrorResponse(fields) => Err(DbError::server(fields)),
                Message::ReadyForQuery(_) if self.scram.is_none() => self.prepare_statements(),
                other => Err(unexpected(&other, "during start-up")),
            },
            Phase::Preparing => match message {
                Message::ParseComplete
                | Message::ParameterDescription
                | Message::ParameterStatus
                | Message::NoticeResponse => Ok(()),
                Message::RowDescription(description) => {
                    self.preparation = Preparation::Described(description.type_oids());
                    Ok(())
                }
                Message::NoData => {
                    self.preparation = Preparation::Described(Vec::new());
                    Ok(())
                }
                Message::ErrorResponse(fields) => self.preparation_refused(DbError::server(fields)),
                Message::ReadyForQuery(_) if self.column_types.len() < self.statements.len() => {
                    self.statement_prepared(now)
                }
                other => Err(unexpected(&other, "while preparing statements")),
            },
            Phase::Idle | Phase::Connect | Phase::Connecting => {
                Err(DbError::Protocol("data before start-up".into()))
            }
        }
    }

    fn handle_answer(
        &mut self,
        message: Message<'_>,
        now: Instant,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Result<(), DbError> {
        match message {
            Message::DataRow(data) => {
                let Some(front) = self.pending.front() else {
                    return Err(DbError::Protocol("a row with no query in flight".into()));
                };
                let Some(token) = front.token else {
                    return Err(DbError::Protocol("a row in answer to a Describe".into()));
                };
                self.front_rows += 1;
                self.front_bytes += data.size();
                let too_much = if self.front_rows > self.options.max_rows {
                    Some(format!("{} rows", self.options.max_rows))
                } else if self.front_bytes > self.options.max_result_bytes {
                    Some(format!("{} bytes of rows", self.options.max_result_bytes))
                } else {
                    None
                };
                if let Some(limit) = too_much {
                    // A broken or hostile server: the query fails, and the connection is
                    // replaced rather than drained, which could take unbounded time.
                    let error = DbError::Protocol(format!("a query answered more than {limit}"));
                    sink(token, Event::Failed(&error));
                    self.pending.pop_front();
                    return Err(error);
                }
                if self.front_error.is_none() {
                    let types = self.column_types[front.statement].as_deref().unwrap_or(&[]);
                    sink(token, Event::Row(Row { data, types }));
                }
            }
            Message::ErrorResponse(fields) => {
                let error = DbError::server(fields);
                let fatal = matches!(&error, DbError::Server { severity, .. }
                    if severity == "FATAL" || severity == "PANIC");
                if fatal || self.pending.is_empty() {
                    return Err(error);
                }
                self.front_error = Some(error);
            }
            Message::ReadyForQuery(_) => {
                let Some(front) = self.pending.pop_front() else {
                    return Err(DbError::Protocol(
                        "ReadyForQuery with no query in flight".into(),
                    ));
                };
                self.front_rows = 0;
                self.front_bytes = 0;
                match (front.token, self.front_error.take()) {
                    (Some(token), None) => sink(token, Event::Done),
                    (Some(token), Some(error)) => sink(token, Event::Failed(&error)),
                    (None, error) => self.reprepared(front.statement, error, now),
                }
                if !self.proven {
                    self.proven_now(now);
                }
            }
            Message::ParseComplete | Message::ParameterDescription if self.repreparing() => {}
            Message::RowDescription(description) if self.repreparing() => {
                self.preparation = Preparation::Described(description.type_oids());
            }
            Message::NoData if self.repreparing() => {
                self.preparation = Preparation::Described(Vec::new());
            }
            Message::BindComplete
            | Message::CommandComplete
            | Message::EmptyQueryResponse
            | Message::PortalSuspended
            | Message::ParameterStatus
            | Message::NoticeResponse
            | Message::NotificationResponse => {}
            other => return Err(unexpected(&other, "in a query's answer")),
        }
        Ok(())
    }

    /// Whether the answer being read is that of a statement prepared again.
    fn repreparing(&self) -> bool {
        self.pending
            .front()
            .is_some_and(|front| front.token.is_none())
    }

    /// Parse + Describe + Sync again for each statement still unavailable, queued behind
    /// the queries like one of them; `reprepared` takes each answer.
    fn reprepare(&mut self, now: Instant) {
        self.reprepare_at = None;
        for (index, statement) in self.statements.iter().enumerate() {
            if self.column_types[index].is_some() {
                continue;
            }
            let start = self.output.len();
            let written = protocol::parse(
                &mut self.output,
                statement.name,
                statement.sql,
                statement.param_types,
            )
            .and_then(|()| protocol::describe_statement(&mut self.output, statement.name));
            if written.is_err() {
                // Encoded once at start-up, it cannot fail now; were it to, nothing half
                // written stays in the output.
                self.output.truncate(start);
                continue;
            }
            protocol::sync(&mut self.output);
            self.pending.push_back(Pending {
                token: None,
                statement: index,
                deadline: now + self.options.query_timeout,
            });
        }
    }

    /// The answer to a statement prepared again: described, it is available from now on; if
    /// refused, it is tried again later (any error: a statement that prepared once at
    /// start-up elsewhere is no reason to give up the connection).
    fn reprepared(&mut self, index: usize, error: Option<DbError>, now: Instant) {
        let preparation = std::mem::replace(&mut self.preparation, Preparation::Waiting);
        if let (None, Preparation::Described(types)) = (error, preparation) {
            self.column_types[index] = Some(types);
            if self.logging {
                let name = self.statements[index].name;
                let line = format!(
                    "PostgreSQL database {} has what statement {name} needs now: prepared",
                    self.target
                );
                if first_time(line.clone()) {
                    crate::log!("{line}");
                }
            }
        }
        let waiting = self.pending.iter().any(|query| query.token.is_none());
        if !waiting && self.column_types.iter().any(Option::is_none) {
            self.reprepare_every = (self.reprepare_every * 2).min(REPREPARE_MAX);
            self.reprepare_at = Some(now + self.reprepare_every);
        }
    }

    /// The first query answered on this connection: the database works, so a failure from
    /// now on starts from the shortest backoff again.
    fn proven_now(&mut self, now: Instant) {
        self.proven = true;
        self.backoff.reset();
        if let Some(line) = self.log.recovered(&self.target, now) {
            if self.logging {
                crate::log!("{line}");
            }
        }
    }

    fn authenticate(&mut self, request: Auth<'_>, now: Instant) -> Result<(), DbError> {
        let target = self.target.clone();
        let config = target.config();
        match request {
            Auth::Ok => {
                if self.scram.is_some() {
                    return Err(DbError::Auth(
                        "server ended SCRAM without proving its signature".into(),
                    ));
                }
                if self.logging {
                    auth::log_method_once(self.auth_method, &self.target);
                }
            }
            Auth::Cleartext => {
                self.password_wanted(auth::Method::Cleartext)?;
                protocol::password(&mut self.output, &config.password)?;
            }
            Auth::Md5 { salt } => {
                self.password_wanted(auth::Method::Md5)?;
                protocol::password(
                    &mut self.output,
                    &auth::md5_password(&config.user, &config.password, salt),
                )?;
            }
            Auth::Sasl(mechanisms) => {
                if self.sasl_begun {
                    return Err(DbError::Auth("the server began SASL twice".into()));
                }
                self.sasl_begun = true;
                self.auth_method = auth::Method::ScramSha256;
                let mechanism = auth::choose_sasl_mechanism(mechanisms).map_err(DbError::Auth)?;
                let scram = Scram::with_random_nonce(&config.password).map_err(DbError::Auth)?;
                protocol::sasl_initial_response(
                    &mut self.output,
                    mechanism,
                    scram.client_first().as_bytes(),
                )?;
                self.scram = Some(scram);
            }
            Auth::SaslContinue(server_first) => {
                let scram = self
                    .scram
                    .as_mut()
                    .ok_or_else(|| DbError::Protocol("SASL continue without SASL".into()))?;
                scram
                    .receive_server_first(server_first)
                    .map_err(DbError::Auth)?;
                self.continue_scram(now)?;
            }
            Auth::SaslFinal(server_final) => {
                if self.scram_poll.is_some() {
                    return Err(DbError::Protocol(
                        "SASL final before the client's final message".into(),
                    ));
                }
                let scram = self
                    .scram
                    .take()
                    .ok_or_else(|| DbError::Protocol("SASL final without SASL".into()))?;
                scram
                    .verify_server_final(server_final)
                    .map_err(DbError::Auth)?;
            }
            Auth::Unsupported(code) => return Err(DbError::Auth(auth::unsupported_method(code))),
        }
        Ok(())
    }

    /// Whether the password may go out for `method` (see `auth::password_policy`).
    fn password_wanted(&mut self, method: auth::Method) -> Result<(), DbError> {
        let config = self.target.config();
        auth::password_policy(
            method,
            self.sasl_begun,
            matches!(config.host, Host::Tcp(_)),
            config.allow_cleartext,
        )
        .map_err(DbError::Auth)?;
        self.auth_method = method;
        Ok(())
    }

    /// Sends SCRAM's client-final message if its key is derived, else looks again shortly.
    fn continue_scram(&mut self, now: Instant) -> Result<(), DbError> {
        let Some(scram) = self.scram.as_mut() else {
            self.scram_poll = None;
            return Ok(());
        };
        match scram.client_final().map_err(DbError::Auth)? {
            Some(message) => {
                protocol::sasl_response(&mut self.output, message.as_bytes())?;
                self.scram_poll = None;
            }
            None => self.scram_poll = Some(now + SCRAM_POLL),
        }
        Ok(())
    }

    /// Each statement's Parse + Describe in a Sync group of its own: a Parse the server
    /// refuses makes it skip to the next Sync, so one missing table spoils only its own
    /// statement. Neither is an execution: `pg_stat_statements` counts none of them.
    fn prepare_statements(&mut self) -> Result<(), DbError> {
        self.phase = Phase::Preparing;
        self.column_types.clear();
        self.preparation = Preparation::Waiting;
        self.unavailable.clear();
        for statement in self.statements {
            protocol::parse(
                &mut self.output,
                statement.name,
                statement.sql,
                statement.param_types,
            )?;
            protocol::describe_statement(&mut self.output, statement.name)?;
            protocol::sync(&mut self.output);
        }
        Ok(())
    }

    /// An ErrorResponse to the statement being prepared: one of SQLSTATE class 42 (what it
    /// names is not in this database) makes it unavailable; any other fails the start-up.
    fn preparation_refused(&mut self, error: DbError) -> Result<(), DbError> {
        let name = self
            .statements
            .get(self.column_types.len())
            .map_or("?", |s| s.name);
        match error {
            DbError::Server {
                severity,
                code,
                message,
            } if code.starts_with("42") && severity == "ERROR" => {
                self.preparation = Preparation::Unavailable(message);
                Ok(())
            }
            DbError::Server {
                severity,
                code,
                message,
            } => Err(DbError::Server {
                severity,
                code,
                message: format!("preparing statement {name}: {message}"),
            }),
            other => Err(other),
        }
    }

    /// The ReadyForQuery that ends one statement's Sync group; after the last, the
    /// connection is ready.
    fn statement_prepared(&mut self, now: Instant) -> Result<(), DbError> {
        let statement = &self.statements[self.column_types.len()];
        match std::mem::replace(&mut self.preparation, Preparation::Waiting) {
            Preparation::Waiting => {
                return Err(DbError::Protocol(format!(
                    "no description of statement {}",
                    statement.name
                )))
            }
            Preparation::Described(types) => self.column_types.push(Some(types)),
            Preparation::Unavailable(why) => {
                self.unavailable.push((statement.name, why));
                self.column_types.push(None);
            }
        }
        if self.column_types.len() == self.statements.len() {
            self.phase = Phase::Ready;
            self.startup_deadline = None;
            self.last_error = None;
            self.reprepare_every = REPREPARE_MIN;
            self.reprepare_at = (!self.unavailable.is_empty()).then(|| now + REPREPARE_MIN);
            if let Some(line) = unavailable_line(&self.target, &self.unavailable) {
                if self.logging && first_time(line.clone()) {
                    crate::log!("{line}");
                }
            }
        }
        Ok(())
    }

    /// Gives the connection up: fails every query held, logs, and schedules the next attempt.
    fn fail(&mut self, error: DbError, now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        let phase = self.phase;
        let proven = self.proven;
        if matches!(phase, Phase::Connect | Phase::Connecting) {
            // The address may be stale (the database moved): look the name up again.
            self.target.connect_failed();
        }
        self.drop_connection(sink);
        let permanent = error.is_permanent();
        // Refused, timed out, or the server still starting: it may be back any moment.
        self.retry_early = phase != Phase::Ready && !permanent;
        self.retry_at = Some(now + self.backoff.next(permanent));
        let reason = match (&error, phase) {
            (DbError::Timeout, Phase::Ready) => format!(
                "no answer to a query within {} ms",
                self.options.query_timeout.as_millis()
            ),
            (DbError::Timeout, _) => format!(
                "start-up not done within {} ms",
                self.options.connect_timeout.as_millis()
            ),
            (error, _) => error.to_string(),
        };
        if let Some(line) =
            self.log
                .failed(&self.target, failure_kind(&error), &reason, proven, now)
        {
            if self.logging {
                crate::log!("{line}");
            }
        }
        self.last_error = Some(error);
    }

    /// Forgets the socket and everything on it; the driver sees `Step::Idle` and a new
    /// generation.
    fn drop_connection(&mut self, sink: &mut impl FnMut(u64, Event<'_>)) {
        self.generation += 1;
        self.phase = Phase::Idle;
        self.startup_deadline = None;
        self.proven = false;
        self.scram = None;
        self.sasl_begun = false;
        self.auth_method = auth::Method::Trust;
        self.scram_poll = None;
        self.front_error = None;
        self.front_rows = 0;
        self.front_bytes = 0;
        self.output.clear();
        self.read_start = 0;
        self.read_end = 0;
        if self.read_buf.len() > 4 * READ_BUF_INITIAL {
            // Grown for one large message: not kept for the next connection.
            self.read_buf = vec![0; READ_BUF_INITIAL];
        }
        self.reprepare_at = None;
        self.preparation = Preparation::Waiting;
        while let Some(query) = self.pending.pop_front() {
            if let Some(token) = query.token {
                sink(token, Event::Failed(&CONNECTION_LOST));
            }
        }
    }
}

/// The line that says which statements a connection found unavailable, if any.
fn unavailable_line(target: &Target, unavailable: &[(&'static str, String)]) -> Option<String> {
    if unavailable.is_empty() {
        return None;
    }
    let list: Vec<String> = unavailable
        .iter()
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    Some(format!(
        "PostgreSQL database {target} cannot prepare statements {}: \
         the routes that use them answer as if the database were down",
        list.join(", ")
    ))
}

/// Lines logged once per process: every connection of every thread finds the same
/// statements unavailable, and reconnects find them again.
static LOGGED_ONCE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether `line` is new to this process (and remembers it).
fn first_time(line: String) -> bool {
    let mut logged = LOGGED_ONCE
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if logged.contains(&line) || logged.len() >= MAX_REASONS_LOGGED {
        return false;
    }
    logged.push(line);
    true
}

fn unexpected(message: &Message<'_>, when: &str) -> DbError {
    DbError::Protocol(format!("unexpected {} {when}", message.name()))
}

/// What makes two failures "the same" for the log: the SQLSTATE, the OS error, the kind.
fn failure_kind(error: &DbError) -> String {
    match error {
        DbError::Server { code, .. } => format!("server {code}"),
        DbError::Io(e) => match e.raw_os_error() {
            Some(code) => format!("os {code}"),
            None => format!("io {:?}", e.kind()),
        },
        DbError::ConnectionLost => "lost".into(),
        DbError::Timeout => "timeout".into(),
        DbError::Protocol(what) => format!("protocol {what}"),
        DbError::Auth(what) => format!("auth {what}"),
        DbError::Column(what) => format!("column {what}"),
        DbError::Encode(error) => format!("encode {error}"),
        DbError::NotPrepared(name) => format!("not prepared {name}"),
    }
}

/// The pause before the next attempt: from `BACKOFF_MIN`, doubling with each failure up to
/// `BACKOFF_MAX` (or `BACKOFF_MAX_PERMANENT` after a permanent error), with jitter.
struct Backoff {
    base: Duration,
    rng: fastrand::Rng,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            base: BACKOFF_MIN,
            rng: fastrand::Rng::new(),
        }
    }

    fn next(&mut self, permanent: bool) -> Duration {
        let factor = 1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * self.rng.f64();
        let pause = self.base.mul_f64(factor);
        let cap = if permanent {
            BACKOFF_MAX_PERMANENT
        } else {
            BACKOFF_MAX
        };
        self.base = (self.base * 2).min(cap);
        pause
    }

    fn reset(&mut self) {
        self.base = BACKOFF_MIN;
    }
}

/// What a connection logs about its failures: one line when an outage begins, one per new
/// kind of failure (a few at most), a summary at most once a minute while it lasts, and one
/// when a connection has proven itself again. Never a line per attempt.
#[derive(Default)]
struct FailureLog {
    outage: Option<Outage>,
}

struct Outage {
    began: Instant,
    failed_attempts: u64,
    last_line: Instant,
    kinds_logged: Vec<String>,
}

impl FailureLog {
    /// A failure: the line to log, if any. `lost` says a proven connection went away.
    fn failed(
        &mut self,
        target: &Target,
        kind: String,
        reason: &str,
        lost: bool,
        now: Instant,
    ) -> Option<String> {
        let Some(outage) = &mut self.outage else {
            self.outage = Some(Outage {
                began: now,
                failed_attempts: u64::from(!lost),
                last_line: now,
                kinds_logged: vec![kind],
            });
            return Some(match lost {
                true => format!("PostgreSQL connection to {target} lost ({reason}); reconnecting"),
                false => {
                    format!("PostgreSQL connection to {target} failed ({reason}); retrying")
                }
            });
        };
        outage.failed_attempts += 1;
        let attempts = outage.failed_attempts;
        if !outage.kinds_logged.contains(&kind) && outage.kinds_logged.len() < MAX_REASONS_LOGGED {
            outage.kinds_logged.push(kind);
            outage.last_line = now;
            return Some(format!(
                "PostgreSQL connection to {target} failed ({reason}); \
                 {attempts} failed attempts so far, retrying"
            ));
        }
        if now.saturating_duration_since(outage.last_line) >= FAILURE_SUMMARY_EVERY {
            let line = format!(
                "PostgreSQL connection to {target} still failing ({reason}): \
                 {attempts} failed attempts in {} s",
                now.saturating_duration_since(outage.began).as_secs()
            );
            outage.last_line = now;
            return Some(line);
        }
        None
    }

    /// A connection answered a query: the line that ends an outage, if there was one.
    fn recovered(&mut self, target: &Target, now: Instant) -> Option<String> {
        let outage = self.outage.take()?;
        Some(format!(
            "PostgreSQL connection to {target} re-established after {} failed attempts \
             ({} ms)",
            outage.failed_attempts,
            now.saturating_duration_since(outage.began).as_millis()
        ))
    }
}

#[cfg(test)]
mod tests;
