//! HTTP/3 (RFC 9114) and QPACK (RFC 9204) without I/O, for a QUIC endpoint to drive: it
//! hands each stream's bytes in as they arrive and sends what the streams write. No QUIC
//! here: the transport (streams, flow control, loss) is the endpoint's.
//!
//! `varint` reads and writes QUIC's integers, `frame` HTTP/3's frames and error codes,
//! `qpack` decodes requests' field sections and encodes answers' (the static table only),
//! `stream` is one request stream (a request in, its answer out), and `control` the
//! unidirectional streams: the server's control stream and the peer's control and QPACK
//! streams.

pub mod control;
pub mod frame;
pub mod qpack;
pub mod stream;
pub mod varint;

pub use control::{write_control_stream, OpenedStreams, UniStream};
pub use frame::{ErrorCode, H3Error, Settings};
pub use stream::{Limits, Received, RequestStream, Taken, Written};

#[cfg(test)]
mod tests;
