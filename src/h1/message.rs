//! What HTTP/1.1's requests and responses share (RFC 9112), read once for the server's
//! parser (`parse.rs`, requests) and the client (`client/`, responses): the limits of a
//! head, the fields that frame a message and say what becomes of its connection (sections
//! 6 and 9.3), a Host value, and the chunked coding read a piece at a time (7.1).

use crate::http::is_unreserved;

/// The largest head (start line and field lines) accepted: a larger request gets 414 or
/// 431, a larger response is the upstream's error. Chunked trailers are held to the same
/// size.
pub const MAX_HEAD: usize = 8 * 1024;
/// The most field lines a head may have: more gets 431, or is the upstream's error.
pub const MAX_HEADERS: usize = 64;
/// A chunk-size line (size and extensions) longer than this is refused.
pub const MAX_CHUNK_LINE: usize = 1024;

/// What a message's own fields (`Connection`, `Content-Length`, `Transfer-Encoding`) say
/// of its framing and its connection, gathered as its field lines are read.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FramingFields {
    close: bool,
    keep_alive: bool,
    /// `Connection: upgrade`.
    pub upgrade: bool,
    content_length: Option<usize>,
    /// How many Transfer-Encoding lines there were.
    transfer_encodings: u32,
    /// The last of them was `chunked` alone.
    chunked: bool,
}

/// How a message's framing fields leave the end of its body in doubt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FramingError {
    /// A Content-Length is not digits alone, overflows, or disagrees with another.
    ContentLength,
    /// A transfer coding other than `chunked` alone and once, or any in HTTP/1.0.
    TransferEncoding,
    /// Both Transfer-Encoding and Content-Length.
    Both,
}

/// How a message's body is framed, from its fields alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyFraming {
    /// Neither field: a request has no body, a response runs to the connection's close.
    Unframed,
    Length(usize),
    Chunked,
}

impl FramingFields {
    /// Takes the field `name: value` if it is one of the three: `Ok(false)` if it is
    /// another.
    #[inline]
    pub(super) fn read(&mut self, name: &str, value: &[u8]) -> Result<bool, FramingError> {
        if name.eq_ignore_ascii_case("connection") {
            for token in list(value) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                self.upgrade |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let length = parse_content_length(value).ok_or(FramingError::ContentLength)?;
            // Repeated Content-Length lines must agree (RFC 9112, 6.3).
            if self.content_length.is_some_and(|seen| seen != length) {
                return Err(FramingError::ContentLength);
            }
            self.content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.transfer_encodings += 1;
            self.chunked = value.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// Whether the connection stays open after the message: `close` wins over
    /// `keep-alive`, wherever each stands (RFC 9112, 9.6); HTTP/1.0 closes unless it asks
    /// to keep the connection (9.3).
    pub(super) fn keep_alive(&self, http10: bool) -> bool {
        !self.close && (!http10 || self.keep_alive)
    }

    /// How the body is framed. Only one coding is understood, chunked, alone and once:
    /// anything else (another coding, chunked twice or not last, chunked in HTTP/1.0, both
    /// framing fields at once) leaves the body's end in doubt, the shape of request and
    /// response smuggling (RFC 9112, 6.1 and 6.3).
    pub(super) fn body(&self, http10: bool) -> Result<BodyFraming, FramingError> {
        match (self.transfer_encodings, self.content_length) {
            (0, None) => Ok(BodyFraming::Unframed),
            (0, Some(length)) => Ok(BodyFraming::Length(length)),
            (1, None) if self.chunked && !http10 => Ok(BodyFraming::Chunked),
            (_, Some(_)) => Err(FramingError::Both),
            (_, None) => Err(FramingError::TransferEncoding),
        }
    }
}

/// The elements of a comma-separated list field (`Connection`), trimmed, empty ones
/// skipped (RFC 9110, 5.6.1).
pub(super) fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|element| !element.is_empty())
}

