//! gnosis's own PostgreSQL v3 wire-protocol client: a connection is a state machine without
//! I/O (`conn`) whose link (`link`) a worker's pool (`pool`) or a blocking driver (`blocking`)
//! moves the bytes of. Each module says what it does; docs/PG.md shows them together.

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
pub use conn::{Event, Options, Param, PgConn, QueryError, Row, Sink, Statement, Step};
pub use error::DbError;
pub use pool::Pool;
pub use target::{Address, Config, Host, Target};
