//! One non-blocking PostgreSQL connection, driven by the caller's event loop.
//!
//! Start-up (connect, authenticate, Parse + Describe every statement) happens inside the
//! connection; afterwards each `query` appends exactly Bind/Execute/Sync to the write buffer,
//! `flush` sends everything buffered with one `send`, and `on_readable` decodes the answers and
//! hands each query's rows, then `Done` or `Failed`, to the sink with the query's token, in
//! order. A lost connection fails every query it holds and reconnects with a capped backoff.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::auth::{self, Scram};
use super::protocol::{
    self, Auth, DataRow, ErrorFields, Message, BPCHAR_OID, INT4_OID, NAME_OID, TEXT_OID,
    VARCHAR_OID,
};
use super::target::{socket_path, Config, Host};

pub use super::protocol::Param;

/// Queries a connection holds (written or not) before `query` answers `QueueFull`: TFB's worst
/// case is 512 connections x 20 queries spread over the threads.
pub const MAX_QUEUED: usize = 16_384;
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Low enough that a restarted database is back in use within about a second of accepting
/// connections; a refused connect costs next to nothing.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Connect + authenticate + prepare must finish within this, or the attempt counts as failed.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
const READ_BUF_INITIAL: usize = 64 * 1024;
/// Once this much of the write buffer has been sent, the unsent rest moves to the front.
const WRITE_COMPACT_AT: usize = 64 * 1024;

/// A statement prepared once per connection under `name`.
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

    pub fn int4(&self, index: usize) -> Result<i32, DbError> {
        let value = self.column(index, &[INT4_OID], "int4")?;
        let bytes: [u8; 4] = value
            .try_into()
            .map_err(|_| DbError::Column(format!("column {index}: int4 of the wrong size")))?;
        Ok(i32::from_be_bytes(bytes))
    }

    /// A text, varchar, char or name column (binary format: the UTF-8 bytes themselves).
    pub fn text(&self, index: usize) -> Result<&'a str, DbError> {
        let value = self.column(
            index,
            &[TEXT_OID, VARCHAR_OID, BPCHAR_OID, NAME_OID],
            "text",
        )?;
        std::str::from_utf8(value)
            .map_err(|_| DbError::Column(format!("column {index} is not UTF-8")))
    }
}

#[derive(Debug)]
pub enum DbError {
    /// An ErrorResponse from the server.
    Server {
        severity: String,
        code: String,
        message: String,
    },
    /// The connection went away while the query was queued or in flight.
    ConnectionLost,
    /// The server sent something this client cannot make sense of.
    Protocol(String),
    Io(io::Error),
    /// Authentication this client cannot do or that failed on the client side.
    Auth(String),
    Timeout,
    /// A column read as the wrong type, a NULL, or a column past the end.
    Column(String),
}

/// By hand because `io::Error` is not `Clone`: kind and text are kept.
impl Clone for DbError {
    fn clone(&self) -> DbError {
        match self {
            DbError::Server {
                severity,
                code,
                message,
            } => DbError::Server {
                severity: severity.clone(),
                code: code.clone(),
                message: message.clone(),
            },
            DbError::ConnectionLost => DbError::ConnectionLost,
            DbError::Protocol(what) => DbError::Protocol(what.clone()),
            DbError::Io(e) => DbError::Io(io::Error::new(e.kind(), e.to_string())),
            DbError::Auth(what) => DbError::Auth(what.clone()),
            DbError::Timeout => DbError::Timeout,
            DbError::Column(what) => DbError::Column(what.clone()),
        }
    }
}

static CONNECTION_LOST: DbError = DbError::ConnectionLost;

impl DbError {
    fn server(fields: ErrorFields<'_>) -> DbError {
        let field = |kind| fields.field(kind).unwrap_or("").to_string();
        DbError::Server {
            // 'V' is the untranslated severity; older servers send only the localized 'S'.
            severity: fields
                .field(b'V')
                .or(fields.field(b'S'))
                .unwrap_or("")
                .to_string(),
            code: field(b'C'),
            message: field(b'M'),
        }
    }

