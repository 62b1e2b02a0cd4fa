//! Header blocks: a request's decoded (HPACK, RFC 7541) and checked as RFC 9113 section 8
//! says, an answer's encoded.
//!
//! Decoding is ours (`decoder`, with `table`, and `http::huffman`, which QPACK shares): each field is handed to a
//! callback borrowed from the block, the tables or one scratch buffer, Huffman-coded
//! strings are decoded four bits a step through a table built at compile time, and the
//! dynamic table keeps its fields' bytes in one bounded buffer, which grows (by doubling,
//! to at most 8 KiB) only as fields are added to it: decoding a block allocates nothing
//! else, and a connection whose client indexes nothing holds no table. Why ours: the HPACK
//! crate used before, `loona-hpack` (the one still kept), built a `HashMap` of the Huffman
//! code for every Huffman-coded string it decoded, about
//! 78% of the server's CPU under h2load, whose header values are Huffman-coded as
//! browsers' are. Measured under `h2load -c 64 -m 100` h2c (docs/BENCHMARKS.md, issue
//! #30): 35.6 µs of server CPU per request with it, 1.26 with ours (sark: 3.7).
//! `loona-hpack` stays a dev-dependency, as the tests' independent encoder.
//!
//! A field is seen once, in the callback, and only what the server keeps is copied: the
//! pseudo-headers and the values of the fields routes read (`http::Fields`), into one
//! buffer per request (`accept-encoding` is read as it passes).
//!
//! Encoding is ours, and stateless: answers are written with the static table's names and
//! `:status` values and literals that are never indexed, so the server keeps no dynamic
//! table for the peer (nothing to bound, nothing to count), and whatever the peer's
//! SETTINGS_HEADER_TABLE_SIZE, the blocks stay valid.

use std::ops::Range;

use super::frame::{ErrorCode, H2Error};
use crate::http::{Answer, Field, Fields, HttpDate, Method, Request, Version};

mod decoder;
mod table;

pub use decoder::Decoder;

/// Why a decoded header block is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockError {
    /// The HPACK encoding itself is broken: the decoder's state is lost, a connection error.
    Compression,
    /// The request is malformed (RFC 9113, 8.1.1): a stream error.
    Malformed,
    /// The decoded list is larger than the limit (an HPACK bomb, or merely too large):
    /// answered 431.
    TooLarge,
}

impl BlockError {
    /// The error a block refused for this reason is reported with, when not answered.
    pub fn code(self) -> ErrorCode {
        match self {
            BlockError::Compression => ErrorCode::Compression,
            BlockError::Malformed | BlockError::TooLarge => ErrorCode::Protocol,
        }
    }
}

/// A header block whose CONTINUATION frames are still coming.
pub struct PendingBlock {
    pub stream: u32,
    pub end_stream: bool,
    pub self_dependent: bool,
    pub bytes: Vec<u8>,
    /// When its first frame came: the rest must follow within the request timeout.
    pub since: std::time::Instant,
}

impl PendingBlock {
    /// Appends a frame's fragment of the block. A block larger than twice the header list
    /// limit is a flood (CONTINUATION frames without end, CVE-2024-27316 and its kin): the
    /// connection ends.
    pub fn extend(&mut self, fragment: &[u8], max_header_list: u32) -> Result<(), H2Error> {
        if self.bytes.len() + fragment.len() > 2 * max_header_list as usize {
            return Err(H2Error::Connection(ErrorCode::EnhanceYourCalm));
        }
        self.bytes.extend_from_slice(fragment);
        Ok(())
    }
}

/// What a server needs of a request's header list, in one buffer.
#[derive(Debug, Default)]
pub struct RequestHead {
    bytes: Vec<u8>,
    method: Option<Range<u16>>,
    scheme: Option<Range<u16>>,
    authority: Option<Range<u16>>,
    path: Option<Range<u16>>,
    /// The fields routes read, their values in `bytes`.
    fields: Fields<Range<u16>>,
    /// `content-length`, which the DATA received must match.
    pub content_length: Option<u64>,
}

impl RequestHead {
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

    #[cfg(test)]
    pub fn scheme(&self) -> &str {
        self.text(&self.scheme)
    }

    #[cfg(test)]
    pub fn authority(&self) -> &str {
        self.text(&self.authority)
    }

