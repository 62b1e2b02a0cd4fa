//! Why a query or a connection failed: the one error type of the PostgreSQL client.

use std::fmt;
use std::io;
use std::sync::Arc;

use super::protocol::{EncodeError, ErrorFields, Message};

#[derive(Debug, Clone)]
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
    /// Shared, so that the error can be cloned for every query it fails.
    Io(Arc<io::Error>),
    /// Authentication this client cannot do or that failed on the client side.
    Auth(String),
    Timeout,
    /// A column read as the wrong type, a NULL, or a column past the end.
    Column(String),
    /// A message this client cannot write: a NUL in the user name, password or a
    /// statement, or a length past the protocol's fields.
    Encode(EncodeError),
    /// A query named a statement (this one) that its connection does not prepare.
    NotPrepared(&'static str),
}

impl From<EncodeError> for DbError {
    fn from(error: EncodeError) -> DbError {
        DbError::Encode(error)
    }
}

impl DbError {
    /// The server's texts escaped (`protocol::printable`): they end up in log lines.
    pub(super) fn server(fields: ErrorFields<'_>) -> DbError {
        // 'V' is the untranslated severity; older servers send only the localized 'S'.
        let severity = match fields.text(b'V') {
            untranslated if untranslated.is_empty() => fields.text(b'S'),
            untranslated => untranslated,
        };
        DbError::Server {
            severity,
            code: fields.text(b'C'),
            message: fields.text(b'M'),
        }
    }

    /// A message the server should not have sent `when` it did.
    pub(super) fn unexpected(message: &Message<'_>, when: &str) -> DbError {
        DbError::Protocol(format!("unexpected {} {when}", message.name()))
    }

    /// The server closed the connection (end of stream), for drivers to report.
    pub fn closed() -> DbError {
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection");
        DbError::Io(eof.into())
    }

    /// Errors that retrying the same start-up will not fix (bad password, no such role or
    /// database, a method this client lacks).
    pub fn is_permanent(&self) -> bool {
        match self {
            DbError::Server { code, .. } => code.starts_with("28") || code.starts_with("3D"),
            DbError::Auth(_) | DbError::Encode(_) => true,
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
            DbError::Encode(error) => write!(f, "cannot encode a message: {error}"),
            DbError::NotPrepared(name) => write!(f, "statement {name} is not prepared"),
        }
    }
}

impl std::error::Error for DbError {}
