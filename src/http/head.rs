//! A request's head as HTTP/2 and HTTP/3 carry it, a list of fields with pseudo-header
//! fields first, kept in one buffer while its body arrives. Both protocols ask the same of
//! it (RFC 9113 section 8, RFC 9114 section 4.3: lowercase names, no connection-specific
//! field, `te` only as `trailers`, pseudo-header fields first, once each, the ones a method
//! needs), so their decoders (HPACK's, QPACK's) hand each decoded field here, and the
//! fields routes read go through [`Fields::read`] like HTTP/1.1's.

use std::ops::Range;

use super::{FieldLines, Fields, Method, Request, Version};

/// A request is malformed (RFC 9113 8.1.1, RFC 9114 4.1.2): the stream is refused, the
/// connection goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// What a server needs of a request's field list, in one buffer.
#[derive(Debug)]
pub struct RequestHead {
    version: Version,
    bytes: Vec<u8>,
    method: Option<Range<u16>>,
    scheme: Option<Range<u16>>,
    authority: Option<Range<u16>>,
    path: Option<Range<u16>>,
    /// `host`, the authority of a request without `:authority`.
    host: Option<Range<u16>>,
    /// Every regular field, as [`FieldLines`], if the connection keeps them for a proxy
    /// (`keep_fields`); else empty, and no allocation.
    lines: Vec<u8>,
    keep_fields: bool,
    /// A regular field was seen: no pseudo-header field may follow.
    regular_seen: bool,
    /// The fields routes read, their values in `bytes`.
    fields: Fields<Range<u16>>,
    /// `content-length`, which the body received must match.
    pub content_length: Option<u64>,
}

/// An empty head, which HTTP/2 keeps for a request it answers 431 without reading it.
impl Default for RequestHead {
    fn default() -> Self {
        RequestHead {
            version: Version::Http2,
            bytes: Vec::new(),
            method: None,
            scheme: None,
            authority: None,
            path: None,
            host: None,
            lines: Vec::new(),
            keep_fields: false,
            regular_seen: false,
            fields: Fields::default(),
            content_length: None,
        }
    }
}

impl RequestHead {
    /// An empty head of a request of `version`, with room for what a request usually keeps,
    /// so that it is one allocation; that keeps every regular field as field lines too if
    /// `keep_fields` (for a proxy to forward them: a second allocation).
    pub fn new(version: Version, keep_fields: bool) -> Self {
        RequestHead {
            version,
            bytes: Vec::with_capacity(128),
            keep_fields,
            ..RequestHead::default()
        }
    }

    fn get(&self, range: &Option<Range<u16>>) -> &[u8] {
        range.as_ref().map_or(&[][..], |range| {
            &self.bytes[range.start as usize..range.end as usize]
        })
    }

    pub fn method(&self) -> Method {
        Method::from_bytes(self.get(&self.method))
    }

    /// A text field, checked to be visible ASCII when decoded.
    fn text(&self, range: &Option<Range<u16>>) -> &str {
        std::str::from_utf8(self.get(range)).unwrap_or_default()
    }

    pub fn scheme(&self) -> &str {
        self.text(&self.scheme)
    }

    /// `:authority`, or `host` without it.
    pub fn authority(&self) -> &str {
        match self.authority {
            Some(_) => self.text(&self.authority),
            None => self.text(&self.host),
        }
    }

    /// `:path`, its query included.
    pub fn path(&self) -> &str {
        self.text(&self.path)
    }

    /// The request as the application reads it, with its whole `body`.
    pub fn request<'a>(&'a self, body: &'a [u8]) -> Request<'a> {
        let path = self
            .path()
            .split_once('?')
            .map_or(self.path(), |(path, _)| path);
        let bytes = &self.bytes;
        Request {
            method: self.method(),
            method_bytes: self.get(&self.method),
            version: self.version,
            path,
            target: self.path(),
            authority: self.authority().as_bytes(),
            fields: self
                .fields
                .clone()
                .map(|range| &bytes[range.start as usize..range.end as usize]),
            field_lines: FieldLines::new(&self.lines, 0),
            body,
        }
    }

