//! RESP, Redis's serialization protocol, without I/O: commands encoded as arrays of bulk
//! strings, replies decoded from a byte buffer as they arrive.
//!
//! The client speaks RESP2: GET, SET and DEL need nothing RESP3 adds, and staying on RESP2
//! saves the `HELLO 3` round trip at every connect and works with any server (HELLO came in
//! Redis 6; Debian 12's redis-server is 7.0). The decoder still reads every RESP3 type
//! (null, boolean, double, big number, verbatim string, blob error, map, set, push,
//! attribute), so that whatever a server or a proxy sends is read safely, never mistaken for
//! something else, and a later `HELLO 3` needs no new decoder.
//!
//! The decoder is bounded ([`Limits`]): a reply longer than `max_len` bytes (a bulk string's
//! declared length is checked before its bytes come), an aggregate of more than
//! `max_elements`, or nesting deeper than `max_depth` is an error, never a buffer that grows
//! without end or a stack that overflows. Nothing in it panics on any input.

#[cfg(test)]
mod tests;

use std::fmt;

/// Nesting deeper than this is refused whatever [`Limits::max_depth`] says: the decoder
/// recurses once per level.
pub const DEPTH_CAP: usize = 32;

/// How much one reply may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one whole reply, its framing included.
    pub max_len: usize,
    /// Elements of one aggregate (a map's keys and values both count).
    pub max_elements: usize,
    /// Aggregates within aggregates: 1 is an array of scalars. At most [`DEPTH_CAP`].
    pub max_depth: usize,
}

impl Default for Limits {
    /// Room for any cached value gnosis writes (an item's JSON is a few hundred bytes) and
    /// for a reply to a general command such as `MGET` of a few thousand keys.
    fn default() -> Self {
        Limits {
            max_len: 4 << 20,
            max_elements: 64 << 10,
            max_depth: 8,
        }
    }
}

