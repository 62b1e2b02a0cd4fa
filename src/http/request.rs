//! A request as the application reads it, whatever protocol carried it: HTTP/1.1's parser
//! and HTTP/2's header-block decoder each fill the same [`Request`], and read the header
//! fields routes look at through the one [`Fields::read`], so that a field one route reads
//! is named in this file and in that route alone.

use std::net::IpAddr;

use super::{AcceptEncoding, FieldLines};

/// The default largest request body (`--max-body`); larger gets 413. 1 MiB: HttpArena's
/// 8gbit POSTs 10,240-byte bodies to `/echo` and its validator sends 100 KB ones, with
/// room to spare. A body is answered only once all of it is in, so this bounds what one
/// request can make the server hold; what all of a worker's connections hold together is
/// bounded by its `--max-buffered` budget.
pub const MAX_BODY: usize = 1024 * 1024;
/// The largest `--max-body` there may be: a body is held whole in memory, and a chunked
/// one's decoding keeps its offsets in 32 bits.
pub const LARGEST_MAX_BODY: usize = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    /// A tunnel to `host:port` (RFC 9110, 9.3.6), which no route opens.
    Connect,
    Other,
}

impl Method {
    pub fn from_bytes(method: &[u8]) -> Method {
        match method {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }
}

/// The protocol a request came by, for the routes whose answer depends on it (a WebSocket
/// handshake is HTTP/1.1's, gRPC runs over HTTP/2 or later).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    Http10,
    Http11,
    Http2,
    Http3,
}

/// Where a request came from, for a proxy to say (X-Forwarded-For, X-Forwarded-Proto).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The client's address, where the backend learns it when it accepts (epoll; not
    /// io_uring's multishot accept, nor QUIC yet).
    pub client: Option<IpAddr>,
    /// Whether it came over TLS (TLS over TCP, or QUIC).
    pub https: bool,
}

/// A whole request, borrowing from the connection that received it: what routes read, and
/// what a proxy forwards (the method, target and authority as sent, and every field). 200
/// bytes; built in place and handed out by reference.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// The method as the client sent it (`PATCH`), a token: what a proxy forwards, where
    /// routes read `method`.
    pub method_bytes: &'a [u8],
    pub version: Version,
    /// The path without the query string: `target` up to its `?`.
    pub path: &'a str,
    /// The request target as sent, the path and the query ([`Request::query`]):
    /// HTTP/1.1's request-target, HTTP/2's and HTTP/3's `:path` (empty for their CONNECT).
    pub target: &'a str,
    /// HTTP/1.1's `Host` value (empty without one: HTTP/1.0); HTTP/2's and HTTP/3's
    /// `:authority`, or their `host` field's value without one, or empty.
    pub authority: &'a [u8],
    pub fields: Fields<&'a [u8]>,
    /// Every header field as the client sent it, for a proxy to forward: HTTP/1.1's field
    /// lines where they lie in the connection's input (`Host`, `Connection` and the
    /// framing fields among them); HTTP/2's and HTTP/3's regular fields (no pseudo-header
    /// field; cookie crumbs on lines of their own) where the connection is set to keep
    /// them (their `Limits::keep_fields`), else none.
    pub field_lines: FieldLines<'a>,
    /// The body's bytes, as the protocol framed them (de-chunked, or HTTP/2's DATA joined).
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// What follows the target's `?`, or "". (Not kept apart from `target`, which holds
    /// it: the request stays smaller.)
    pub fn query(&self) -> &'a str {
        let rest = self.target.get(self.path.len()..).unwrap_or_default();
        rest.strip_prefix('?').unwrap_or_default()
    }
}

/// The header fields that routes read, each as [`Fields::read`] takes it. `V` is how a
/// value is kept: borrowed from the request (`&[u8]`), or, by a protocol that keeps a
/// request's head while its body arrives, as it likes (HTTP/2: a range of its buffer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields<V> {
    /// `content-type`, the first one.
    pub content_type: Option<V>,
    /// `accept-encoding`, its lines read as one list (the routes that negotiate ask it
    /// which coding to try).
    pub accept_encoding: AcceptEncoding,
    /// gRPC's `grpc-encoding`, the first one.
    pub grpc_encoding: Option<V>,
    /// What asks for WebSocket (RFC 6455, 4.2.1).
    pub upgrade: Upgrade<V>,
}

/// What a request says about switching to WebSocket, read for the app, which decides
/// whether to switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Upgrade<V> {
    /// `Connection` lists `upgrade`: HTTP/1.1's own field (HTTP/2 refuses it), which its
    /// parser reads with the connection's other tokens.
    pub connection_upgrade: bool,
    /// `Upgrade` lists `websocket`.
    pub websocket: bool,
    /// `Sec-WebSocket-Key`; a repeated one reads as empty, which no key is.
    pub key: Option<V>,
    /// `Sec-WebSocket-Version`; a repeated one reads as empty.
    pub version: Option<V>,
}

