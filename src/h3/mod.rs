//! HTTP/3 (RFC 9114) and QPACK (RFC 9204) without I/O, for a QUIC endpoint to drive: it
//! hands each stream's bytes in as they arrive and sends what the streams write. No QUIC
//! here: the transport (streams, flow control, loss) is the endpoint's.
//!
//! `varint` reads and writes QUIC's integers, `frame` HTTP/3's frames and error codes,
//! `qpack` decodes requests' field sections and encodes answers' (the static table only),
//! `stream` is one request stream (a request in, its answer out), and `control` the
//! unidirectional streams: the server's control stream and the peer's control and QPACK
//! streams.
//!
//! Driving it, per connection: write [`write_control_stream`] on a unidirectional stream
//! the server opens at once; keep one [`qpack::Decoder`] and one [`OpenedStreams`]; give
//! each client unidirectional stream a [`UniStream`] and each request stream a
//! [`RequestStream`], and hand them their bytes as they come (`receive`, with the
//! stream's end). An `Err` is an [`H3Error`]: of the connection (CONNECTION_CLOSE with its
//! code) or of the stream (RESET_STREAM and STOP_SENDING); a stream or connection in
//! error is of no further use. [`Received::Request`]: take the request
//! ([`RequestStream::take_request`]) and hand it to the app; [`Received::Refused`]: answer
//! with that status at once. An answer is written with [`RequestStream::answer`] into the
//! stream's output; [`Written::More`] means a file's body is left, written by
//! [`RequestStream::write_more`] as the stream has room; [`Written::Done`], the stream
//! ends (FIN) once its output is sent; [`Written::Failed`], it is reset.

pub mod connection;
pub mod control;
pub mod frame;
pub mod qpack;
pub mod stream;
pub mod varint;

pub use connection::Connection;
pub use control::{write_control_stream, OpenedStreams, UniStream};
pub use frame::{ErrorCode, H3Error, Settings};
pub use stream::{Limits, Received, RequestStream, Taken, Written};

#[cfg(test)]
mod tests;