/// Why bytes are not a reply. The connection they came on cannot be read any further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// A first byte that is no RESP type (or a streamed RESP3 type, never sent by Redis).
    UnknownType(u8),
    /// Not RESP: a bad length or number, a missing CRLF, a bad boolean, ...
    Malformed(&'static str),
    /// Over [`Limits::max_len`] or [`Limits::max_elements`].
    TooLarge,
    /// Nested deeper than [`Limits::max_depth`].
    TooDeep,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnknownType(byte) => write!(f, "unknown RESP type byte 0x{byte:02x}"),
            DecodeError::Malformed(what) => write!(f, "malformed RESP: {what}"),
            DecodeError::TooLarge => f.write_str("RESP reply over the limits"),
            DecodeError::TooDeep => f.write_str("RESP reply nested too deep"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A reply, borrowed from the bytes it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// `+OK`
    Simple(&'a [u8]),
    /// `-ERR ...`: the command failed; the connection is fine.
    Error(&'a [u8]),
    /// `:1`
    Integer(i64),
    /// `$3\r\nabc`: any bytes.
    Bulk(&'a [u8]),
    /// RESP2's `$-1` and `*-1`, RESP3's `_`: a GET's miss.
    Null,
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `,1.5` (also `inf`, `-inf`, `nan`).
    Double(f64),
    /// RESP3 `(` and its digits, as sent.
    BigNumber(&'a [u8]),
    /// RESP3 `=`: a three-byte format (`txt`, `mkd`) and the text.
    Verbatim {
        format: &'a [u8],
        text: &'a [u8],
    },
    /// RESP3 `!`: an error as a bulk string.
    BlobError(&'a [u8]),
    Array(Aggregate<'a>),
    /// RESP3 `~`.
    Set(Aggregate<'a>),
    /// RESP3 `%`: keys and values alternate in its elements.
    Map(Aggregate<'a>),
    /// RESP3 `>`: out-of-band data (pub/sub, invalidation), not a command's reply.
    Push(Aggregate<'a>),
    /// RESP3 `|`: metadata about the reply that follows it, not a reply itself.
    Attribute(Aggregate<'a>),
}

impl<'a> Value<'a> {
    /// The server's error message, if the reply is an error (`-` or `!`).
    pub fn error(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Error(message) | Value::BlobError(message) => Some(message),
            _ => None,
        }
    }

    /// The reply's bytes, if it is a string of some kind (simple, bulk, verbatim).
    pub fn bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Simple(bytes) | Value::Bulk(bytes) => Some(bytes),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// An aggregate's elements, still encoded (and already checked): [`Aggregate::iter`]
/// decodes them in turn, so that a reply of any shape is read without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aggregate<'a> {
    len: usize,
    /// The elements' bytes, back to back.
    bytes: &'a [u8],
}

impl<'a> Aggregate<'a> {
    /// How many elements (a map's keys and values both count).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> Elements<'a> {
        Elements {
            rest: self.bytes,
            left: self.len,
        }
    }
}

impl<'a> IntoIterator for Aggregate<'a> {
    type Item = Value<'a>;
    type IntoIter = Elements<'a>;

    fn into_iter(self) -> Elements<'a> {
        self.iter()
    }
}

/// The elements of an [`Aggregate`], decoded one at a time.
#[derive(Clone, Debug)]
pub struct Elements<'a> {
    rest: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        // Checked whole when the aggregate was decoded: this cannot fail. Were it to, the
        // iteration ends rather than panics.
        let limits = Limits {
            max_len: usize::MAX,
            max_elements: usize::MAX,
            max_depth: DEPTH_CAP,
        };
        let mut reader = Reader {
            input: self.rest,
            at: 0,
            limits,
        };
        match reader.value(0) {
            Ok(Some(value)) => {
                self.rest = &self.rest[reader.at..];
                self.left -= 1;
                Some(value)
            }
            _ => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Appends the command `args` (its name first) as a RESP array of bulk strings: any bytes,
/// CR and LF and NUL included, go as they are.
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    let mut number = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(number.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(number.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Decodes the reply at the start of `input`: `Ok(None)` when `input` holds only part of it
/// (call again with more), else the reply and how many bytes it took. Each call reads the
/// reply from its first byte, so a reply arriving in `k` pieces is scanned `k` times; the
/// limits bound that too.
pub fn decode<'a>(
    input: &'a [u8],
    limits: &Limits,
) -> Result<Option<(Value<'a>, usize)>, DecodeError> {
    let mut reader = Reader {
        input,
        at: 0,
        limits: *limits,
    };
    match reader.value(0)? {
        Some(_) if reader.at > limits.max_len => Err(DecodeError::TooLarge),
        Some(value) => Ok(Some((value, reader.at))),
        // The reply runs to the end of the input, and there is more of it to come.
        None if input.len() > limits.max_len => Err(DecodeError::TooLarge),
        None => Ok(None),
    }
}

/// A cursor over the input: `Ok(None)` from any of its reads means the input ends first.
struct Reader<'a> {
    input: &'a [u8],
    at: usize,
    limits: Limits,
}

/// `?` for "need more": returns `Ok(None)` from the enclosing function.
macro_rules! more {
    ($read:expr) => {
        match $read? {
            Some(value) => value,
            None => return Ok(None),
        }
    };
}

impl<'a> Reader<'a> {
    /// The value at the cursor, `depth` aggregates in.
    fn value(&mut self, depth: usize) -> Result<Option<Value<'a>>, DecodeError> {
        let Some(&kind) = self.input.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        let value = match kind {
            b'+' => Value::Simple(more!(self.line())),
            b'-' => Value::Error(more!(self.line())),
            b':' => Value::Integer(parse_integer(more!(self.line()))?),
            b'$' => match more!(self.nullable_count()) {
                None => Value::Null,
                Some(len) => Value::Bulk(more!(self.blob(len))),
            },
            b'!' => {
                let len = more!(self.count());
                Value::BlobError(more!(self.blob(len)))
            }
            b'=' => {
                let len = more!(self.count());
                match more!(self.blob(len)) {
                    blob if blob.get(3) == Some(&b':') => Value::Verbatim {
                        format: &blob[..3],
                        text: &blob[4..],
                    },
                    _ => return Err(DecodeError::Malformed("a verbatim string's format")),
                }
            }
            b'_' => match more!(self.line()) {
                [] => Value::Null,
                _ => return Err(DecodeError::Malformed("a null with data")),
            },
            b'#' => match more!(self.line()) {
                b"t" => Value::Boolean(true),
                b"f" => Value::Boolean(false),
                _ => return Err(DecodeError::Malformed("a boolean neither t nor f")),
            },
            b',' => Value::Double(parse_double(more!(self.line()))?),
            b'(' => {
                let digits = more!(self.line());
                let unsigned = digits.strip_prefix(b"-").unwrap_or(digits);
                if unsigned.is_empty() || !unsigned.iter().all(u8::is_ascii_digit) {
                    return Err(DecodeError::Malformed("a big number's digits"));
                }
                Value::BigNumber(digits)
            }
            b'*' => match more!(self.nullable_count()) {
                None => Value::Null,
                Some(len) => Value::Array(more!(self.elements(len, depth))),
            },
            b'~' => Value::Set(more!(self.aggregate(1, depth))),
            b'>' => Value::Push(more!(self.aggregate(1, depth))),
            b'%' => Value::Map(more!(self.aggregate(2, depth))),
            b'|' => Value::Attribute(more!(self.aggregate(2, depth))),
            other => return Err(DecodeError::UnknownType(other)),
        };
        Ok(Some(value))
    }

    /// The line at the cursor, up to its CRLF (which is passed). A CR must be followed by
    /// LF; a line that goes on past `max_len` is refused before its end comes.
    fn line(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let rest = &self.input[self.at..];
        let Some(cr) = rest.iter().position(|&byte| byte == b'\r') else {
            if rest.len() > self.limits.max_len {
                return Err(DecodeError::TooLarge);
            }
            return Ok(None);
        };
        match rest.get(cr + 1) {
            None => Ok(None),
            Some(b'\n') => {
                self.at += cr + 2;
                Ok(Some(&rest[..cr]))
            }
            Some(_) => Err(DecodeError::Malformed("a CR without LF")),
        }
    }

    /// A length line.
    fn count(&mut self) -> Result<Option<usize>, DecodeError> {
        let line = more!(self.line());
        parse_length(line).map(Some)
    }

    /// A length line that may be -1: RESP2's null bulk string and null array (`None`).
    fn nullable_count(&mut self) -> Result<Option<Option<usize>>, DecodeError> {
        match more!(self.line()) {
            b"-1" => Ok(Some(None)),
            line => parse_length(line).map(|len| Some(Some(len))),
        }
    }

    /// `len` bytes and the CRLF after them; a `len` over `max_len` is refused at once.
    fn blob(&mut self, len: usize) -> Result<Option<&'a [u8]>, DecodeError> {
        if len > self.limits.max_len {
            return Err(DecodeError::TooLarge);
        }
        let rest = &self.input[self.at..];
        if rest.len() < len + 2 {
            // What has come must not already contradict the CRLF.
            if rest.len() == len + 1 && rest[len] != b'\r' {
                return Err(DecodeError::Malformed("a bulk string without its CRLF"));
            }
            return Ok(None);
        }
        if &rest[len..len + 2] != b"\r\n" {
            return Err(DecodeError::Malformed("a bulk string without its CRLF"));
        }
        self.at += len + 2;
        Ok(Some(&rest[..len]))
    }

    /// An aggregate of `count` entries of `per_entry` elements (a map's entries are pairs).
    fn aggregate(
        &mut self,
        per_entry: usize,
        depth: usize,
    ) -> Result<Option<Aggregate<'a>>, DecodeError> {
        let count = more!(self.count());
        let len = count.checked_mul(per_entry).ok_or(DecodeError::TooLarge)?;
        self.elements(len, depth)
    }

    /// `len` elements of an aggregate `depth` aggregates in, checked whole.
    fn elements(&mut self, len: usize, depth: usize) -> Result<Option<Aggregate<'a>>, DecodeError> {
        if len > self.limits.max_elements {
            return Err(DecodeError::TooLarge);
        }
        if depth + 1 > self.limits.max_depth.min(DEPTH_CAP) {
            return Err(DecodeError::TooDeep);
        }
        let start = self.at;
        for _ in 0..len {
            more!(self.value(depth + 1));
            // Each element takes three bytes or more: a count far over what can come is
            // refused early rather than scanned for again at every arrival.
            if self.at > self.limits.max_len {
                return Err(DecodeError::TooLarge);
            }
        }
        Ok(Some(Aggregate {
            len,
            bytes: &self.input[start..self.at],
        }))
    }
}

/// A length: decimal digits only, no sign, within a `usize`.
fn parse_length(line: &[u8]) -> Result<usize, DecodeError> {
    let bad = DecodeError::Malformed("a length");
    if line.is_empty() {
        return Err(bad);
    }
    line.iter()
        .try_fold(0usize, |n, &digit| {
            let digit = digit.is_ascii_digit().then(|| usize::from(digit - b'0'));
            n.checked_mul(10)?.checked_add(digit?)
        })
        .ok_or(bad)
}

/// A signed 64-bit integer: an optional `-` or `+`, then decimal digits, no overflow.
fn parse_integer(line: &[u8]) -> Result<i64, DecodeError> {
    let bad = DecodeError::Malformed("an integer");
    let (negative, digits) = match line {
        [b'-', digits @ ..] => (true, digits),
        [b'+', digits @ ..] => (false, digits),
        digits => (false, digits),
    };
    if digits.is_empty() {
        return Err(bad);
    }
    let mut n: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return Err(bad);
        }
        let digit = i64::from(digit - b'0');
        // Accumulated negative, so that i64::MIN fits.
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_sub(digit))
            .ok_or(bad)?;
    }
    match negative {
        true => Ok(n),
        false => n.checked_neg().ok_or(bad),
    }
}

/// A RESP3 double: a decimal with an optional exponent, `inf`, `-inf` or `nan`.
fn parse_double(line: &[u8]) -> Result<f64, DecodeError> {
    let bad = DecodeError::Malformed("a double");
    let text = std::str::from_utf8(line).map_err(|_| bad)?;
    // Rust also reads "infinity" and "NaN" in any case; RESP3 writes the three below.
    let allowed = |byte: u8| byte.is_ascii_digit() || b"+-.eE".contains(&byte);
    match text {
        "inf" | "+inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => Ok(f64::NAN),
        _ if !text.is_empty() && text.bytes().all(allowed) => text.parse().map_err(|_| bad),
        _ => Err(bad),
    }
}
