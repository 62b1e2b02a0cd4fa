//! HTTP/1.1: request parsing, response writing, the cached `Date` header, and one
//! connection's requests and responses in order.
//!
//! Nothing here does I/O: the servers feed bytes in and take bytes out.

mod accept_encoding;
mod buffers;
mod connection;
mod date;
mod request;
mod response;
mod send_buffer;
mod status;

pub use accept_encoding::{AcceptEncoding, Coding};
pub use buffers::{lent, BufferPool};
pub use connection::{Connection, Reply, Ticket, Timeouts, SEND_TIMEOUT, TIMEOUTS};
pub use date::HttpDate;
pub use request::{
    is_unreserved, longest_request, parse, Chunked, GrpcHeaders, Method, Parsed, Request,
    UpgradeHeaders, LARGEST_MAX_BODY, MAX_BODY, MAX_CHUNK_FRAMING, MAX_CHUNK_LINE, MAX_HEAD,
};
pub use response::{ContentType, Encoding, Response, StreamAnswer, Trailers, MAX_TRAILERS};
pub use send_buffer::SendBuffer;
pub use status::Status;
