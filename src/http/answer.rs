//! An answer as the application gives it, whatever protocol carries it back: its status,
//! the fields beyond those every answer has, its body (bytes, or a file still to read) and
//! its trailers. Each protocol encodes it itself (HTTP/1.1 as text, HTTP/2 as HPACK and
//! frames), so that no protocol reads another's bytes; a request that waits (the database,
//! a timer) is answered later with the same type, by its [`Ticket`].

use std::fs::File;
use std::net::IpAddr;
use std::os::fd::AsFd;

use super::{Coding, FieldLines, Pipe, Request, Status};
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
    /// Said by the answer's forwarded fields, if at all (an upstream's `Content-Type`):
    /// the protocol writes no `content-type` of its own.
    InFields,
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
            ContentType::InFields => b"",
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

/// A whole answer. Small enough (104 bytes) for the compiler to move it without a call to
/// `memcpy`, and taken by reference once made: a copy per answer showed in the profile of
/// pipelined plaintext when it was larger (over 128 bytes, x86-64's inline moves). It was
/// 96 bytes before it could carry an upstream's fields: they share the place of its own
/// fields (`Own`), whose tag takes 8 bytes where `trailers_at` took 1 in the padding; a
/// `Body` variant holding them beside the bytes would have made `Body` 40 bytes, not 24.
#[derive(Debug)]
pub struct Answer<'a> {
    pub status: Status,
    pub content_type: ContentType,
    pub encoding: Encoding,
    /// Its own fields: in its head, beyond the content's, the date and the server's name
    /// (`allow`, `upgrade`, `sec-websocket-accept`); or after the body (gRPC's
    /// `grpc-status`), which only HTTP/2 and HTTP/3 send (an HTTP/1.1 answer drops its
    /// trailers: gRPC refuses HTTP/1.1); or an upstream's.
    fields: Own<'a>,
    pub body: Body<'a>,
}

/// An answer's own fields, where they go.
#[derive(Clone, Copy, Debug)]
enum Own<'a> {
    Head(FieldList<'a>),
    Trailers(FieldList<'a>),
    /// An upstream's end-to-end fields, which a proxy passes on in the head.
    Forwarded(FieldLines<'a>),
}

/// Fields a protocol never writes from a forwarded answer: the connection-specific ones
/// (RFC 9110 7.6.1; HTTP/2 and HTTP/3 forbid them, RFC 9113 8.2.2, RFC 9114 4.2), which
/// the upstream's side dropped already, and `content-length`, as each protocol frames the
/// body itself.
fn not_forwarded(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 7] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
        b"te",
        b"content-length",
    ];
    NAMES.iter().any(|known| name.eq_ignore_ascii_case(known))
}

/// What a protocol adds to an answer's head of its own: a `date` and its `server` name,
/// unless a forwarded answer's upstream said them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adds {
    pub date: bool,
    pub server: bool,
}

/// An answer's content.
#[derive(Debug)]
pub enum Body<'a> {
    Bytes(&'a [u8]),
    /// A file, opened and measured, that the protocol reads where the body goes (straight
    /// into its output: no copy in between).
    File(FileBody),
    /// An upstream's body, arriving: the protocol takes it as it comes and as its transport
    /// has room, as it reads a file's.
    Piped(Pipe),
}

