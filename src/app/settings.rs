//! What the app takes from the command line: the binaries fill it from their `Config`
//! (`Config::app_settings`), so that the app knows nothing of the server's options.

use std::path::PathBuf;
use std::time::Duration;

/// The app's part of the command line, read by [`prepare`](super::prepare).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Connecting, authenticating and preparing must finish within this; the start-up read
    /// of the world table waits as long.
    pub connect_timeout: Duration,
    /// A query unanswered this long fails its request (504) and its connection is replaced.
    pub query_timeout: Duration,
    /// The longest PostgreSQL message taken; a longer one replaces its connection.
    pub pg_max_message: usize,
    /// Rows one query may answer; more fails its request (500) and replaces its connection.
    pub pg_max_rows: usize,
    /// PostgreSQL connections per worker thread.
    pub pg_conns: usize,
    /// HTTP requests waiting on the database per thread; beyond it, 503 at once.
    pub max_db_requests: usize,
    /// HttpArena's json dataset, when given on the command line (else `$DATASET_PATH`, else
    /// `/data/dataset.json`).
    pub dataset: Option<PathBuf>,
    /// The largest request body taken; larger gets 413 and the connection closes.
    pub max_body: usize,
    /// The longest WebSocket message taken; longer closes the connection with 1009.
    pub max_message: usize,
    /// The edge mode (`--upstream`): the upstream answers what is not a static file, and
    /// the app neither connects to PostgreSQL nor reads the world table.
    pub edge: bool,
}
