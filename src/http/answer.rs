//! An answer as the application gives it, whatever protocol carries it back: its status,
//! the fields beyond those every answer has, its body (bytes, or a file still to read) and
//! its trailers. Each protocol encodes it itself (HTTP/1.1 as text, HTTP/2 as HPACK and
//! frames), so that no protocol reads another's bytes; a request that waits (the database,
//! a timer) is answered later with the same type, by its [`Ticket`].

use std::fs::File;
use std::os::fd::AsFd;

use super::{Coding, Request, Status};
use crate::sys;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    Plain,
    Json,
    Html,
    /// Bytes as they came (`/echo`), and a static file of a type not named here.
    OctetStream,
    // Static files (`/static/{name}`), by their extension.
    Css,
    JavaScript,
    Svg,
    Webp,
    Png,
    Jpeg,
    Gif,
    Avif,
    Icon,
    Woff2,
    Woff,
    Xml,
    Wasm,
    Gzip,
    /// gRPC's messages (over HTTP/2 only).
    Grpc,
}

impl ContentType {
    /// The `Content-Type` value.
    pub fn value(self) -> &'static [u8] {
        match self {
            ContentType::Plain => b"text/plain",
            ContentType::Json => b"application/json",
            ContentType::Html => b"text/html; charset=utf-8",
            ContentType::OctetStream => b"application/octet-stream",
            ContentType::Css => b"text/css",
            // HttpArena's validator wants this name (RFC 9239 prefers text/javascript).
            ContentType::JavaScript => b"application/javascript",
            ContentType::Svg => b"image/svg+xml",
            ContentType::Webp => b"image/webp",
            ContentType::Png => b"image/png",
            ContentType::Jpeg => b"image/jpeg",
            ContentType::Gif => b"image/gif",
            ContentType::Avif => b"image/avif",
            ContentType::Icon => b"image/x-icon",
            ContentType::Woff2 => b"font/woff2",
            ContentType::Woff => b"font/woff",
            ContentType::Xml => b"application/xml",
            ContentType::Wasm => b"application/wasm",
            ContentType::Gzip => b"application/gzip",
            ContentType::Grpc => b"application/grpc",
        }
    }
}

/// What an answer says of its content coding (a static file's, negotiated by
/// `Accept-Encoding`): its `Content-Encoding`, and whether it carries `Vary:
/// Accept-Encoding`. Neither, for every other answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    pub coding: Option<Coding>,
    pub vary: bool,
}

/// A header field of an answer, its name in lowercase (each protocol writes names as it
/// writes them).
pub type Field<'a> = (&'static [u8], &'a [u8]);

/// The most fields an answer has of its own, in its head or as trailers: two (a 426's
/// `upgrade` and `sec-websocket-version`, a 101's `upgrade` and `sec-websocket-accept`,
/// gRPC's `grpc-status` and `grpc-message`). Kept in the answer itself, so that an answer
/// borrows nothing but its values.
pub type FieldList<'a> = [Option<Field<'a>>; 2];

/// A whole answer. Small enough (96 bytes) for the compiler to move it without a call to
/// `memcpy`, and taken by reference once made: a copy per answer showed in the profile of
/// pipelined plaintext when it was larger.
#[derive(Debug)]
pub struct Answer<'a> {
    pub status: Status,
    pub content_type: ContentType,
    pub encoding: Encoding,
    /// Its own fields: `fields[..trailers_at]` in its head, beyond the content's, the date
    /// and the server's name (`allow`, `upgrade`, `sec-websocket-accept`); the rest after
    /// the body (gRPC's `grpc-status`), which only HTTP/2 sends (an HTTP/1.1 answer drops
    /// its trailers: gRPC refuses HTTP/1.1).
    fields: FieldList<'a>,
    trailers_at: u8,
    pub body: Body<'a>,
}

/// An answer's content.
#[derive(Debug)]
pub enum Body<'a> {
    Bytes(&'a [u8]),
    /// A file, opened and measured, that the protocol reads where the body goes (straight
    /// into its output: no copy in between).
    File(FileBody),
}