    /// `:path`, its query included.
    pub fn path(&self) -> &str {
        self.text(&self.path)
    }

    /// The request as the application reads it, with its whole `body`.
    pub fn request<'a>(&'a self, body: &'a [u8]) -> Request<'a> {
        let (path, query) = self.path().split_once('?').unwrap_or((self.path(), ""));
        let bytes = &self.bytes;
        Request {
            method: self.method(),
            version: Version::Http2,
            path,
            query,
            fields: self
                .fields
                .clone()
                .map(|range| &bytes[range.start as usize..range.end as usize]),
            body,
        }
    }

    /// The bytes this head holds.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

/// Appends `value` to a head's `bytes`; where it lies. A head holds at most the header list
/// limit's bytes (well under 64 KiB).
fn keep(bytes: &mut Vec<u8>, value: &[u8]) -> Range<u16> {
    let start = bytes.len() as u16;
    bytes.extend_from_slice(value);
    start..bytes.len() as u16
}

/// A field's name is lowercase token characters (RFC 9113, 8.2.1, and RFC 9110's token).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&byte)
        })
}

/// A field's value has no NUL, CR or LF, and no whitespace at either end (RFC 9113, 8.2.1).
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

/// Connection-specific fields, which HTTP/2 forbids (RFC 9113, 8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// What HTTP/2 asks of a decoded block (RFC 9113, 8), beside the decoding itself.
impl Decoder {
    /// Decodes a request's header block into its head. The whole block is always decoded,
    /// so that the dynamic table stays as the peer's encoder has it, however the request is
    /// refused; a list past `max_list` (counted as SETTINGS_MAX_HEADER_LIST_SIZE counts:
    /// name, value and 32 a field) keeps nothing more, so a block that decodes huge costs
    /// its decoding only.
    pub fn request(&mut self, block: &[u8], max_list: usize) -> Result<RequestHead, BlockError> {
        // Room for what a request usually keeps, so that it is one allocation.
        let mut head = RequestHead {
            bytes: Vec::with_capacity(128),
            ..RequestHead::default()
        };
        let mut list_size = 0;
        let mut error = None;
        let mut regular_seen = false;
        let decoded = self.decode(block, |name, value| {
            list_size += name.len() + value.len() + 32;
            if error.is_some() {
                return;
            }
            if list_size > max_list {
                error = Some(BlockError::TooLarge);
                return;
            }
            if let Err(refused) = take_field(&mut head, name, value, &mut regular_seen) {
                error = Some(refused);
            }
        });
        if decoded.is_err() {
            return Err(BlockError::Compression);
        }
        if let Some(error) = error {
            return Err(error);
        }
        // Every request has :method, :scheme and a non-empty :path (RFC 9113, 8.3.1), but
        // CONNECT, which has :authority alone (8.5).
        let path = head.get(&head.path);
        let path_ok =
            path.first() == Some(&b'/') || (path == b"*" && head.get(&head.method) == b"OPTIONS");
        let well_formed = match head.method() {
            Method::Connect => {
                head.authority.is_some() && head.scheme.is_none() && head.path.is_none()
            }
            _ => head.method.is_some() && head.scheme.is_some() && path_ok,
        };
        match well_formed {
            true => Ok(head),
            false => Err(BlockError::Malformed),
        }
    }

    /// Decodes a trailer block, which is checked and dropped: no pseudo-header, nothing
    /// connection-specific, within `max_list`.
    pub fn trailers(&mut self, block: &[u8], max_list: usize) -> Result<(), BlockError> {
        let mut list_size = 0;
        let mut error = None;
        let decoded = self.decode(block, |name, value| {
            list_size += name.len() + value.len() + 32;
            if error.is_none() && list_size > max_list {
                error = Some(BlockError::TooLarge);
            } else if !valid_name(name) || !valid_value(value) || connection_specific(name) {
                error = error.or(Some(BlockError::Malformed));
            }
        });
        if decoded.is_err() {
            return Err(BlockError::Compression);
        }
        error.map_or(Ok(()), Err)
    }
}

