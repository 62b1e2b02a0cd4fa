//! gnosis's own PostgreSQL v3 wire-protocol client.
//!
//! `protocol` encodes and decodes messages (no I/O), `auth` does MD5 and SCRAM-SHA-256,
//! `target` finds the server (libpq environment, local socket, TFB defaults), `conn` is the
//! non-blocking pipelined connection an event loop drives, `blocking` drives it with poll(2)
//! for start-up work.

pub mod auth;
pub mod blocking;
pub mod conn;
pub mod protocol;
pub mod target;

pub use blocking::BlockingClient;
pub use conn::{DbError, Event, Param, PgConn, QueryError, Row, Statement};
pub use target::{Config, Host};
