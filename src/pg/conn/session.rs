//! A connection's steady state: each query appends exactly Bind/Execute/Sync to the output,
//! and the answers are decoded into each query's rows, then `Done` or `Failed`, delivered
//! with the query's token, in order. Statements the database lacked at start-up are prepared
//! again in the same line (`startup::Repreparation`).

use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

use super::setup::Setup;
use super::startup::{ColumnTypes, Repreparation};
use crate::pg::error::DbError;
use crate::pg::protocol::{self, ColumnValue, DataRow, EncodeError, Message, Param};

/// ReadyForQuery's bytes: the end of every query's answer.
const READY_FOR_QUERY: usize = 6;
/// How many pending queries [`Session::answer_floors`] looks at, at most.
const FLOOR_SPAN: usize = 64;

pub use crate::link::Floors;

/// The fewest bytes a Bind/Execute/Sync of `sql` can be answered with. A SELECT, UPDATE,
/// INSERT or DELETE: BindComplete (5), a CommandComplete whose tag is at least `SELECT 0`
/// (14) and ReadyForQuery; an error instead is longer (an ErrorResponse carries at least its
/// severity twice, its code and a message: 29 bytes). Anything else: ReadyForQuery and one
/// 5-byte message (an EmptyQueryResponse, a short tag).
pub(super) fn least_answer(sql: &str) -> usize {
    let verb = sql.trim_start().get(..6).unwrap_or("");
    match ["SELECT", "UPDATE", "INSERT", "DELETE"]
        .iter()
        .any(|known| verb.eq_ignore_ascii_case(known))
    {
        true => 5 + 14 + READY_FOR_QUERY,
        false => 5 + READY_FOR_QUERY,
    }
}

