//! HTTP/2 (RFC 9113) without I/O: the server feeds a connection the plaintext it receives
//! and takes complete requests out (`http::Request`, with their streams); it encodes each
//! stream's `http::Answer` itself (HPACK and frames, trailers included), and sends the bytes
//! the connection has written, the answers of many streams in one buffer.
//!
//! `frame` reads and writes frames, `hpack` decodes request headers and encodes answers,
//! `settings` holds the server's limits and the peer's settings, `stream` one stream,
//! `inflow` the flow control of what the peer sends, `output` what is written and unsent,
//! and `connection` the state machine of one connection and its streams. Its buffers are
//! lent by the worker's `BufferPool`, as an HTTP/1.1 connection's are.

mod connection;
mod frame;
mod hpack;
mod inflow;
mod output;
mod settings;
mod stream;

pub use connection::{Connection, PREFACE};
pub use frame::ErrorCode;
pub use settings::Limits;
pub use stream::Taken;

#[cfg(test)]
mod tests;
