//! HTTP's semantics (RFC 9110), whatever protocol carries them: the request the application
//! reads and the answer it gives, statuses, content codings, the cached `Date`, the
//! timeouts every connection keeps, the buffers every protocol borrows, and the Huffman code
//! that HPACK and QPACK share.
//!
//! Nothing here does network I/O; the protocols (`h1`, `h2`, `ws`) speak on the wire.

mod accept_encoding;
mod alt_svc;
mod answer;
mod buffers;
mod date;
mod field_lines;
mod head;
pub mod huffman;
mod pipe;
pub mod prefixed;
mod request;
mod send_buffer;
mod status;
mod wire;

pub use accept_encoding::{AcceptEncoding, Coding};
pub use alt_svc::AltSvc;
pub use answer::{
    Adds, Answer, Body, ContentType, Encoding, Field, FieldList, FileBody, Handler, Reply, Ticket,
};
pub use buffers::{lent, BufferPool};
pub use date::HttpDate;
pub use field_lines::FieldLines;
pub use head::{check_trailer, connection_specific, Malformed, RequestHead};
pub use pipe::{Flow, Pipe, Progress, WINDOW};
pub use request::{
    is_unreserved, Fields, Method, Origin, Request, Upgrade, Version, LARGEST_MAX_BODY, MAX_BODY,
};
pub use send_buffer::SendBuffer;
pub use status::Status;
pub use wire::{Expiry, Wire};

use std::time::Duration;

/// How long a connection may take at what it owes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Longest time a request may take to arrive once its first byte has.
    pub request: Duration,
    /// Longest keep-alive pause between requests.
    pub idle: Duration,
    /// Longest time the output unsent at any instant may take to be sent.
    pub send: Duration,
}

/// The default send timeout: what is unsent is at most the high-water mark and a response,
/// about 300 KiB, which a client reading at 10 KB/s (80 kbit/s) takes 30 s to read; a client
/// reading at full speed takes milliseconds, however long the pipelined load lasts.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

pub const TIMEOUTS: Timeouts = Timeouts {
    request: Duration::from_secs(10),
    idle: Duration::from_secs(60),
    send: SEND_TIMEOUT,
};
