//! Making statements ready: the start-up of a connection (authentication from the
//! StartupMessage to the first ReadyForQuery, then every statement's Parse + Describe, each in
//! its own Sync group), and the same preparation again later, while the connection serves,
//! for a statement the database lacked at first.

use std::time::{Duration, Instant};

use super::setup::{Setup, Statement};
use crate::pg::auth::{self, Scram};
use crate::pg::error::DbError;
use crate::pg::protocol::{self, Auth, EncodeError, Message};
use crate::pg::target::Host;

/// How often to look whether a SCRAM key being derived on a helper thread is there.
const SCRAM_POLL: Duration = Duration::from_millis(2);
/// A statement the database could not prepare is tried again this long after, then at
/// doubling intervals up to `REPREPARE_MAX`: a schema loaded just after the server started
/// is found within a second or two, a table that never comes costs a refused Parse now and
/// then (and a line in the database's log).
pub const REPREPARE_MIN: Duration = Duration::from_secs(1);
pub const REPREPARE_MAX: Duration = Duration::from_secs(30);

/// Result column types of each statement, from its Describe; `None` for one the database
/// could not prepare (unavailable on this connection).
pub(super) type ColumnTypes = Vec<Option<Vec<u32>>>;

/// From the connected socket until every statement is prepared or found unavailable.
pub(super) struct Handshake {
    /// When the start-up counts as failed.
    deadline: Instant,
    stage: Stage,
}

enum Stage {
    /// StartupMessage sent; authentication until the first ReadyForQuery.
    Authenticating(Authentication),
    /// Parse + Describe + Sync of every statement sent, waiting for each one's ReadyForQuery.
    Preparing(Preparing),
}

#[derive(Default)]
struct Authentication {
    scram: Option<Scram>,
    /// The method the server asked for last, logged once authentication succeeds. Once it
    /// is SCRAM, a password asked for in clear or as MD5 is a downgrade, refused.
    method: auth::Method,
    /// While the SCRAM key is derived on a helper thread: when to look for it again.
    scram_poll: Option<Instant>,
}

struct Preparing {
    /// One entry per statement answered so far.
    column_types: ColumnTypes,
    /// The answer to the statement `column_types.len()`.
    answer: Preparation,
    /// Each unavailable statement so far, with why: `name (why)`.
    unavailable: Vec<String>,
}

/// The answer to the Parse + Describe of the statement being prepared, so far.
#[derive(Default)]
pub(super) enum Preparation {
    #[default]
    Waiting,
    Described(Vec<u32>),
    /// Refused with this error of SQLSTATE class 42 (undefined table, column, function; no
    /// privilege): the database does not have what the statement needs.
    Unavailable(String),
}

impl Handshake {
    /// The StartupMessage is sent; the start-up must be done by `deadline`.
    pub fn new(deadline: Instant) -> Handshake {
        Handshake {
            deadline,
            stage: Stage::Authenticating(Authentication::default()),
        }
    }

    /// The start-up deadline, or a short poll while a SCRAM key is derived.
    pub fn deadline(&self) -> Instant {
        match &self.stage {
            Stage::Authenticating(auth) => auth
                .scram_poll
                .map_or(self.deadline, |poll| poll.min(self.deadline)),
            Stage::Preparing(_) => self.deadline,
        }
    }

    /// Fails with `Timeout` once the deadline has passed; sends SCRAM's client-final message
    /// once its key is there.
    pub fn on_timer(&mut self, output: &mut Vec<u8>, now: Instant) -> Result<(), DbError> {
        if self.deadline <= now {
            return Err(DbError::Timeout);
        }
        match &mut self.stage {
            Stage::Authenticating(auth) if auth.scram_poll.is_some_and(|at| at <= now) => {
                auth.continue_scram(output, now)
            }
            _ => Ok(()),
        }
    }

    /// Takes one message; once the last statement is answered, its column types.
    pub fn handle(
        &mut self,
        message: Message<'_>,
        setup: &Setup,
        output: &mut Vec<u8>,
        now: Instant,
    ) -> Result<Option<ColumnTypes>, DbError> {
        match &mut self.stage {
            Stage::Authenticating(auth) => match message {
                Message::Authentication(request) => auth.authenticate(request, setup, output, now),
                Message::ParameterStatus
                | Message::BackendKeyData
                | Message::NoticeResponse
                | Message::NegotiateProtocolVersion => Ok(()),
                Message::ErrorResponse(fields) => Err(DbError::server(fields)),
                Message::ReadyForQuery(_) if auth.scram.is_none() => {
                    self.stage = Stage::Preparing(Preparing::start(setup, output)?);
                    Ok(())
                }
                other => Err(DbError::unexpected(&other, "during start-up")),
            }
            .map(|()| None),
            Stage::Preparing(preparing) => match message {
                Message::ParameterStatus | Message::NoticeResponse => Ok(None),
                Message::ErrorResponse(fields) => {
                    preparing.refused(DbError::server(fields), setup)?;
                    Ok(None)
                }
                Message::ReadyForQuery(_)
                    if preparing.column_types.len() < setup.statements.len() =>
                {
                    preparing.prepared(setup)
                }
                other if preparing.answer.take(&other) => Ok(None),
                other => Err(DbError::unexpected(&other, "while preparing statements")),
            },
        }
    }
}

