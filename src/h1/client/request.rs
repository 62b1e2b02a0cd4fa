//! A client's request written for the upstream (RFC 9112 section 3, RFC 9110 section 7.6).

use std::io::Write;
use std::net::IpAddr;

use super::super::message::{is_host, is_token, list};
use super::is_hop_by_hop;
use crate::http::Version;

/// A client's request as the upstream is to receive it, beside its fields. Its parts are
/// bound parameters: each is checked, and nothing in one can end its line.
#[derive(Clone, Copy, Debug)]
pub struct Forward<'a> {
    /// A token; CONNECT is refused (a tunnel is not forwarded).
    pub method: &'a [u8],
    /// The origin-form target (`/path?query`), or `*`: visible ASCII alone.
    pub target: &'a [u8],
    /// The protocol the client spoke, named in the Via field this proxy adds.
    pub version: Version,
    /// The client's address, if known: the X-Forwarded-For this proxy writes.
    pub client: Option<IpAddr>,
    /// Whether the client came over TLS: the X-Forwarded-Proto this proxy writes.
    pub https: bool,
    /// The whole body, sent with a Content-Length.
    pub body: &'a [u8],
}

/// Why a request cannot be written; nothing of it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The method is not a token, or is CONNECT.
    Method,
    /// The target is neither `*` nor a path of visible ASCII.
    Target,
    /// A field's name is not a token.
    FieldName,
    /// A field's value holds a CR, LF or NUL: written, it could end its line and begin
    /// another field or request.
    FieldValue,
    /// There is not exactly one Host field, or its value is not a host.
    Host,
}

impl Forward<'_> {
    /// Appends the request to `out` with `fields`, the client's fields, or returns why it
    /// cannot and appends nothing. Hop-by-hop fields (Connection, Keep-Alive,
    /// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade, and any field a
    /// Connection field names) are not passed on, nor Content-Length (this proxy frames
    /// the body itself), Expect (the body is sent whole, at once) or the client's own
    /// X-Forwarded-For and X-Forwarded-Proto (at the edge they are whatever the client
    /// chose to say). Host is written first (RFC 9112, 3.2), Via, X-Forwarded-For,
    /// X-Forwarded-Proto and Content-Length last; the other fields as they came, in order.
    pub fn write<'f, F>(&self, fields: F, out: &mut Vec<u8>) -> Result<(), WriteError>
    where
        F: IntoIterator<Item = (&'f [u8], &'f [u8])> + Clone,
    {
        let is_target = |target: &[u8]| {
            target == b"*"
                || (target.first() == Some(&b'/') && target.iter().all(u8::is_ascii_graphic))
        };
        if !is_token(self.method) || self.method == b"CONNECT" {
            return Err(WriteError::Method);
        }
        if !is_target(self.target) {
            return Err(WriteError::Target);
        }
        // Every field is checked before a byte is written, the dropped ones too.
        let mut host = None;
        let mut hosts = 0;
        let mut connection_options = false;
        let mut announces_body = false;
        for (name, value) in fields.clone() {
            if !is_token(name) {
                return Err(WriteError::FieldName);
            }
            if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
                return Err(WriteError::FieldValue);
            }
            if name.eq_ignore_ascii_case(b"host") {
                hosts += 1;
                host = Some(value.trim_ascii());
            }
            connection_options |=
                name.eq_ignore_ascii_case(b"connection") && list(value).next().is_some();
            announces_body |= name.eq_ignore_ascii_case(b"content-length")
                || name.eq_ignore_ascii_case(b"transfer-encoding");
        }
        let host = match host {
            Some(host) if hosts == 1 && is_host(host) => host,
            _ => return Err(WriteError::Host),
        };
        // Whether a Connection field names `name`; looked for only if one names anything.
        let named_in_connection = |name: &[u8]| {
            connection_options
                && fields
                    .clone()
                    .into_iter()
                    .filter(|(field, _)| field.eq_ignore_ascii_case(b"connection"))
                    .any(|(_, value)| list(value).any(|option| option.eq_ignore_ascii_case(name)))
        };
        let written_here = |name: &[u8]| {
            [
                &b"host"[..],
                b"content-length",
                b"expect",
                b"x-forwarded-for",
                b"x-forwarded-proto",
            ]
            .iter()
            .any(|ours| name.eq_ignore_ascii_case(ours))
        };

        for part in [self.method, b" ", self.target, b" HTTP/1.1\r\nHost: ", host] {
            out.extend_from_slice(part);
        }
        out.extend_from_slice(b"\r\n");
        for (name, value) in fields.clone() {
            if written_here(name) || is_hop_by_hop(name) || named_in_connection(name) {
                continue;
            }
            for part in [name, b": ", value.trim_ascii(), b"\r\n"] {
                out.extend_from_slice(part);
            }
        }
        // The received protocol as Via names it (RFC 9110, 7.6.3), and this proxy.
        let via: &[u8] = match self.version {
            Version::Http10 => b"1.0",
            Version::Http11 => b"1.1",
            Version::Http2 => b"2",
            Version::Http3 => b"3",
        };
        for part in [b"Via: ", via, b" gnosis\r\n"] {
            out.extend_from_slice(part);
        }
        if let Some(client) = self.client {
            // Writing to a Vec cannot fail.
            let _ = write!(out, "X-Forwarded-For: {client}\r\n");
        }
        out.extend_from_slice(match self.https {
            true => b"X-Forwarded-Proto: https\r\n",
            false => b"X-Forwarded-Proto: http\r\n",
        });
        // A body, or one the client announced even if empty (a POST of nothing).
        if !self.body.is_empty() || announces_body {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(itoa::Buffer::new().format(self.body.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(self.body);
        Ok(())
    }
}