/// What happens to one query: zero or more `Row`s, then exactly one `Done` or `Failed`.
/// Rows stream as they arrive, so a query that fails after sending rows (rare: an error at
/// the implicit commit) delivers those rows before `Failed`; discard them then.
pub enum Event<'a> {
    Row(Row<'a>),
    Done,
    Failed(&'a DbError),
}

/// Where a connection delivers its queries' events, each with its query's token.
pub trait Sink: FnMut(u64, Event<'_>) {}

impl<F: FnMut(u64, Event<'_>)> Sink for F {}

/// One result row, borrowing the connection's read buffer.
pub struct Row<'a> {
    pub(super) data: DataRow<'a>,
    pub(super) types: &'a [u32],
}

impl<'a> Row<'a> {
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Column `index` as `T` (bool, i32, i64, &str, Jsonb), its type checked against the
    /// statement's Describe; a wrong type, a NULL or bad bytes is an error, never a panic.
    pub fn get<T: ColumnValue<'a>>(&self, index: usize) -> Result<T, DbError> {
        let (accepted, wanted) = (T::OIDS, T::NAME);
        if !self.types.get(index).is_some_and(|t| accepted.contains(t)) {
            return Err(DbError::Column(format!("column {index} is not {wanted}")));
        }
        let value = match self.data.get(index) {
            Some(Some(value)) => value,
            Some(None) => return Err(DbError::Column(format!("column {index} is NULL"))),
            None => return Err(DbError::Column(format!("no column {index}"))),
        };
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

struct Pending {
    /// The query's token; `None` for the Parse + Describe of an unavailable statement
    /// prepared again, whose answer goes to no sink.
    token: Option<u64>,
    /// The statement's place in the connection's list (and so in `column_types`).
    statement: usize,
    /// When the query fails with `Timeout` if still unanswered.
    deadline: Instant,
}

/// A connection started up: every statement prepared or found unavailable.
pub(super) struct Session {
    column_types: ColumnTypes,
    /// Queries written to the output, oldest first; the front one is being answered.
    pending: VecDeque<Pending>,
    /// The ErrorResponse of the front query, delivered at its ReadyForQuery.
    front_error: Option<DbError>,
    /// Rows the front query has answered so far, and their bytes.
    front_rows: usize,
    front_bytes: usize,
    /// A query has been answered: the connection has proven itself.
    proven: bool,
    repreparation: Repreparation,
}

impl Session {
    pub fn new(column_types: ColumnTypes, now: Instant) -> Session {
        Session {
            repreparation: Repreparation::new(&column_types, now),
            column_types,
            pending: VecDeque::with_capacity(1024),
            front_error: None,
            front_rows: 0,
            front_bytes: 0,
            proven: false,
        }
    }

    pub fn queued(&self) -> usize {
        self.pending.len()
    }

    /// The fewest bytes still to come before the oldest request's queries (those at the
    /// front that share its token) are all answered, and before the first [`FLOOR_SPAN`]
    /// queries are (a floor of what all of them are owed); `None` with nothing pending. The
    /// front query may be answered but for its ReadyForQuery; a statement prepared again
    /// leaves no floor (1: what it answers is not counted).
    pub fn answer_floors(&self, setup: &Setup) -> Option<Floors> {
        let front = self.pending.front()?;
        let Some(token) = front.token else {
            return Some(Floors {
                request: 1,
                owed: 1,
            });
        };
        let mut floors = Floors {
            request: READY_FOR_QUERY,
            owed: READY_FOR_QUERY,
        };
        let mut same_request = true;
        for query in self.pending.iter().skip(1).take(FLOOR_SPAN - 1) {
            let Some(query_token) = query.token else {
                break;
            };
            let least = setup.least_answers[query.statement];
            same_request &= query_token == token;
            if same_request {
                floors.request += least;
            }
            floors.owed += least;
        }
        Some(floors)
    }

    pub fn is_proven(&self) -> bool {
        self.proven
    }

    /// The oldest query's deadline, or the next try at preparing an unavailable statement.
    pub fn deadline(&self) -> Option<Instant> {
        let front = self.pending.front().map(|query| query.deadline);
        front.into_iter().chain(self.repreparation.at).min()
    }

    pub fn query(
        &mut self,
        setup: &Setup,
        output: &mut Vec<u8>,
        index: usize,
        params: &[Param],
        token: u64,
        now: Instant,
    ) -> Result<(), QueryError> {
        let statement = &setup.statements[index];
        if self.column_types[index].is_none() {
            return Err(QueryError::Unavailable(statement.name));
        }
        if self.pending.len() >= setup.options.max_queued {
            return Err(QueryError::QueueFull);
        }
        protocol::bind(output, statement.name, params).map_err(QueryError::Unencodable)?;
        protocol::execute(output);
        protocol::sync(output);
        self.pending.push_back(Pending {
            token: Some(token),
            statement: index,
            deadline: now + setup.options.query_timeout,
        });
        Ok(())
    }

    /// Fails with `Timeout` once the oldest query's deadline has passed: the connection
    /// stopped answering, and every query held waited on it in vain, whether its own
    /// deadline has come or not. Else prepares the unavailable statements again when due.
    pub fn on_timer(
        &mut self,
        setup: &Setup,
        output: &mut Vec<u8>,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<(), DbError> {
        if self
            .pending
            .front()
            .is_some_and(|query| query.deadline <= now)
        {
            self.fail_all(&DbError::Timeout, sink);
            return Err(DbError::Timeout);
        }
        if self.repreparation.at.is_some_and(|at| at <= now) {
            let deadline = now + setup.options.query_timeout;
            let pending = &mut self.pending;
            self.repreparation
                .start(setup.statements, &self.column_types, output, |statement| {
                    pending.push_back(Pending {
                        token: None,
                        statement,
                        deadline,
                    })
                });
        }
        Ok(())
    }

    /// Every query held fails with `error`.
    pub fn fail_all(&mut self, error: &DbError, sink: &mut impl Sink) {
        while let Some(query) = self.pending.pop_front() {
            if let Some(token) = query.token {
                sink(token, Event::Failed(error));
            }
        }
    }

    /// Takes one message of the queries' answers; `Ok(true)` when it is the first answer
    /// completed on this connection (it has proven itself).
    pub fn answer(
        &mut self,
        message: Message<'_>,
        setup: &Setup,
        now: Instant,
        sink: &mut impl Sink,
    ) -> Result<bool, DbError> {
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
                let options = &setup.options;
                let too_much = if self.front_rows > options.max_rows {
                    Some(format!("{} rows", options.max_rows))
                } else if self.front_bytes > options.max_result_bytes {
                    Some(format!("{} bytes of rows", options.max_result_bytes))
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
                    (None, error) => {
                        let more = self.pending.iter().any(|query| query.token.is_none());
                        self.repreparation.answered(
                            front.statement,
                            error,
                            more,
                            &mut self.column_types,
                            setup,
                            now,
                        );
                    }
                }
                return Ok(!std::mem::replace(&mut self.proven, true));
            }
            Message::ParseComplete
            | Message::ParameterDescription
            | Message::RowDescription(_)
            | Message::NoData
                if self.repreparing() =>
            {
                self.repreparation.answer.take(&message);
            }
            Message::BindComplete
            | Message::CommandComplete
            | Message::EmptyQueryResponse
            | Message::PortalSuspended
            | Message::ParameterStatus
            | Message::NoticeResponse
            | Message::NotificationResponse => {}
            other => return Err(DbError::unexpected(&other, "in a query's answer")),
        }
        Ok(false)
    }

    /// Whether the answer being read is that of a statement prepared again.
    fn repreparing(&self) -> bool {
        self.pending
            .front()
            .is_some_and(|front| front.token.is_none())
    }
}