/// Checks one field of a request and keeps it in `head` if the server needs it.
fn take_field(
    head: &mut RequestHead,
    name: &[u8],
    value: &[u8],
    regular_seen: &mut bool,
) -> Result<(), BlockError> {
    if let Some(pseudo) = name.strip_prefix(b":") {
        if *regular_seen {
            return Err(BlockError::Malformed);
        }
        let slot = match pseudo {
            b"method" => &mut head.method,
            b"scheme" => &mut head.scheme,
            b"authority" => &mut head.authority,
            b"path" => &mut head.path,
            _ => return Err(BlockError::Malformed),
        };
        if slot.is_some() || !visible_ascii(value) {
            return Err(BlockError::Malformed);
        }
        let start = head.bytes.len() as u16;
        head.bytes.extend_from_slice(value);
        let range = start..head.bytes.len() as u16;
        match pseudo {
            b"method" => head.method = Some(range),
            b"scheme" => head.scheme = Some(range),
            b"authority" => head.authority = Some(range),
            _ => head.path = Some(range),
        }
        return Ok(());
    }
    *regular_seen = true;
    if !valid_name(name) || !valid_value(value) || connection_specific(name) {
        return Err(BlockError::Malformed);
    }
    match name {
        b"te" if value != b"trailers" => return Err(BlockError::Malformed),
        b"content-length" => {
            let length = std::str::from_utf8(value)
                .ok()
                .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
                .and_then(|digits| digits.parse().ok())
                .ok_or(BlockError::Malformed)?;
            if head.content_length.is_some_and(|known| known != length) {
                return Err(BlockError::Malformed);
            }
            head.content_length = Some(length);
        }
        _ => {
            let bytes = &mut head.bytes;
            head.fields.read(name, value, |value| keep(bytes, value));
        }
    }
    Ok(())
}

/// The static table's indexes of the names an answer uses (RFC 7541, Appendix A).
const STATUS: usize = 8;
const CONTENT_ENCODING: usize = 26;
const CONTENT_LENGTH: usize = 28;
const CONTENT_TYPE: usize = 31;
const DATE: usize = 33;
const SERVER: usize = 54;
const VARY: usize = 59;

/// Appends the header block of `answer`, whose body is `content_length` bytes:
/// `:status`, the answer's own fields, `content-type`, `content-encoding` and `vary` if its
/// encoding says so, `content-length`, `date`, `server`.
pub fn encode_answer(
    out: &mut Vec<u8>,
    answer: &Answer<'_>,
    content_length: usize,
    date: &HttpDate,
) {
    let status = answer.status.code();
    // The statuses the static table holds whole (indexes 8 to 14).
    let indexed = [200, 204, 206, 304, 400, 404, 500]
        .iter()
        .position(|&code| code == status);
    match indexed {
        Some(offset) => integer(out, STATUS + offset, 7, 0x80),
        None => literal(out, STATUS, itoa::Buffer::new().format(status).as_bytes()),
    }
    encode_fields(out, answer.head_fields());
    literal(out, CONTENT_TYPE, answer.content_type.value());
    if let Some(coding) = answer.encoding.coding {
        literal(out, CONTENT_ENCODING, coding.token());
    }
    if answer.encoding.vary {
        literal(out, VARY, b"accept-encoding");
    }
    literal(
        out,
        CONTENT_LENGTH,
        itoa::Buffer::new().format(content_length).as_bytes(),
    );
    literal(out, DATE, date.as_bytes());
    literal(out, SERVER, b"gnosis");
}

/// Appends fields (an answer's own, or its trailers): each a literal with its own name,
/// never indexed.
pub fn encode_fields<'f>(out: &mut Vec<u8>, fields: impl Iterator<Item = &'f Field<'f>>) {
    for (name, value) in fields {
        out.push(0);
        string(out, name);
        string(out, value);
    }
}

/// A literal field without indexing, its name from the static table (RFC 7541, 6.2.2).
fn literal(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    integer(out, name_index, 4, 0);
    string(out, value);
}

/// A string literal, not Huffman-coded (RFC 7541, 5.2).
fn string(out: &mut Vec<u8>, value: &[u8]) {
    integer(out, value.len(), 7, 0);
    out.extend_from_slice(value);
}

/// An integer with an N-bit prefix, the first byte's other bits `flags` (RFC 7541, 5.1).
fn integer(out: &mut Vec<u8>, value: usize, prefix_bits: u32, flags: u8) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests;

/// RFC 7541's examples as the tests write them.
#[cfg(test)]
pub(crate) use crate::http::huffman::hex;
