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
//! A field is seen once, in the callback, and only what the server keeps is copied, by
//! `http::RequestHead` (whose checks HTTP/3 shares): the pseudo-headers and the values of
//! the fields routes read (`http::Fields`), into one buffer per request (`accept-encoding`
//! is read as it passes).
//!
//! Encoding is ours, and stateless: answers are written with the static table's names and
//! `:status` values and literals that are never indexed, so the server keeps no dynamic
//! table for the peer (nothing to bound, nothing to count), and whatever the peer's
//! SETTINGS_HEADER_TABLE_SIZE, the blocks stay valid.

use super::frame::{ErrorCode, H2Error};
use crate::http::prefixed;
pub use crate::http::RequestHead;
use crate::http::{
    check_trailer, AltSvc, Answer, ContentType, Field, HttpDate, Malformed, Version,
};

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

/// What HTTP/2 asks of a decoded block (RFC 9113, 8), beside the decoding itself.
impl Decoder {
    /// Decodes a request's header block into its head. The whole block is always decoded,
    /// so that the dynamic table stays as the peer's encoder has it, however the request is
    /// refused; a list past `max_list` (counted as SETTINGS_MAX_HEADER_LIST_SIZE counts:
    /// name, value and 32 a field) keeps nothing more, so a block that decodes huge costs
    /// its decoding only. The head keeps every regular field as field lines too if
    /// `keep_fields`.
    pub fn request(
        &mut self,
        block: &[u8],
        max_list: usize,
        keep_fields: bool,
    ) -> Result<RequestHead, BlockError> {
        let mut head = RequestHead::new(Version::Http2, keep_fields);
        let mut list_size = 0;
        let mut error = None;
        let decoded = self.decode(block, |name, value| {
            list_size += name.len() + value.len() + 32;
            if error.is_some() {
                return;
            }
            if list_size > max_list {
                error = Some(BlockError::TooLarge);
                return;
            }
            if head.take_field(name, value).is_err() {
                error = Some(BlockError::Malformed);
            }
        });
        if decoded.is_err() {
            return Err(BlockError::Compression);
        }
        if let Some(error) = error {
            return Err(error);
        }
        head.finish().map_err(|Malformed| BlockError::Malformed)
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
            } else if check_trailer(name, value).is_err() {
                error = error.or(Some(BlockError::Malformed));
            }
        });
        if decoded.is_err() {
            return Err(BlockError::Compression);
        }
        error.map_or(Ok(()), Err)
    }
}

/// The static table's indexes of the names an answer uses (RFC 7541, Appendix A).
const STATUS: usize = 8;
const CONTENT_ENCODING: usize = 26;
const CONTENT_LENGTH: usize = 28;
const CONTENT_TYPE: usize = 31;
const DATE: usize = 33;
const SERVER: usize = 54;
const VARY: usize = 59;

/// Appends the header block of `answer`, whose `content-length` is `content_length` if
/// any ([`Answer::content_length`]): `:status`, the answer's own fields, `content-type`
/// (or a forwarded answer's fields, names lowercased), `content-encoding` and `vary` if its
/// encoding says so, `content-length`, `date` and `server` (unless a forwarded answer said
/// them), and `alt-svc` if given.
pub fn encode_answer(
    out: &mut Vec<u8>,
    answer: &Answer<'_>,
    content_length: Option<u64>,
    date: &HttpDate,
    alt_svc: Option<AltSvc>,
) {
    let status = answer.status.code();
    // The statuses the static table holds whole (indexes 8 to 14).
    let indexed = [200, 204, 206, 304, 400, 404, 500]
        .iter()
        .position(|&code| code == status);
    match indexed {
        Some(offset) => prefixed::write(out, STATUS + offset, 7, 0x80),
        None => literal(out, STATUS, itoa::Buffer::new().format(status).as_bytes()),
    }
    encode_fields(out, answer.head_fields());
    match answer.content_type {
        ContentType::InFields => encode_forwarded(out, answer.forwarded_fields()),
        content_type => literal(out, CONTENT_TYPE, content_type.value()),
    }
    if let Some(coding) = answer.encoding.coding {
        literal(out, CONTENT_ENCODING, coding.token());
    }
    if answer.encoding.vary {
        literal(out, VARY, b"accept-encoding");
    }
    if let Some(length) = content_length {
        literal(
            out,
            CONTENT_LENGTH,
            itoa::Buffer::new().format(length).as_bytes(),
        );
    }
    let adds = answer.adds();
    if adds.date {
        literal(out, DATE, date.as_bytes());
    }
    if adds.server {
        literal(out, SERVER, b"gnosis");
    }
    if let Some(alt_svc) = alt_svc {
        let value = alt_svc.value();
        encode_fields(out, [(&b"alt-svc"[..], value.as_bytes())].iter());
    }
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

/// Appends a forwarded answer's fields (connection-specific ones already left out, by
/// [`Answer::forwarded_fields`]): each a literal with its own name, not indexed, the name lowercased (RFC
/// 9113, 8.2.1: an upstream's HTTP/1.1 names come in any case).
fn encode_forwarded<'f>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'f [u8], &'f [u8])>) {
    for (name, value) in fields {
        out.push(0);
        prefixed::write(out, name.len(), 7, 0);
        out.extend(name.iter().map(u8::to_ascii_lowercase));
        string(out, value);
    }
}

/// A literal field without indexing, its name from the static table (RFC 7541, 6.2.2).
fn literal(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    prefixed::write(out, name_index, 4, 0);
    string(out, value);
}

/// A string literal, not Huffman-coded (RFC 7541, 5.2).
fn string(out: &mut Vec<u8>, value: &[u8]) {
    prefixed::write(out, value.len(), 7, 0);
    out.extend_from_slice(value);
}

#[cfg(test)]
mod tests;

/// RFC 7541's examples as the tests write them.
#[cfg(test)]
pub(crate) use crate::http::huffman::hex;