/// Digits only: no sign, no spaces inside, no overflow.
fn parse_content_length(value: &[u8]) -> Option<usize> {
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A Host value as RFC 9110 (7.2) reads it: `uri-host [ ":" port ]` (RFC 3986, 3.2.2), or
/// empty when the target has no authority. An IP literal's inside is taken as hexadecimal
/// digits, colons and dots. Anything else (blanks, a slash, an `@`, a bad escape) is a
/// value that a proxy and an origin could read as different hosts.
pub(super) fn is_host(value: &[u8]) -> bool {
    let (host, port) = match value.strip_prefix(b"[") {
        Some(literal) => match literal.iter().position(|&b| b == b']') {
            Some(end)
                if literal[..end]
                    .iter()
                    .all(|&b| b.is_ascii_hexdigit() || b":.".contains(&b)) =>
            {
                (&b""[..], &literal[end + 1..])
            }
            _ => return false,
        },
        None => {
            let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
            value.split_at(end)
        }
    };
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    port_ok && is_reg_name(host)
}

/// `*( unreserved / pct-encoded / sub-delims )` (RFC 3986, 3.2.2).
fn is_reg_name(name: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&b) = name.get(at) {
        at += match b {
            b'%' if name
                .get(at + 1..at + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) =>
            {
                3
            }
            b if REG_NAME_BYTES[usize::from(b)] => 1,
            _ => return false,
        };
    }
    true
}

/// The bytes a reg-name holds as they are, unreserved and sub-delims: a table, since every
/// request's Host is checked byte by byte (a search of the sub-delims per byte was 2% of a
/// pipelined run's perf samples).
const REG_NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = is_unreserved(byte)
            || matches!(
                byte,
                b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
            );
        b += 1;
    }
    table
};

/// Where a reader of a chunked body (RFC 9112, 7.1) stands between two pieces of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum ChunkedReader {
    /// At a chunk-size line.
    #[default]
    Size,
    /// In a chunk's data, `left` bytes of it still to come.
    Data { left: usize },
    /// At the CRLF after a chunk's data.
    DataEnd,
    /// In the trailer section, `taken` bytes of it read.
    Trailers { taken: usize },
    /// The body is over.
    Done,
}

/// One piece of a chunked body, at the front of what was given to [`ChunkedReader::next`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// A chunk-size line of `len` bytes with its CRLF: `size` bytes of data follow, or the
    /// trailer section if it is 0. Its extensions are checked and skipped.
    Size { size: usize, len: usize },
    /// The first `len` bytes are the chunk's data, as much of it as has arrived.
    Data(usize),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// A trailer field line of `len` bytes with its CRLF, checked, to be dropped.
    Trailer(usize),
    /// The empty line (CRLF) that ends the body.
    End,
}

/// How a chunked body's framing is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// A chunk-size line is not as the grammar says, overflows, does not end in CRLF, or
    /// is longer than [`MAX_CHUNK_LINE`].
    SizeLine,
    /// A chunk's data is not followed by CRLF: its size was wrong.
    DataEnd,
    /// A trailer line is not a field line, or does not end in CRLF.
    Trailer,
    /// The trailer section is longer than [`MAX_HEAD`].
    TrailersTooLarge,
}

impl ChunkedReader {
    /// The piece at the front of `input`, the bytes from where the reader stands, and
    /// moves past it: `Ok(None)` while it is not all in (a line, or the CRLF after data;
    /// data is handed out as it arrives) or once the body is over. Every line must end in
    /// CRLF: a bare LF or CR in the framing is where two parsers can disagree.
    pub(super) fn next(&mut self, input: &[u8]) -> Result<Option<Piece>, ChunkError> {
        let piece = match *self {
            ChunkedReader::Size => {
                let Some(line) = line(input, MAX_CHUNK_LINE).map_err(|_| ChunkError::SizeLine)?
                else {
                    return Ok(None);
                };
                let size = chunk_size(line).ok_or(ChunkError::SizeLine)?;
                *self = match size {
                    0 => ChunkedReader::Trailers { taken: 0 },
                    left => ChunkedReader::Data { left },
                };
                Piece::Size {
                    size,
                    len: line.len() + 2,
                }
            }
            ChunkedReader::Data { left } => {
                let len = left.min(input.len());
                if len == 0 {
                    return Ok(None);
                }
                *self = match left - len {
                    0 => ChunkedReader::DataEnd,
                    left => ChunkedReader::Data { left },
                };
                Piece::Data(len)
            }
            ChunkedReader::DataEnd => match input.get(..2) {
                None => return Ok(None),
                Some(b"\r\n") => {
                    *self = ChunkedReader::Size;
                    Piece::DataEnd
                }
                Some(_) => return Err(ChunkError::DataEnd),
            },
            ChunkedReader::Trailers { taken } => {
                let line = match line(input, MAX_HEAD - taken) {
                    Ok(Some(line)) => line,
                    Ok(None) => return Ok(None),
                    Err(Line::TooLong) => return Err(ChunkError::TrailersTooLarge),
                    Err(Line::BareLf) => return Err(ChunkError::Trailer),
                };
                if line.is_empty() {
                    *self = ChunkedReader::Done;
                    Piece::End
                } else if is_field_line(line) {
                    let len = line.len() + 2;
                    *self = ChunkedReader::Trailers { taken: taken + len };
                    Piece::Trailer(len)
                } else {
                    return Err(ChunkError::Trailer);
                }
            }
            ChunkedReader::Done => return Ok(None),
        };
        Ok(Some(piece))
    }
}