    /// The bytes this head holds.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity() + self.lines.capacity()
    }

    /// Checks one decoded field and keeps it if the server needs it. The caller bounds
    /// the list (its decoder's limit, well under 64 KiB), so the ranges fit in `u16`.
    pub fn take_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular_seen {
                return Err(Malformed);
            }
            let slot = match pseudo {
                b"method" => &mut self.method,
                b"scheme" => &mut self.scheme,
                b"authority" => &mut self.authority,
                b"path" => &mut self.path,
                _ => return Err(Malformed),
            };
            if slot.is_some() || !visible_ascii(value) {
                return Err(Malformed);
            }
            *slot = Some(keep(&mut self.bytes, value));
            return Ok(());
        }
        self.regular_seen = true;
        check_regular(name, value)?;
        if self.keep_fields {
            FieldLines::push(&mut self.lines, name, value);
        }
        match name {
            b"te" if value != b"trailers" => return Err(Malformed),
            b"content-length" => {
                let length = std::str::from_utf8(value)
                    .ok()
                    .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
                    .and_then(|digits| digits.parse().ok())
                    .ok_or(Malformed)?;
                if self.content_length.is_some_and(|known| known != length) {
                    return Err(Malformed);
                }
                self.content_length = Some(length);
            }
            // The first, if it reads as an authority at all.
            b"host" => {
                if self.host.is_none() && visible_ascii(value) {
                    self.host = Some(keep(&mut self.bytes, value));
                }
            }
            _ => {
                let bytes = &mut self.bytes;
                self.fields.read(name, value, |value| keep(bytes, value));
            }
        }
        Ok(())
    }

    /// Checks that the whole list has what its method needs: `:method`, `:scheme` and a
    /// non-empty `:path` (RFC 9113 8.3.1, RFC 9114 4.3.1), but CONNECT, which has
    /// `:authority` alone (RFC 9113 8.5, RFC 9114 4.4).
    pub fn finish(self) -> Result<Self, Malformed> {
        let path = self.get(&self.path);
        let path_ok =
            path.first() == Some(&b'/') || (path == b"*" && self.get(&self.method) == b"OPTIONS");
        let well_formed = match self.method() {
            Method::Connect => {
                self.authority.is_some() && self.scheme.is_none() && self.path.is_none()
            }
            _ => self.method.is_some() && self.scheme.is_some() && path_ok,
        };
        match well_formed {
            true => Ok(self),
            false => Err(Malformed),
        }
    }
}

/// Checks a trailer field, which the server does not keep: no pseudo-header field,
/// nothing connection-specific.
pub fn check_trailer(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    check_regular(name, value)
}

/// A regular field's name is lowercase token characters, its value has no NUL, CR or LF
/// and no whitespace at either end, and it is not connection-specific.
fn check_regular(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    match valid_name(name) && valid_value(value) && !connection_specific(name) {
        true => Ok(()),
        false => Err(Malformed),
    }
}

/// Appends `value` to a head's `bytes`; where it lies.
fn keep(bytes: &mut Vec<u8>, value: &[u8]) -> Range<u16> {
    let start = bytes.len() as u16;
    bytes.extend_from_slice(value);
    start..bytes.len() as u16
}

/// A field's name is lowercase token characters (RFC 9113 8.2.1, RFC 9114 4.2, and RFC
/// 9110's token).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&byte)
        })
}

/// A field's value has no NUL, CR or LF, and no whitespace at either end (RFC 9113 8.2.1,
/// RFC 9114 4.2).
fn valid_value(value: &[u8]) -> bool {
    let edge = |byte: Option<&u8>| byte.is_some_and(|byte| matches!(byte, b' ' | b'\t'));
    !value.iter().any(|byte| matches!(byte, 0 | b'\r' | b'\n'))
        && !edge(value.first())
        && !edge(value.last())
}

/// Pseudo-header values the server keeps as text are visible ASCII.
fn visible_ascii(value: &[u8]) -> bool {
    value.iter().all(|byte| (0x21..0x7f).contains(byte))
}

/// Connection-specific fields, which HTTP/2 and HTTP/3 forbid (RFC 9113 8.2.2, RFC 9114
/// 4.2), in what they receive and what they send.
pub fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}