impl Authentication {
    fn authenticate(
        &mut self,
        request: Auth<'_>,
        setup: &Setup,
        output: &mut Vec<u8>,
        now: Instant,
    ) -> Result<(), DbError> {
        let config = setup.target.config();
        match request {
            Auth::Ok => {
                if self.scram.is_some() {
                    return Err(DbError::Auth(
                        "server ended SCRAM without proving its signature".into(),
                    ));
                }
                if setup.logging {
                    auth::log_method_once(self.method, &setup.target);
                }
            }
            Auth::Cleartext => {
                self.password_wanted(auth::Method::Cleartext, setup)?;
                protocol::password(output, &config.password)?;
            }
            Auth::Md5 { salt } => {
                self.password_wanted(auth::Method::Md5, setup)?;
                let hashed = auth::md5_password(&config.user, &config.password, salt);
                protocol::password(output, &hashed)?;
            }
            Auth::Sasl(mechanisms) => {
                if self.method == auth::Method::ScramSha256 {
                    return Err(DbError::Auth("the server began SASL twice".into()));
                }
                self.method = auth::Method::ScramSha256;
                let mechanism = auth::choose_sasl_mechanism(mechanisms).map_err(DbError::Auth)?;
                let scram = Scram::with_random_nonce(&config.password).map_err(DbError::Auth)?;
                let first = scram.client_first();
                protocol::sasl_initial_response(output, mechanism, first.as_bytes())?;
                self.scram = Some(scram);
            }
            Auth::SaslContinue(server_first) => {
                let Some(scram) = self.scram.as_mut() else {
                    return Err(DbError::Protocol("SASL continue without SASL".into()));
                };
                scram
                    .receive_server_first(server_first)
                    .map_err(DbError::Auth)?;
                self.continue_scram(output, now)?;
            }
            Auth::SaslFinal(server_final) => {
                if self.scram_poll.is_some() {
                    return Err(DbError::Protocol(
                        "SASL final before the client's final message".into(),
                    ));
                }
                let Some(scram) = self.scram.take() else {
                    return Err(DbError::Protocol("SASL final without SASL".into()));
                };
                scram
                    .verify_server_final(server_final)
                    .map_err(DbError::Auth)?;
            }
            Auth::Unsupported(code) => return Err(DbError::Auth(auth::unsupported_method(code))),
        }
        Ok(())
    }

    /// Whether the password may go out for `method` (see `auth::password_policy`).
    fn password_wanted(&mut self, method: auth::Method, setup: &Setup) -> Result<(), DbError> {
        let config = setup.target.config();
        let over_tcp = matches!(config.host, Host::Tcp(_));
        let sasl_begun = self.method == auth::Method::ScramSha256;
        auth::password_policy(method, sasl_begun, over_tcp, config.allow_cleartext)
            .map_err(DbError::Auth)?;
        self.method = method;
        Ok(())
    }

    /// Sends SCRAM's client-final message if its key is derived, else looks again shortly.
    fn continue_scram(&mut self, output: &mut Vec<u8>, now: Instant) -> Result<(), DbError> {
        let Some(scram) = self.scram.as_mut() else {
            self.scram_poll = None;
            return Ok(());
        };
        match scram.client_final().map_err(DbError::Auth)? {
            Some(message) => {
                protocol::sasl_response(output, message.as_bytes())?;
                self.scram_poll = None;
            }
            None => self.scram_poll = Some(now + SCRAM_POLL),
        }
        Ok(())
    }
}

impl Preparing {
    /// Each statement's Parse + Describe in a Sync group of its own: a Parse the server
    /// refuses makes it skip to the next Sync, so one missing table spoils only its own
    /// statement. Neither is an execution: `pg_stat_statements` counts none of them.
    fn start(setup: &Setup, output: &mut Vec<u8>) -> Result<Preparing, DbError> {
        for statement in setup.statements {
            write_preparation(output, statement)?;
        }
        Ok(Preparing {
            column_types: Vec::with_capacity(setup.statements.len()),
            answer: Preparation::Waiting,
            unavailable: Vec::new(),
        })
    }