impl Body<'_> {
    pub fn len(&self) -> usize {
        match self {
            Body::Bytes(bytes) => bytes.len(),
            Body::File(file) => file.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the body to `out`. A file whose length changed since it was measured is a
    /// 500: `out` may then hold part of it, which the caller drops.
    pub fn write_to(&self, out: &mut Vec<u8>) -> Result<(), Status> {
        match self {
            Body::Bytes(bytes) => {
                out.extend_from_slice(bytes);
                Ok(())
            }
            Body::File(file) => file.read_into(out),
        }
    }
}

/// An open regular file and its length when it was opened.
#[derive(Debug)]
pub struct FileBody {
    pub file: File,
    pub len: usize,
}

impl FileBody {
    /// Appends the file's `len` bytes to `out`, read straight into its spare capacity;
    /// usually one `read`.
    fn read_into(&self, out: &mut Vec<u8>) -> Result<(), Status> {
        let end = out.len() + self.len;
        out.reserve(self.len);
        while out.len() < end {
            match sys::read_into(self.file.as_fd(), out, end - out.len()) {
                Ok(0) | Err(_) => return Err(Status::InternalServerError),
                Ok(_) => {}
            }
        }
        // The spare capacity may have taken more than asked if the file grew.
        match out.len() == end {
            true => Ok(()),
            false => Err(Status::InternalServerError),
        }
    }
}

impl<'a> Answer<'a> {
    /// `body` as `content_type`, with nothing else to say.
    pub fn new(status: Status, content_type: ContentType, body: &'a [u8]) -> Self {
        Answer {
            status,
            content_type,
            encoding: Encoding::default(),
            fields: [None; 2],
            trailers_at: 2,
            body: Body::Bytes(body),
        }
    }

    /// The same answer with another body (a file's, once read).
    pub fn with_body<'b>(&'b self, body: Body<'b>) -> Answer<'b> {
        Answer {
            status: self.status,
            content_type: self.content_type,
            encoding: self.encoding,
            fields: self.fields,
            trailers_at: self.trailers_at,
            body,
        }
    }

    /// 200 with `body` as `content_type`.
    pub fn ok(content_type: ContentType, body: &'a [u8]) -> Self {
        Answer::new(Status::Ok, content_type, body)
    }

    /// An error with its reason as a plain-text body, and the fields its status needs: a
    /// 405 names the methods allowed (RFC 9110, 15.5.6), a 426 what it upgrades to.
    pub fn error(status: Status) -> Answer<'static> {
        let fields: FieldList<'static> = match status {
            Status::MethodNotAllowed => [Some((b"allow", b"GET, HEAD")), None],
            // Only the WebSocket endpoint answers it.
            Status::UpgradeRequired => [
                Some((b"upgrade", b"websocket")),
                Some((b"sec-websocket-version", b"13")),
            ],
            _ => [None; 2],
        };
        Answer::new(status, ContentType::Plain, status.reason().as_bytes()).with_fields(fields)
    }

    /// The answer with `fields` in its head.
    pub fn with_fields(self, fields: FieldList<'a>) -> Self {
        Answer {
            fields,
            trailers_at: 2,
            ..self
        }
    }

    /// The answer with `trailers` after its body.
    pub fn with_trailers(self, trailers: FieldList<'a>) -> Self {
        Answer {
            fields: trailers,
            trailers_at: 0,
            ..self
        }
    }

    /// Its fields in its head, names in lowercase.
    pub fn head_fields(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields[..usize::from(self.trailers_at)]
            .iter()
            .flatten()
    }

    /// Its trailers, names in lowercase.
    pub fn trailers(&self) -> impl Iterator<Item = &Field<'a>> {
        self.fields[usize::from(self.trailers_at)..]
            .iter()
            .flatten()
    }

    /// The switch to WebSocket: `101` with the handshake's `accept` value; HTTP/1.1 adds
    /// `Connection: Upgrade` and hands the connection over once it is out.
    pub fn switch_to_websocket(accept: &'a [u8]) -> Self {
        Answer::new(Status::SwitchingProtocols, ContentType::Plain, b"").with_fields([
            Some((b"upgrade", &b"websocket"[..])),
            Some((b"sec-websocket-accept", accept)),
        ])
    }
}

/// How a request is answered: now, or later through its [`Ticket`] (the database, a
/// timer). A `101` answered now switches the connection to WebSocket once it is out.
#[derive(Debug)]
pub enum Reply<'a> {
    Now(Answer<'a>),
    Later,
}

/// Names one request that waits for its answer: which connection (a slot index and the
/// slot's generation, so that a reused slot is not mistaken for its earlier peer) and
/// which request on it (HTTP/1.1: its place in line; HTTP/2: its stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub slot: u32,
    pub generation: u32,
    pub seq: u32,
}

/// What a protocol hands its requests to: the application, through the server.
pub trait Handler {
    fn handle<'a>(&'a mut self, request: &'a Request<'a>, ticket: Ticket) -> Reply<'a>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_moved_without_a_call() {
        // What the compiler copies inline: 128 bytes of moves at most on x86-64's baseline.
        assert!(std::mem::size_of::<Answer<'_>>() <= 96);
        assert!(std::mem::size_of::<Reply<'_>>() <= 96);
    }

    #[test]
    fn fields_go_in_the_head_and_trailers_after_the_body() {
        let upgrade = Answer::error(Status::UpgradeRequired);
        assert_eq!(upgrade.head_fields().count(), 2);
        assert_eq!(upgrade.trailers().count(), 0);
        let grpc = Answer::ok(ContentType::Grpc, b"").with_trailers([Some((b"a", b"1")), None]);
        assert_eq!(grpc.head_fields().count(), 0);
        assert!(grpc.trailers().eq([&(&b"a"[..], &b"1"[..])]));
    }
}
