//! QPACK (RFC 9204) with no dynamic table, either way: a request's field section decoded
//! and checked as RFC 9114 4.3 says (by `http::RequestHead`, which HTTP/2 shares), an
//! answer's encoded.
//!
//! The server advertises QPACK_MAX_TABLE_CAPACITY 0 and QPACK_BLOCKED_STREAMS 0, so a
//! client's sections reference the static table only, never block, and need no
//! acknowledgement: decoding is a function of the section alone (`decoder`), and the
//! server opens no QPACK stream of its own. The answers' encoder uses no dynamic table
//! either: `:status` and common fields by their static index, other names by static
//! reference or as literals, `date` Huffman-coded (shorter by a quarter); so the peer's
//! settings never matter to it.

use super::frame::{ErrorCode, H3Error};
use crate::http::prefixed;
use crate::http::{
    check_trailer, connection_specific, huffman, Answer, Coding, ContentType, Field, HttpDate,
    RequestHead, Version,
};

mod decoder;
pub mod table;

pub use decoder::{decode, DecodeError, Refused};

/// Why a request's field section is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionError {
    /// The QPACK encoding itself is broken, or uses the dynamic table:
    /// QPACK_DECOMPRESSION_FAILED, a connection error (RFC 9204, 2.2.3).
    Decompression,
    /// The request is malformed (RFC 9114, 4.1.2): H3_MESSAGE_ERROR, a stream error.
    Malformed,
    /// The decoded section is larger than the server's SETTINGS_MAX_FIELD_SECTION_SIZE:
    /// answered 431 (RFC 9114, 4.2.2).
    TooLarge,
}

impl SectionError {
    /// The error a section refused for this reason is reported with, when not answered.
    pub fn error(self) -> H3Error {
        match self {
            SectionError::Decompression => H3Error::Connection(ErrorCode::QpackDecompressionFailed),
            SectionError::Malformed | SectionError::TooLarge => {
                H3Error::Stream(ErrorCode::MessageError)
            }
        }
    }
}

/// A field's size as SETTINGS_MAX_FIELD_SECTION_SIZE counts it (RFC 9114 4.2.2): its name,
/// its value, and 32.
fn field_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// The scratch buffer decoding uses, kept by a connection for its requests.
#[derive(Default)]
pub struct Decoder {
    scratch: Vec<u8>,
}

impl Decoder {
    /// What the decoder holds between sections.
    pub fn held(&self) -> usize {
        self.scratch.capacity()
    }

    /// Decodes a request's field section into its head, refusing it past `max_section`
    /// bytes (each field counted as its name, its value and 32): nothing more is kept or decoded then.
    /// The head keeps every regular field as field lines too if `keep_fields`.
    pub fn request(
        &mut self,
        section: &[u8],
        max_section: usize,
        keep_fields: bool,
    ) -> Result<RequestHead, SectionError> {
        // A head's offsets are 16-bit.
        let max_section = max_section.min(u16::MAX as usize);
        let mut head = RequestHead::new(Version::Http3, keep_fields);
        let mut size = 0;
        decode(section, &mut self.scratch, |name, value| {
            size += field_size(name, value);
            if size > max_section {
                return Err(SectionError::TooLarge);
            }
            head.take_field(name, value)
                .map_err(|_| SectionError::Malformed)
        })
        .map_err(refused)?;
        head.finish().map_err(|_| SectionError::Malformed)
    }

    /// Decodes a trailer section, which is checked and dropped: no pseudo-header field,
    /// nothing connection-specific, within `max_section`.
    pub fn trailers(&mut self, section: &[u8], max_section: usize) -> Result<(), SectionError> {
        let mut size = 0;
        decode(section, &mut self.scratch, |name, value| {
            size += field_size(name, value);
            if size > max_section {
                return Err(SectionError::TooLarge);
            }
            check_trailer(name, value).map_err(|_| SectionError::Malformed)
        })
        .map_err(refused)
    }
}

fn refused(refused: Refused<SectionError>) -> SectionError {
    match refused {
        Refused::Decode(_) => SectionError::Decompression,
        Refused::Field(error) => error,
    }
}

/// The statuses the static table holds whole, and their indexes.
const STATUSES: [(u16, usize); 14] = [
    (103, 24),
    (200, 25),
    (304, 26),
    (404, 27),
    (503, 28),
    (100, 63),
    (204, 64),
    (206, 65),
    (302, 66),
    (400, 67),
    (403, 68),
    (421, 69),
    (425, 70),
    (500, 71),
];

/// The static index of `content-type: {content_type}`, if the table has it whole.
fn content_type_index(content_type: ContentType) -> Option<usize> {
    Some(match content_type {
        ContentType::Plain => 53,
        ContentType::Json => 46,
        ContentType::Html => 52,
        ContentType::Css => 51,
        ContentType::JavaScript => 45,
        ContentType::Png => 50,
        ContentType::Jpeg => 49,
        ContentType::Gif => 48,
        _ => return None,
    })
}