    /// Errors that retrying the same start-up will not fix (bad password, no such role or
    /// database, a method this client lacks).
    pub fn is_permanent(&self) -> bool {
        match self {
            DbError::Server { code, .. } => code.starts_with("28") || code.starts_with("3D"),
            DbError::Auth(_) => true,
            _ => false,
        }
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::Server {
                severity,
                code,
                message,
            } => write!(f, "{severity} {code}: {message}"),
            DbError::ConnectionLost => f.write_str("connection to the database lost"),
            DbError::Protocol(what) => write!(f, "protocol error: {what}"),
            DbError::Io(e) => write!(f, "{e}"),
            DbError::Auth(what) => f.write_str(what),
            DbError::Timeout => f.write_str("timed out"),
            DbError::Column(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for DbError {}

/// Why `query` refused a query at once; the caller answers 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryError {
    NotConnected,
    QueueFull,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueryError::NotConnected => "database connection not ready",
            QueryError::QueueFull => "database queue full",
        })
    }
}

impl std::error::Error for QueryError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No socket; `deadline` is when to connect again.
    Waiting,
    /// Non-blocking connect in progress; writable means done.
    Connecting,
    Authenticating,
    /// Parse + Describe of every statement sent, waiting for their ReadyForQuery.
    Preparing,
    Ready,
}

struct Pending {
    token: u64,
    statement: usize,
}

pub struct PgConn {
    config: Arc<Config>,
    statements: &'static [Statement],
    socket: Option<OwnedFd>,
    generation: u64,
    phase: Phase,
    /// Reconnect time while Waiting, start-up timeout while connecting.
    deadline: Option<Instant>,
    backoff: Duration,
    scram: Option<Scram>,
    /// Result column types of each statement, from Describe at start-up.
    column_types: Vec<Vec<u32>>,
    /// Queries sent or buffered, oldest first; the front one is being answered.
    pending: VecDeque<Pending>,
    /// The ErrorResponse of the front query, delivered at its ReadyForQuery.
    front_error: Option<DbError>,
    write_buf: Vec<u8>,
    written: usize,
    read_buf: Vec<u8>,
    read_start: usize,
    read_end: usize,
    last_error: Option<DbError>,
    /// The last failure logged, so a long outage logs each distinct reason once.
    logged_failure: Option<String>,
}

impl PgConn {
    /// Starts connecting at once (non-blocking).
    pub fn new(config: Arc<Config>, statements: &'static [Statement]) -> PgConn {
        let mut conn = PgConn {
            config,
            statements,
            socket: None,
            generation: 0,
            phase: Phase::Waiting,
            deadline: None,
            backoff: BACKOFF_MIN,
            scram: None,
            column_types: Vec::with_capacity(statements.len()),
            pending: VecDeque::with_capacity(1024),
            front_error: None,
            write_buf: Vec::with_capacity(64 * 1024),
            written: 0,
            read_buf: vec![0; READ_BUF_INITIAL],
            read_start: 0,
            read_end: 0,
            last_error: None,
            logged_failure: None,
        };
        conn.connect(Instant::now());
        conn
    }

    /// Authenticated and every statement prepared.
    pub fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Queries queued or in flight, not answered yet.
    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// The current socket and a generation number that changes with every new socket.
    pub fn socket(&self) -> Option<(RawFd, u64)> {
        self.socket
            .as_ref()
            .map(|s| (s.as_raw_fd(), self.generation))
    }

    /// Register EPOLLOUT only while this is true.
    pub fn wants_write(&self) -> bool {
        self.socket.is_some() && (self.phase == Phase::Connecting || self.has_unwritten())
    }

    /// When `on_timer` must be called (reconnect backoff or start-up timeout).
    pub fn next_timer(&self) -> Option<Instant> {
        self.deadline
    }

    /// Why the last connection attempt failed or the last connection was lost; `None` again
    /// once a start-up succeeds.
    pub fn last_error(&self) -> Option<&DbError> {
        self.last_error.as_ref()
    }

