//! HTTP/1.1 (RFC 9112), no I/O: a connection's requests parsed (`parse`: pipelining,
//! bodies with Content-Length or chunked decoded in place, 400/413/414/431), handed to the
//! application in order, and its answers written as text (`encode`), in order, whenever
//! they come. The client side, for a reverse proxy (`client`): requests written for an
//! upstream, its pipelined responses read as they arrive, bodies streamed. What both sides
//! read alike (the head's limits, the framing fields, the chunked coding) is `message`.

pub mod client;
mod connection;
mod encode;
mod message;
mod parse;

pub use connection::Connection;
#[cfg(test)]
pub(crate) use encode::framing_of;
pub use encode::Framing;
pub(crate) use message::is_token;
pub use message::{ChunkError, MAX_CHUNK_LINE, MAX_HEAD, MAX_HEADERS};
pub use parse::{longest_request, parse, Chunked, Parsed, MAX_CHUNK_FRAMING};