impl<V> Fields<V> {
    /// Reads one header field if routes read it (its name in any case); `keep` makes the
    /// value kept of a value's bytes.
    pub fn read<'v>(&mut self, name: &[u8], value: &'v [u8], keep: impl FnOnce(&'v [u8]) -> V) {
        let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
        if is(b"accept-encoding") {
            self.accept_encoding.read(value);
        } else if is(b"upgrade") {
            let mut protocols = value.split(|&b| b == b',');
            self.upgrade.websocket |=
                protocols.any(|protocol| protocol.trim_ascii().eq_ignore_ascii_case(b"websocket"));
        } else if is(b"sec-websocket-key") {
            self.upgrade.key = Some(keep(once(self.upgrade.key.is_some(), value)));
        } else if is(b"sec-websocket-version") {
            self.upgrade.version = Some(keep(once(self.upgrade.version.is_some(), value)));
        } else if is(b"content-type") {
            if self.content_type.is_none() {
                self.content_type = Some(keep(value.trim_ascii()));
            }
        } else if is(b"grpc-encoding") && self.grpc_encoding.is_none() {
            self.grpc_encoding = Some(keep(value.trim_ascii()));
        }
    }

    /// The same fields with their values kept another way.
    pub fn map<W>(self, mut f: impl FnMut(V) -> W) -> Fields<W> {
        Fields {
            content_type: self.content_type.map(&mut f),
            accept_encoding: self.accept_encoding,
            grpc_encoding: self.grpc_encoding.map(&mut f),
            upgrade: Upgrade {
                connection_upgrade: self.upgrade.connection_upgrade,
                websocket: self.upgrade.websocket,
                key: self.upgrade.key.map(&mut f),
                version: self.upgrade.version.map(&mut f),
            },
        }
    }
}

/// A field's trimmed value, or empty if it was there already: a field that must appear
/// once reads as invalid when repeated.
fn once(seen: bool, value: &[u8]) -> &[u8] {
    match seen {
        true => b"",
        false => value.trim_ascii(),
    }
}

/// RFC 3986's `unreserved` (2.3): letters, digits, `-`, `.`, `_` and `~`.
pub const fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(lines: &[(&str, &'static str)]) -> Fields<&'static [u8]> {
        let mut fields = Fields::default();
        for (name, value) in lines {
            fields.read(name.as_bytes(), value.as_bytes(), |value| value);
        }
        fields
    }

    #[test]
    fn a_request_stays_small() {
        // Built in place and handed out by reference; HTTP/1.1's parser returns it. 144
        // bytes before it carried what a proxy forwards (the query is read from the target
        // rather than kept beside it).
        assert_eq!(std::mem::size_of::<Request<'_>>(), 200);
    }

    #[test]
    fn names_are_read_in_any_case_and_values_trimmed() {
        let fields = read(&[
            ("Content-Type", " application/grpc "),
            ("GRPC-Encoding", "identity"),
            ("Upgrade", "h2c, WebSocket"),
            ("Sec-WebSocket-Key", " abc "),
            ("Sec-WebSocket-Version", "13"),
            ("X-Other", "ignored"),
        ]);
        assert_eq!(fields.content_type, Some(&b"application/grpc"[..]));
        assert_eq!(fields.grpc_encoding, Some(&b"identity"[..]));
        assert!(fields.upgrade.websocket);
        assert_eq!(fields.upgrade.key, Some(&b"abc"[..]));
        assert_eq!(fields.upgrade.version, Some(&b"13"[..]));
    }

    #[test]
    fn a_repeated_handshake_field_reads_as_empty_and_the_first_content_type_wins() {
        let fields = read(&[
            ("sec-websocket-key", "a"),
            ("sec-websocket-key", "a"),
            ("content-type", "text/plain"),
            ("content-type", "application/json"),
        ]);
        assert_eq!(fields.upgrade.key, Some(&b""[..]));
        assert_eq!(fields.content_type, Some(&b"text/plain"[..]));
    }

    #[test]
    fn fields_kept_as_ranges_map_back_to_the_same_values() {
        let bytes = b"application/grpcgzip";
        let mut fields = Fields::default();
        fields.read(b"content-type", &bytes[..16], |_| 0..16);
        fields.read(b"grpc-encoding", &bytes[16..], |_| 16..20);
        let borrowed = fields.map(|range: std::ops::Range<usize>| &bytes[range]);
        assert_eq!(borrowed.content_type, Some(&b"application/grpc"[..]));
        assert_eq!(borrowed.grpc_encoding, Some(&b"gzip"[..]));
    }
}