    /// Appends Bind/Execute/Sync for one query; `flush` sends it.
    pub fn query(
        &mut self,
        statement: usize,
        params: &[Param],
        token: u64,
    ) -> Result<(), QueryError> {
        if self.phase != Phase::Ready {
            return Err(QueryError::NotConnected);
        }
        if self.pending.len() >= MAX_QUEUED {
            return Err(QueryError::QueueFull);
        }
        protocol::bind(&mut self.write_buf, self.statements[statement].name, params);
        protocol::execute(&mut self.write_buf);
        protocol::sync(&mut self.write_buf);
        self.pending.push_back(Pending { token, statement });
        Ok(())
    }

    /// Sends what is buffered with one `send`; the rest waits for `on_writable`.
    pub fn flush(&mut self, sink: &mut impl FnMut(u64, Event<'_>)) {
        if matches!(self.phase, Phase::Waiting | Phase::Connecting) {
            return;
        }
        if let Err(e) = self.write_some() {
            self.fail(e, sink);
        }
    }

    pub fn on_writable(&mut self, sink: &mut impl FnMut(u64, Event<'_>)) {
        let result = match self.phase {
            Phase::Waiting => Ok(()),
            Phase::Connecting => self.connected(),
            _ => self.write_some(),
        };
        if let Err(e) = result {
            self.fail(e, sink);
        }
    }

    /// Reads until the socket is empty, decoding and delivering as it goes.
    pub fn on_readable(&mut self, sink: &mut impl FnMut(u64, Event<'_>)) {
        while let Some(fd) = self.socket.as_ref().map(|s| s.as_raw_fd()) {
            if self.phase == Phase::Connecting {
                // Readable before writable: the connect failed; on_writable reports why.
                return self.on_writable(sink);
            }
            if let Err(e) = self.make_read_room() {
                return self.fail(e, sink);
            }
            let room = &mut self.read_buf[self.read_end..];
            // SAFETY: room is a valid writable buffer of room.len() bytes.
            let n =
                unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), libc::MSG_DONTWAIT) };
            if n == 0 {
                return self.fail(
                    DbError::Protocol("server closed the connection".into()),
                    sink,
                );
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => continue,
                    _ => return self.fail(DbError::Io(e), sink),
                }
            }
            let drained = (n as usize) < room.len();
            self.read_end += n as usize;
            if let Err(e) = self.process(sink) {
                return self.fail(e, sink);
            }
            // A short read emptied the socket: skip the recv that would say EAGAIN. Data
            // arriving later raises a new readiness event, edge- or level-triggered.
            if drained {
                return;
            }
        }
    }

    pub fn on_timer(&mut self, now: Instant, sink: &mut impl FnMut(u64, Event<'_>)) {
        match self.deadline {
            Some(deadline) if deadline <= now => {}
            _ => return,
        }
        if self.phase == Phase::Waiting {
            self.connect(now);
        } else if self.phase != Phase::Ready {
            self.fail(DbError::Timeout, sink);
        }
    }

    fn has_unwritten(&self) -> bool {
        self.written < self.write_buf.len()
    }

    fn connect(&mut self, now: Instant) {
        match open_socket(&self.config) {
            Ok(socket) => {
                self.socket = Some(socket);
                self.generation += 1;
                self.phase = Phase::Connecting;
                self.deadline = Some(now + STARTUP_TIMEOUT);
            }
            Err(e) => self.fail(e, &mut |_, _| {}),
        }
    }

    /// The non-blocking connect finished: check its outcome and send the StartupMessage.
    fn connected(&mut self) -> Result<(), DbError> {
        let fd = self.socket.as_ref().map(|s| s.as_raw_fd()).unwrap_or(-1);
        let mut error: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: error and len are valid for getsockopt's out-parameters.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut error as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(DbError::Io(io::Error::last_os_error()));
        }
        if error != 0 {
            return Err(DbError::Io(io::Error::from_raw_os_error(error)));
        }
        self.phase = Phase::Authenticating;
        protocol::startup(
            &mut self.write_buf,
            &self.config.user,
            &self.config.database,
        );
        self.write_some()
    }

    fn write_some(&mut self) -> Result<(), DbError> {
        let Some(fd) = self.socket.as_ref().map(|s| s.as_raw_fd()) else {
            return Ok(());
        };
        while self.has_unwritten() {
            let out = &self.write_buf[self.written..];
            // SAFETY: out is a valid readable buffer of out.len() bytes.
            let n = unsafe {
                libc::send(
                    fd,
                    out.as_ptr().cast(),
                    out.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(DbError::Io(e)),
                }
            }
            self.written += n as usize;
            // One send per flush: a short write means the socket buffer is full.
            break;
        }
        if !self.has_unwritten() {
            self.write_buf.clear();
            self.written = 0;
        } else if self.written >= WRITE_COMPACT_AT {
            self.write_buf.drain(..self.written);
            self.written = 0;
        }
        Ok(())
    }

    /// Makes room at the end of the read buffer: reset when drained, compact, or grow.
    fn make_read_room(&mut self) -> Result<(), DbError> {
        if self.read_start == self.read_end {
            self.read_start = 0;
            self.read_end = 0;
        }
        if self.read_end < self.read_buf.len() {
            return Ok(());
        }
        if self.read_start > 0 {
            self.read_buf.copy_within(self.read_start..self.read_end, 0);
            self.read_end -= self.read_start;
            self.read_start = 0;
        } else if self.read_buf.len() <= protocol::MAX_MESSAGE_LEN {
            // One message fills the whole buffer: the decoder has accepted its length.
            let len = self.read_buf.len() * 2;
            self.read_buf.resize(len, 0);
        } else {
            return Err(DbError::Protocol("message too large".into()));
        }
        Ok(())
    }

    /// Decodes and handles every complete message in the read buffer.
    fn process(&mut self, sink: &mut impl FnMut(u64, Event<'_>)) -> Result<(), DbError> {
        let buf = std::mem::take(&mut self.read_buf);
        let mut at = self.read_start;
        let mut result = Ok(());
        while at < self.read_end {
            match protocol::decode(&buf[at..self.read_end]) {
                Ok(Some((message, used))) => {
                    at += used;
                    result = self.handle(message, sink);
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
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Result<(), DbError> {
        match self.phase {
            Phase::Ready => self.handle_answer(message, sink),
            Phase::Authenticating => match message {
                Message::Authentication(request) => self.authenticate(request),
                Message::ParameterStatus
                | Message::BackendKeyData
                | Message::NoticeResponse
                | Message::NegotiateProtocolVersion => Ok(()),
                Message::ErrorResponse(fields) => Err(DbError::server(fields)),
                Message::ReadyForQuery(_) => self.prepare_statements(),
                other => Err(unexpected(&other, "during start-up")),
            },
            Phase::Preparing => match message {
                Message::ParseComplete
                | Message::ParameterDescription
                | Message::ParameterStatus
                | Message::NoticeResponse => Ok(()),
                Message::RowDescription(description) => {
                    self.column_types.push(description.type_oids());
                    Ok(())
                }
                Message::NoData => {
                    self.column_types.push(Vec::new());
                    Ok(())
                }
                Message::ErrorResponse(fields) => {
                    let name = self
                        .statements
                        .get(self.column_types.len())
                        .map_or("?", |s| s.name);
                    eprintln!("gnosis: PostgreSQL could not prepare statement {name}");
                    Err(DbError::server(fields))
                }
                Message::ReadyForQuery(_) if self.column_types.len() == self.statements.len() => {
                    self.became_ready();
                    Ok(())
                }
                other => Err(unexpected(&other, "while preparing statements")),
            },
            Phase::Waiting | Phase::Connecting => {
                Err(DbError::Protocol("data before start-up".into()))
            }
        }
    }

    fn handle_answer(
        &mut self,
        message: Message<'_>,
        sink: &mut impl FnMut(u64, Event<'_>),
    ) -> Result<(), DbError> {
        match message {
            Message::DataRow(data) => {
                let Some(front) = self.pending.front() else {
                    return Err(DbError::Protocol("a row with no query in flight".into()));
                };
                if self.front_error.is_none() {
                    let types = &self.column_types[front.statement];
                    sink(front.token, Event::Row(Row { data, types }));
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
                match self.front_error.take() {
                    None => sink(front.token, Event::Done),
                    Some(error) => sink(front.token, Event::Failed(&error)),
                }
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

    fn authenticate(&mut self, request: Auth<'_>) -> Result<(), DbError> {
        let config = &*self.config;
        match request {
            Auth::Ok => {
                if self.scram.is_some() {
                    return Err(DbError::Auth(
                        "server ended SCRAM without proving its signature".into(),
                    ));
                }
                return Ok(());
            }
            Auth::Cleartext => protocol::password(&mut self.write_buf, &config.password),
            Auth::Md5 { salt } => protocol::password(
                &mut self.write_buf,
                &auth::md5_password(&config.user, &config.password, salt),
            ),
            Auth::Sasl(mechanisms) => {
                let mechanism = auth::choose_sasl_mechanism(mechanisms).map_err(DbError::Auth)?;
                let scram = Scram::with_random_nonce(&config.password).map_err(DbError::Auth)?;
                protocol::sasl_initial_response(
                    &mut self.write_buf,
                    mechanism,
                    scram.client_first().as_bytes(),
                );
                self.scram = Some(scram);
            }
            Auth::SaslContinue(server_first) => {
                let scram = self
                    .scram
                    .as_mut()
                    .ok_or_else(|| DbError::Protocol("SASL continue without SASL".into()))?;
                let client_final = scram.client_final(server_first).map_err(DbError::Auth)?;
                protocol::sasl_response(&mut self.write_buf, client_final.as_bytes());
            }
            Auth::SaslFinal(server_final) => {
                let scram = self
                    .scram
                    .take()
                    .ok_or_else(|| DbError::Protocol("SASL final without SASL".into()))?;
                scram
                    .verify_server_final(server_final)
                    .map_err(DbError::Auth)?;
                return Ok(());
            }
            Auth::Unsupported(code) => return Err(DbError::Auth(auth::unsupported_method(code))),
        }
        self.write_some()
    }

    fn prepare_statements(&mut self) -> Result<(), DbError> {
        self.phase = Phase::Preparing;
        self.column_types.clear();
        for statement in self.statements {
            protocol::parse(
                &mut self.write_buf,
                statement.name,
                statement.sql,
                statement.param_types,
            );
            protocol::describe_statement(&mut self.write_buf, statement.name);
        }
        protocol::sync(&mut self.write_buf);
        self.write_some()
    }

    fn became_ready(&mut self) {
        self.phase = Phase::Ready;
        self.deadline = None;
        self.backoff = BACKOFF_MIN;
        if self.last_error.take().is_some() {
            eprintln!(
                "gnosis: PostgreSQL connection re-established ({})",
                self.config
            );
        }
        self.logged_failure = None;
    }

    /// Drops the socket, fails every query held, and schedules a reconnect.
    fn fail(&mut self, error: DbError, sink: &mut impl FnMut(u64, Event<'_>)) {
        let was_ready = self.phase == Phase::Ready;
        self.socket = None;
        self.phase = Phase::Waiting;
        self.scram = None;
        self.front_error = None;
        self.write_buf.clear();
        self.written = 0;
        self.read_start = 0;
        self.read_end = 0;
        while let Some(query) = self.pending.pop_front() {
            sink(query.token, Event::Failed(&CONNECTION_LOST));
        }
        let reason = error.to_string();
        if was_ready {
            eprintln!("gnosis: PostgreSQL connection lost ({reason}); reconnecting");
        } else if self.logged_failure.as_deref() != Some(&reason) {
            eprintln!(
                "gnosis: PostgreSQL connection to {} failed ({reason}); retrying",
                self.config
            );
        }
        self.logged_failure = Some(reason);
        self.last_error = Some(error);
        self.deadline = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }
}

impl Drop for PgConn {
    /// Says goodbye (Terminate) when no half-written message is in the way.
    fn drop(&mut self) {
        if let (Some(socket), true) = (&self.socket, self.phase == Phase::Ready) {
            if !self.has_unwritten() {
                let mut bye = Vec::with_capacity(5);
                protocol::terminate(&mut bye);
                // SAFETY: bye is a valid readable buffer; failure is irrelevant on close.
                unsafe {
                    libc::send(
                        socket.as_raw_fd(),
                        bye.as_ptr().cast(),
                        bye.len(),
                        libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                    );
                }
            }
        }
    }
}

fn unexpected(message: &Message<'_>, when: &str) -> DbError {
    DbError::Protocol(format!("unexpected {} {when}", message.name()))
}

/// A non-blocking socket with a connect started (TCP) or done (Unix).
fn open_socket(config: &Config) -> Result<OwnedFd, DbError> {
    match &config.host {
        Host::Unix(dir) => {
            let path = socket_path(dir, config.port);
            let bytes = path.as_os_str().as_encoded_bytes();
            // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
            let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
            if bytes.len() >= addr.sun_path.len() {
                return Err(DbError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "socket path too long",
                )));
            }
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
                *dst = src as libc::c_char;
            }
            let socket = new_socket(libc::AF_UNIX)?;
            start_connect(
                &socket,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>(),
            )?;
            Ok(socket)
        }
        Host::Tcp(host) => {
            // Resolved on every attempt: the database's address may change across restarts.
            let addrs: Vec<SocketAddr> = (host.as_str(), config.port)
                .to_socket_addrs()
                .map_err(DbError::Io)?
                .collect();
            let addr = addrs
                .iter()
                .find(|a| a.is_ipv4())
                .or(addrs.first())
                .ok_or_else(|| {
                    DbError::Io(io::Error::new(io::ErrorKind::NotFound, "no address"))
                })?;
            let socket = match addr {
                SocketAddr::V4(v4) => {
                    let socket = new_socket(libc::AF_INET)?;
                    let sin = libc::sockaddr_in {
                        sin_family: libc::AF_INET as libc::sa_family_t,
                        sin_port: v4.port().to_be(),
                        sin_addr: libc::in_addr {
                            s_addr: u32::from(*v4.ip()).to_be(),
                        },
                        sin_zero: [0; 8],
                    };
                    start_connect(
                        &socket,
                        (&sin as *const libc::sockaddr_in).cast(),
                        std::mem::size_of::<libc::sockaddr_in>(),
                    )?;
                    socket
                }
                SocketAddr::V6(v6) => {
                    let socket = new_socket(libc::AF_INET6)?;
                    let sin6 = libc::sockaddr_in6 {
                        sin6_family: libc::AF_INET6 as libc::sa_family_t,
                        sin6_port: v6.port().to_be(),
                        sin6_flowinfo: 0,
                        sin6_addr: libc::in6_addr {
                            s6_addr: v6.ip().octets(),
                        },
                        sin6_scope_id: v6.scope_id(),
                    };
                    start_connect(
                        &socket,
                        (&sin6 as *const libc::sockaddr_in6).cast(),
                        std::mem::size_of::<libc::sockaddr_in6>(),
                    )?;
                    socket
                }
            };
            let one: libc::c_int = 1;
            // SAFETY: a valid socket and a c_int option value.
            unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&one as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            Ok(socket)
        }
    }
}

fn new_socket(family: libc::c_int) -> Result<OwnedFd, DbError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(DbError::Io(io::Error::last_os_error()));
    }
    // SAFETY: fd is a new socket this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn start_connect(socket: &OwnedFd, addr: *const libc::sockaddr, len: usize) -> Result<(), DbError> {
    // SAFETY: addr points to a sockaddr of len bytes owned by the caller.
    let rc = unsafe { libc::connect(socket.as_raw_fd(), addr, len as libc::socklen_t) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok(())
    } else {
        Err(DbError::Io(e))
    }
}