/// Appends the field section of `answer`'s head, whose `content-length` is
/// `content_length` if any ([`Answer::content_length`]): `:status`, the answer's own
/// fields, `content-type` (or a forwarded answer's fields, names lowercased),
/// `content-encoding` and `vary` if its encoding says so, `content-length`, `date` and
/// `server` unless a forwarded answer said them (as HTTP/2's).
pub fn encode_answer(
    out: &mut Vec<u8>,
    answer: &Answer<'_>,
    content_length: Option<u64>,
    date: &HttpDate,
) {
    prefix(out);
    let status = answer.status.code();
    match STATUSES.iter().find(|&&(code, _)| code == status) {
        Some(&(_, index)) => indexed(out, index),
        None => with_name(
            out,
            table::STATUS,
            itoa::Buffer::new().format(status).as_bytes(),
        ),
    }
    encode_field_lines(out, answer.head_fields());
    match (answer.content_type, content_type_index(answer.content_type)) {
        (ContentType::InFields, _) => encode_forwarded(out, answer.forwarded_fields()),
        (_, Some(index)) => indexed(out, index),
        (content_type, None) => with_name(out, table::CONTENT_TYPE, content_type.value()),
    }
    match answer.encoding.coding {
        Some(Coding::Br) => indexed(out, table::CONTENT_ENCODING_BR),
        Some(Coding::Gzip) => indexed(out, table::CONTENT_ENCODING_GZIP),
        None => {}
    }
    if answer.encoding.vary {
        indexed(out, table::VARY_ACCEPT_ENCODING);
    }
    match content_length {
        None => {}
        Some(0) => indexed(out, table::CONTENT_LENGTH),
        Some(length) => with_name(
            out,
            table::CONTENT_LENGTH,
            itoa::Buffer::new().format(length).as_bytes(),
        ),
    }
    let adds = answer.adds();
    if adds.date {
        with_name(out, table::DATE, date.as_bytes());
    }
    if adds.server {
        with_name(out, table::SERVER, b"gnosis");
    }
}

/// Appends a field section of `fields` alone: an answer's trailers.
pub fn encode_fields<'f>(out: &mut Vec<u8>, fields: impl Iterator<Item = &'f Field<'f>>) {
    prefix(out);
    encode_field_lines(out, fields);
}

/// The section prefix (4.5.1): Required Insert Count 0, Base 0.
fn prefix(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0]);
}

/// Each field by its static index if the table has it whole, else with its name's static
/// index if any, else as a literal. Connection-specific fields (a 426's `upgrade`, which
/// only HTTP/1.1 can act on) are left out: HTTP/3 forbids them (RFC 9114, 4.2).
fn encode_field_lines<'f>(out: &mut Vec<u8>, fields: impl Iterator<Item = &'f Field<'f>>) {
    for &(name, value) in fields.filter(|(name, _)| !connection_specific(name)) {
        encode_field(out, name, value);
    }
}

/// One field, its name in lowercase: by its static index if the table has it whole, else
/// with its name's static index if any, else as a literal.
fn encode_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    if let Some(index) = table::find(name, value) {
        indexed(out, index);
    } else if let Some(index) = table::find_name(name) {
        with_name(out, index, value);
    } else {
        // 001, N = 0, H, the name's length with a 3-bit prefix.
        string(out, name, 3, 0x20, 0x08);
        string(out, value, 7, 0, 0x80);
    }
}

/// The longest name lowercased on the stack to be looked up in the static table, whose
/// longest is 32 bytes (`access-control-allow-credentials`).
const LONGEST_NAME: usize = 32;

/// A forwarded answer's fields (connection-specific ones already left out, by
/// [`Answer::forwarded_fields`]), their names lowercased (RFC 9114, 4.2: an upstream's
/// HTTP/1.1 names come in any case): as [`encode_field`] writes them, or, a name longer
/// than any of the table's, as a literal not Huffman-coded.
fn encode_forwarded<'f>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'f [u8], &'f [u8])>) {
    let mut lower = [0; LONGEST_NAME];
    for (name, value) in fields {
        match lower.get_mut(..name.len()) {
            Some(lower) => {
                for (to, from) in lower.iter_mut().zip(name) {
                    *to = from.to_ascii_lowercase();
                }
                encode_field(out, lower, value);
            }
            None => {
                prefixed::write(out, name.len(), 3, 0x20);
                out.extend(name.iter().map(u8::to_ascii_lowercase));
                string(out, value, 7, 0, 0x80);
            }
        }
    }
}

/// An indexed field line of the static table (4.5.2): 1, T = 1, a 6-bit index.
fn indexed(out: &mut Vec<u8>, index: usize) {
    prefixed::write(out, index, 6, 0xc0);
}

/// A literal field line whose name is the static table's (4.5.4): 01, N = 0, T = 1, a
/// 4-bit index, then the value.
fn with_name(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    prefixed::write(out, name_index, 4, 0x50);
    string(out, value, 7, 0, 0x80);
}

/// A string (4.1.2): Huffman-coded if that is shorter (`huffman_flag` then set), its
/// length with a `prefix_bits` prefix after the first byte's `flags`.
fn string(out: &mut Vec<u8>, value: &[u8], prefix_bits: u32, flags: u8, huffman_flag: u8) {
    let coded_len = huffman::encoded_len(value);
    if coded_len < value.len() {
        prefixed::write(out, coded_len, prefix_bits, flags | huffman_flag);
        huffman::encode(value, out);
    } else {
        prefixed::write(out, value.len(), prefix_bits, flags);
        out.extend_from_slice(value);
    }
}

#[cfg(test)]
mod tests;
