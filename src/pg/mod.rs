//! gnosis's own PostgreSQL v3 wire-protocol client.
//!
//! `protocol` encodes and decodes messages (no I/O), `auth` does MD5 and SCRAM-SHA-256,
//! `target` finds the server (`DATABASE_URL` read by `url`, libpq environment, local socket,
//! TFB defaults) and resolves its name off the serving threads, `conn` is the pipelined
//! connection as a state machine without socket I/O, `link` the socket it wants as orders to
//! whoever moves its bytes (the link driver), `pool` holds a worker thread's connections and
//! their links, `blocking` moves a link's bytes with plain system calls and poll(2) for
//! start-up work and tests.

pub mod auth;
pub mod blocking;
pub mod conn;
pub mod error;
pub mod link;
pub mod pool;
pub mod protocol;
pub mod target;
pub mod url;

pub use blocking::{BlockingClient, Driver};
pub use conn::{Event, Options, Param, PgConn, QueryError, Row, Statement, Step};
pub use error::DbError;
pub use pool::Pool;
pub use target::{Address, Config, Host, Target};