    /// An ErrorResponse to the statement being prepared: one of SQLSTATE class 42 (what it
    /// names is not in this database) makes it unavailable; any other fails the start-up.
    fn refused(&mut self, mut error: DbError, setup: &Setup) -> Result<(), DbError> {
        if let DbError::Server {
            severity,
            code,
            message,
        } = &mut error
        {
            if code.starts_with("42") && severity == "ERROR" {
                self.answer = Preparation::Unavailable(std::mem::take(message));
                return Ok(());
            }
            let statement = setup.statements.get(self.column_types.len());
            let name = statement.map_or("?", |s| s.name);
            *message = format!("preparing statement {name}: {message}");
        }
        Err(error)
    }

    /// The ReadyForQuery that ends one statement's Sync group; after the last, every
    /// statement's column types.
    fn prepared(&mut self, setup: &Setup) -> Result<Option<ColumnTypes>, DbError> {
        let name = setup.statements[self.column_types.len()].name;
        match std::mem::take(&mut self.answer) {
            Preparation::Waiting => {
                return Err(DbError::Protocol(format!(
                    "no description of statement {name}"
                )));
            }
            Preparation::Described(types) => self.column_types.push(Some(types)),
            Preparation::Unavailable(why) => {
                self.unavailable.push(format!("{name} ({why})"));
                self.column_types.push(None);
            }
        }
        if self.column_types.len() < setup.statements.len() {
            return Ok(None);
        }
        if !self.unavailable.is_empty() {
            setup.log_once(format!(
                "PostgreSQL database {} cannot prepare statements {}: \
                 the routes that use them answer as if the database were down",
                setup.target,
                self.unavailable.join(", ")
            ));
        }
        Ok(Some(std::mem::take(&mut self.column_types)))
    }
}

impl Preparation {
    /// Takes `message` if it is part of the answer to a Parse + Describe (not its error or
    /// its ReadyForQuery).
    pub fn take(&mut self, message: &Message<'_>) -> bool {
        match message {
            Message::ParseComplete | Message::ParameterDescription => {}
            Message::RowDescription(description) => {
                *self = Preparation::Described(description.type_oids());
            }
            Message::NoData => *self = Preparation::Described(Vec::new()),
            _ => return false,
        }
        true
    }
}

/// Statements found unavailable at start-up, prepared again while the connection serves,
/// queued behind its queries like one of them: `REPREPARE_MIN` after start-up, then at
/// doubling intervals up to `REPREPARE_MAX` while any is still missing.
pub(super) struct Repreparation {
    /// When to try next; `None` while a try is under way, or when none is unavailable.
    pub at: Option<Instant>,
    every: Duration,
    /// The answer to the statement at the front of the queries, when it is one of these.
    pub answer: Preparation,
}

impl Repreparation {
    pub fn new(column_types: &ColumnTypes, now: Instant) -> Repreparation {
        let unavailable = column_types.iter().any(Option::is_none);
        Repreparation {
            at: unavailable.then(|| now + REPREPARE_MIN),
            every: REPREPARE_MIN,
            answer: Preparation::Waiting,
        }
    }

    /// Writes Parse + Describe + Sync for each statement still unavailable, and tells
    /// `queued` the index of each.
    pub fn start(
        &mut self,
        statements: &[Statement],
        column_types: &ColumnTypes,
        output: &mut Vec<u8>,
        mut queued: impl FnMut(usize),
    ) {
        self.at = None;
        for (index, statement) in statements.iter().enumerate() {
            // Encoded once at start-up, it cannot fail now; were it to, the statement stays
            // unavailable and nothing half written stays in the output.
            if column_types[index].is_none() && write_preparation(output, statement).is_ok() {
                queued(index);
            }
        }
    }

    /// The answer to statement `index` prepared again, ended by its ReadyForQuery: described,
    /// it is available from now on; if refused, it is tried again later (any error: a
    /// statement that prepared once at start-up elsewhere is no reason to give up the
    /// connection). `more` says whether the answer to another is still to come.
    pub fn answered(
        &mut self,
        index: usize,
        error: Option<DbError>,
        more: bool,
        column_types: &mut ColumnTypes,
        setup: &Setup,
        now: Instant,
    ) {
        if let (None, Preparation::Described(types)) = (error, std::mem::take(&mut self.answer)) {
            column_types[index] = Some(types);
            setup.log_once(format!(
                "PostgreSQL database {} has what statement {} needs now: prepared",
                setup.target, setup.statements[index].name
            ));
        }
        if !more && column_types.iter().any(Option::is_none) {
            self.every = (self.every * 2).min(REPREPARE_MAX);
            self.at = Some(now + self.every);
        }
    }
}

/// One statement's Parse + Describe + Sync; nothing half written when it cannot be encoded.
fn write_preparation(output: &mut Vec<u8>, statement: &Statement) -> Result<(), EncodeError> {
    let start = output.len();
    protocol::parse(output, statement.name, statement.sql, statement.param_types)
        .and_then(|()| protocol::describe_statement(output, statement.name))
        .map(|()| protocol::sync(output))
        .inspect_err(|_| output.truncate(start))
}