/// Why a line cannot be taken.
enum Line {
    /// It ends in a LF without a CR before it.
    BareLf,
    /// No end within its limit.
    TooLong,
}

/// The line at the front of `input` without its CRLF, once it is in; too long if it is
/// longer than `max` with its CRLF.
fn line(input: &[u8], max: usize) -> Result<Option<&[u8]>, Line> {
    let window = &input[..input.len().min(max)];
    match window.iter().position(|&b| b == b'\n') {
        Some(end) if end > 0 && window[end - 1] == b'\r' => Ok(Some(&window[..end - 1])),
        Some(_) => Err(Line::BareLf),
        None if window.len() == max => Err(Line::TooLong),
        None => Ok(None),
    }
}

/// A chunk-size line's size (RFC 9112, 7.1): `1*HEXDIG *( BWS ";" BWS ext-name
/// [ BWS "=" BWS ext-value ] )`, with no sign, no leading or trailing blanks, no overflow.
fn chunk_size(line: &[u8]) -> Option<usize> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || !are_chunk_extensions(&line[digits..]) {
        return None;
    }
    let digits = std::str::from_utf8(&line[..digits]).ok()?;
    usize::from_str_radix(digits, 16).ok()
}

/// Whether `rest` is a run of chunk extensions, each `BWS ";" BWS token [ BWS "=" BWS
/// ( token / quoted-string ) ]`.
fn are_chunk_extensions(mut rest: &[u8]) -> bool {
    while !rest.is_empty() {
        let Some(after) = skip_blanks(rest).strip_prefix(b";") else {
            return false;
        };
        let after = skip_blanks(after);
        let name = token_len(after);
        if name == 0 {
            return false;
        }
        rest = &after[name..];
        if let Some(value) = skip_blanks(rest).strip_prefix(b"=") {
            let value = skip_blanks(value);
            let len = match value.first() {
                Some(b'"') => quoted_string_len(value),
                _ => token_len(value),
            };
            if len == 0 {
                return false;
            }
            rest = &value[len..];
        }
    }
    true
}

/// A trailer field line: `field-name ":" field-value`, the name a token, the value free of
/// controls but tabs (RFC 9110, 5.5).
fn is_field_line(line: &[u8]) -> bool {
    let name = token_len(line);
    name > 0
        && line[name..].first() == Some(&b':')
        && line[name + 1..]
            .iter()
            .all(|&b| b == b'\t' || !b.is_ascii_control())
}

/// Whether `bytes` is a token (RFC 9110, 5.6.2), as a field's name or a method is.
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && token_len(bytes) == bytes.len()
}

/// Optional blanks (`BWS`): spaces and tabs.
fn skip_blanks(bytes: &[u8]) -> &[u8] {
    let blanks = bytes
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    &bytes[blanks..]
}

/// The length of the token at the front of `bytes` (RFC 9110, 5.6.2).
fn token_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        .count()
}

/// The length of the quoted string at the front of `bytes`, both quotes included, or 0
/// if it is not one (RFC 9110, 5.6.4).
fn quoted_string_len(bytes: &[u8]) -> usize {
    let text = |b: u8| b == b'\t' || b == b' ' || (b > 0x20 && b != 0x7f);
    let mut at = 1;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => return at + 1,
            b'\\' if bytes.get(at + 1).is_some_and(|&next| text(next)) => at += 2,
            b'\\' => return 0,
            b if text(b) => at += 1,
            _ => return 0,
        }
    }
    0
}
