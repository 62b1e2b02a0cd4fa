//! HTTP/2 (RFC 9113) without I/O: the server feeds a connection the plaintext it receives
//! and takes complete requests out as events; it answers each stream with a status, a
//! content type, a body and optional trailers, and sends the bytes the connection has
//! written, the answers of many streams in one buffer.
//!
//! `frame` reads and writes frames, `hpack` decodes request headers and encodes answers,
//! `settings` the server's limits,
//! `stream` one stream, `output` what is written and unsent, and `connection` the state
//! machine of one connection and its streams.

mod connection;
mod frame;
mod hpack;
mod output;
mod settings;
mod stream;

pub use connection::{Connection, PREFACE};
pub use frame::ErrorCode;
pub use settings::Limits;
pub use stream::{Answer, Request};

#[cfg(test)]
mod tests;