impl Body<'_> {
    /// Its length; for a piped body, what waits in its pipe (what arrived and is not taken).
    pub fn len(&self) -> usize {
        match self {
            Body::Bytes(bytes) => bytes.len(),
            Body::File(file) => file.len,
            Body::Piped(pipe) => pipe.waiting(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the body to `out`. A file whose length changed since it was measured is a
    /// 500: `out` may then hold part of it, which the caller drops. A piped body is taken as
    /// it comes, by the protocol itself: nothing here.
    pub fn write_to(&self, out: &mut Vec<u8>) -> Result<(), Status> {
        match self {
            Body::Bytes(bytes) => {
                out.extend_from_slice(bytes);
                Ok(())
            }
            Body::File(file) => file.read_into(out),
            Body::Piped(_) => Ok(()),
        }
    }

    /// The pipe of a piped body.
    pub fn pipe(&self) -> Option<&Pipe> {
        match self {
            Body::Piped(pipe) => Some(pipe),
            _ => None,
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
            fields: Own::Head([None; 2]),
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
            fields: Own::Head(fields),
            ..self
        }
    }

    /// The answer with `trailers` after its body.
    pub fn with_trailers(self, trailers: FieldList<'a>) -> Self {
        Answer {
            fields: Own::Trailers(trailers),
            ..self
        }
    }

    /// Its own fields in its head, names in lowercase (none for a forwarded answer: see
    /// [`Answer::forwarded_fields`]).
    pub fn head_fields(&self) -> impl Iterator<Item = &Field<'a>> {
        let list = match &self.fields {
            Own::Head(list) => &list[..],
            _ => &[],
        };
        list.iter().flatten()
    }

    /// Its trailers, names in lowercase.
    pub fn trailers(&self) -> impl Iterator<Item = &Field<'a>> {
        let list = match &self.fields {
            Own::Trailers(list) => &list[..],
            _ => &[],
        };
        list.iter().flatten()
    }

    /// An upstream's answer passed on: its `status`, its end-to-end `fields` (its
    /// `Content-Type`, `Cache-Control`, `Set-Cookie`s, `ETag`, `Location`...; names as the
    /// upstream wrote them) and its `body` as it arrives (none for a HEAD's, a 204's or a
    /// 304's). Each protocol writes the fields but the connection-specific ones and
    /// `Content-Length`, and frames the body itself, as for any answer
    /// ([`Answer::content_length`]). The upstream's `Date` and `Server` stand for the
    /// protocol's own ([`Answer::adds`]).
    pub fn forwarded(status: Status, fields: FieldLines<'a>, body: Body<'a>) -> Self {
        Answer {
            status,
            content_type: ContentType::InFields,
            encoding: Encoding::default(),
            fields: Own::Forwarded(fields),
            body,
        }
    }

    /// A forwarded answer's fields that a protocol writes, in order, names as they came
    /// (HTTP/2 and HTTP/3 lowercase them): all but the connection-specific ones and
    /// `Content-Length`. None for any other answer.
    pub fn forwarded_fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
        let lines = match self.fields {
            Own::Forwarded(lines) => lines,
            _ => FieldLines::default(),
        };
        lines.iter().filter(|&(name, _)| !not_forwarded(name))
    }

    /// What the protocol adds to the head of its own: everything, but for a forwarded
    /// answer whose upstream said its `Date` or `Server` (a proxy does not say them twice).
    pub fn adds(&self) -> Adds {
        let mut adds = Adds {
            date: true,
            server: true,
        };
        if let Own::Forwarded(lines) = self.fields {
            for (name, _) in lines.iter() {
                adds.date &= !name.eq_ignore_ascii_case(b"date");
                adds.server &= !name.eq_ignore_ascii_case(b"server");
            }
        }
        adds
    }

    /// The `Content-Length` a protocol writes, whether or not it writes the body
    /// (`head_only`: the answer to a HEAD, whose content-length is the one a GET would
    /// get, as a static file's HEAD says the file's length). For an answer the app made,
    /// its body's length. For a forwarded one, none for a 1xx or a 204 (RFC 9110 8.6);
    /// for a body that has all arrived, its length; else the upstream's `Content-Length`
    /// if it said one (for a HEAD's or a 304, which carry no body here, the
    /// representation's; for a body still arriving, what the upstream's framing holds it
    /// to), or none: the protocol frames the body as it comes (HTTP/1.1: chunked).
    pub fn content_length(&self, head_only: bool) -> Option<u64> {
        let Own::Forwarded(lines) = self.fields else {
            return Some(self.body.len() as u64);
        };
        let code = self.status.code();
        if code < 200 || code == 204 {
            return None;
        }
        if !head_only && code != 304 {
            let Body::Piped(pipe) = &self.body else {
                return Some(self.body.len() as u64);
            };
            if let Some(len) = pipe.ended_len() {
                return Some(len);
            }
        }
        let (_, value) = lines
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(b"content-length"))?;
        let digits = std::str::from_utf8(value).ok()?;
        match digits.bytes().all(|byte| byte.is_ascii_digit()) {
            true => digits.parse().ok(),
            false => None,
        }
    }

    /// Whether its status allows no content (1xx, 204, 304; RFC 9110 6.4.1): a piped body
    /// then goes unwritten, whatever the protocol.
    pub fn bodiless(&self) -> bool {
        let code = self.status.code();
        code < 200 || code == 204 || code == 304
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

    /// The address of the client whose requests come next, for a protocol whose
    /// connections share one handler (QUIC's, which learns it from the datagrams); a
    /// connection of its own says it when it is opened.
    fn set_client(&mut self, _client: IpAddr) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_moved_without_a_call() {
        // What the compiler copies inline: 128 bytes of moves at most on x86-64's baseline.
        // 104: 96 and the 8 that an upstream's fields in the place of its own cost (see
        // `Answer`).
        assert_eq!(std::mem::size_of::<Answer<'_>>(), 104);
        assert_eq!(std::mem::size_of::<Reply<'_>>(), 104);
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

    #[test]
    fn a_forwarded_answer_says_its_fields_but_the_connections_and_its_length_by_the_rules() {
        let lines = b"Content-Type: text/plain\r\nCONNECTION: close\r\nContent-Length: 12\r\n\
            Set-Cookie: a=1\r\nTE: trailers\r\nServer: upstream\r\n";
        let fields = FieldLines::new(lines, 0);
        let answer = Answer::forwarded(Status::Ok, fields, Body::Bytes(b"abc"));
        assert!(answer.forwarded_fields().eq([
            (&b"Content-Type"[..], &b"text/plain"[..]),
            (b"Set-Cookie", b"a=1"),
            (b"Server", b"upstream"),
        ]));
        assert_eq!(answer.head_fields().count() + answer.trailers().count(), 0);
        assert_eq!(answer.content_type, ContentType::InFields);
        assert_eq!(
            answer.adds(),
            Adds {
                date: true,
                server: false
            }
        );
        // Its body's length, but for a HEAD's or a 304 (the upstream's) and a 204's (none).
        assert_eq!(answer.content_length(false), Some(3));
        assert_eq!(answer.content_length(true), Some(12));
        let not_modified = Answer::forwarded(Status::from_code(304), fields, Body::Bytes(b""));
        assert_eq!(not_modified.content_length(false), Some(12));
        let no_content = Answer::forwarded(Status::from_code(204), fields, Body::Bytes(b""));
        assert_eq!(no_content.content_length(true), None);
        let etag = FieldLines::new(b"ETag: \"x\"\r\n", 0);
        let unsaid = Answer::forwarded(Status::Ok, etag, Body::Bytes(b""));
        assert_eq!(unsaid.content_length(true), None);
        // A body still arriving: the upstream's length if it said one, else none (chunked);
        // once all of it is in, its own.
        let pipe = Pipe::default();
        let arriving = Answer::forwarded(Status::Ok, fields, Body::Piped(pipe.clone()));
        assert_eq!(arriving.content_length(false), Some(12));
        let chunked = Answer::forwarded(Status::Ok, etag, Body::Piped(pipe.clone()));
        assert_eq!(chunked.content_length(false), None);
        pipe.push(b"abc");
        pipe.end();
        assert_eq!(chunked.content_length(false), Some(3));
        // The app's answers as before: their body's length, HEAD or not, and no field of
        // an upstream.
        let ok = Answer::ok(ContentType::Plain, b"12345");
        assert_eq!(
            (ok.content_length(true), ok.forwarded_fields().count()),
            (Some(5), 0)
        );
        assert_eq!(
            ok.adds(),
            Adds {
                date: true,
                server: true
            }
        );
    }
}
