//! What a connection is made with and keeps through every reconnect: where it connects,
//! the statements it prepares, its limits, and whether it logs.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::failure::MAX_REASONS_LOGGED;
use crate::pg::protocol;
use crate::pg::target::Target;

/// Queries a connection holds (written or not) before `query` answers `QueueFull`: TFB's worst
/// case is 512 connections x 20 queries spread over the threads.
pub const MAX_QUEUED: usize = 16_384;
/// The default for [`Options::connect_timeout`] and [`Options::query_timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default for [`Options::max_rows`]: the largest result any route reads is the cache
/// loader's whole world table, TFB's 10,000 rows; the fortunes table has 12.
pub const MAX_ROWS: usize = 16_384;
/// The default for [`Options::max_result_bytes`]: the cache loader's 10,000 rows are about
/// 220 KB, the fortunes under 3 KB. With it, what one query can make a worker hold is a few
/// MB, not `max_rows` times `max_message_len` (1 GiB).
pub const MAX_RESULT_BYTES: usize = 4 << 20;

/// A statement prepared once per connection under `name`. A query names it by reference (a
/// `static` of the list the connection was made with, e.g. `static W: &Statement = &LIST[0]`,
/// whose index the compiler checks): no index reaches the connection.
#[derive(Debug)]
pub struct Statement {
    pub name: &'static str,
    pub sql: &'static str,
    pub param_types: &'static [u32],
}

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

/// Lines logged once per process (see `Setup::log_once`).
pub(super) static LOGGED_ONCE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Handed to each phase of the connection: what it needs of the connection's making.
pub(super) struct Setup {
    pub target: Arc<Target>,
    pub statements: &'static [Statement],
    /// The fewest bytes each statement's query is answered with (`session::least_answer`),
    /// read from its SQL once, not at every wait.
    pub least_answers: Vec<usize>,
    pub options: Options,
    /// Whether failures and recoveries are logged (see `PgConn::without_logging`).
    pub logging: bool,
}

impl Setup {
    pub fn log(&self, line: impl fmt::Display) {
        if self.logging {
            crate::log!("{line}");
        }
    }

    /// Logs `line` once per process (a few such lines at most): every connection of every
    /// thread finds the same statements unavailable, and reconnects find them again.
    pub fn log_once(&self, line: String) {
        let mut logged = LOGGED_ONCE.lock().unwrap_or_else(PoisonError::into_inner);
        if self.logging && !logged.contains(&line) && logged.len() < MAX_REASONS_LOGGED {
            crate::log!("{line}");
            logged.push(line);
        }
    }
}
