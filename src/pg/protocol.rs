//! The PostgreSQL v3 wire protocol, apart from any I/O: encoders that append frontend messages
//! to a byte buffer, and an incremental decoder that takes backend messages out of one.
//!
//! The decoder validates every length before slicing, so any byte sequence yields either a
//! message, "need more bytes" or an error, never a panic.

/// Type oids the client encodes or decodes.
pub const INT4_OID: u32 = 23;
pub const INT4_ARRAY_OID: u32 = 1007;
pub const TEXT_OID: u32 = 25;
pub const VARCHAR_OID: u32 = 1043;
pub const BPCHAR_OID: u32 = 1042;
pub const NAME_OID: u32 = 19;
pub const BOOL_OID: u32 = 16;
pub const INT8_OID: u32 = 20;
pub const JSONB_OID: u32 = 3802;

/// The default bound on a backend message's length; a longer one is refused as garbage from
/// its header, before the read buffer grows for it. What gnosis reads is far smaller: a world
/// row is 22 bytes, a fortune row under 200, an ErrorResponse a few hundred; 64 KiB leaves
/// room for any ErrorResponse PostgreSQL sends (it never includes the query's text) and is
/// the connection's initial read buffer, which therefore never grows far.
pub const MAX_MESSAGE_LEN: usize = 64 << 10;

const PROTOCOL_VERSION_3: i32 = 196_608;

/// The type bytes of every backend message `decode` knows.
const BACKEND_TAGS: &[u8] = b"RSKZ123nsItTDCENAv";

/// A parameter, always sent in binary.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Int4(i32),
    Int8(i64),
    Int4Array(&'a [i32]),
}

/// Why an encoder refused a message; it appended nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// This string, sent NUL-terminated, has a NUL inside.
    Nul(&'static str),
    /// This length or count does not fit its field of the message.
    TooLong(&'static str),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::Nul(what) => write!(f, "the {what} contains a NUL byte"),
            EncodeError::TooLong(what) => write!(f, "the {what} is too long for the protocol"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Appends one message: `tag` (none for the StartupMessage), its length, then what `body`
/// writes. If `body` fails, or the message is too long for its length field, the buffer is
/// left as it was.
fn message(
    buf: &mut Vec<u8>,
    tag: Option<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = buf.len();
    buf.extend(tag);
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    // The length counts itself, not the tag.
    let result = body(buf).and_then(|()| {
        let len = i32::try_from(buf.len() - at).map_err(|_| EncodeError::TooLong("message"))?;
        buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    });
    if result.is_err() {
        buf.truncate(start);
    }
    result
}

fn put_i32_len(buf: &mut Vec<u8>, len: usize, what: &'static str) -> Result<(), EncodeError> {
    let len = i32::try_from(len).map_err(|_| EncodeError::TooLong(what))?;
    buf.extend_from_slice(&len.to_be_bytes());
    Ok(())
}

/// An Int16 count (of parameters, of their types).
fn put_count(buf: &mut Vec<u8>, count: usize, what: &'static str) -> Result<(), EncodeError> {
    let count = u16::try_from(count).map_err(|_| EncodeError::TooLong(what))?;
    buf.extend_from_slice(&count.to_be_bytes());
    Ok(())
}

fn put_cstr(buf: &mut Vec<u8>, s: &str, what: &'static str) -> Result<(), EncodeError> {
    if s.as_bytes().contains(&0) {
        return Err(EncodeError::Nul(what));
    }
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    Ok(())
}

pub fn startup(buf: &mut Vec<u8>, user: &str, database: &str) -> Result<(), EncodeError> {
    message(buf, None, |buf| {
        buf.extend_from_slice(&PROTOCOL_VERSION_3.to_be_bytes());
        for (key, value, what) in [
            ("user", user, "user name"),
            ("database", database, "database name"),
            ("client_encoding", "UTF8", "encoding"),
            ("application_name", "gnosis", "application name"),
        ] {
            put_cstr(buf, key, "parameter name")?;
            put_cstr(buf, value, what)?;
        }
        buf.push(0);
        Ok(())
    })
}

/// PasswordMessage: a cleartext or MD5-hashed password.
pub fn password(buf: &mut Vec<u8>, password: &str) -> Result<(), EncodeError> {
    message(buf, Some(b'p'), |buf| put_cstr(buf, password, "password"))
}

pub fn sasl_initial_response(
    buf: &mut Vec<u8>,
    mechanism: &str,
    data: &[u8],
) -> Result<(), EncodeError> {
    message(buf, Some(b'p'), |buf| {
        put_cstr(buf, mechanism, "SASL mechanism")?;
        put_i32_len(buf, data.len(), "SASL response")?;
        buf.extend_from_slice(data);
        Ok(())
    })
}

pub fn sasl_response(buf: &mut Vec<u8>, data: &[u8]) -> Result<(), EncodeError> {
    message(buf, Some(b'p'), |buf| {
        buf.extend_from_slice(data);
        Ok(())
    })
}

pub fn parse(
    buf: &mut Vec<u8>,
    name: &str,
    sql: &str,
    param_types: &[u32],
) -> Result<(), EncodeError> {
    message(buf, Some(b'P'), |buf| {
        put_cstr(buf, name, "statement name")?;
        put_cstr(buf, sql, "statement text")?;
        put_count(buf, param_types.len(), "parameter type list")?;
        for oid in param_types {
            buf.extend_from_slice(&oid.to_be_bytes());
        }
        Ok(())
    })
}

/// Bind to the unnamed portal with every parameter and every result column in binary.
pub fn bind(buf: &mut Vec<u8>, statement: &str, params: &[Param]) -> Result<(), EncodeError> {
    message(buf, Some(b'B'), |buf| {
        buf.push(0); // unnamed portal
        put_cstr(buf, statement, "statement name")?;
        buf.extend_from_slice(&1u16.to_be_bytes()); // one format code for all parameters:
        buf.extend_from_slice(&1u16.to_be_bytes()); // binary
        put_count(buf, params.len(), "parameter list")?;
        for param in params {
            match *param {
                Param::Int4(value) => {
                    buf.extend_from_slice(&4i32.to_be_bytes());
                    buf.extend_from_slice(&value.to_be_bytes());
                }
                Param::Int8(value) => {
                    buf.extend_from_slice(&8i32.to_be_bytes());
                    buf.extend_from_slice(&value.to_be_bytes());
                }
                Param::Int4Array(values) => {
                    // ndim, has-nulls flag, element oid, then (length, lower bound) per
                    // dimension, then (length, value) per element.
                    let len = values.len().checked_mul(8).and_then(|n| n.checked_add(20));
                    put_i32_len(buf, len.unwrap_or(usize::MAX), "int4 array")?;
                    buf.extend_from_slice(&1i32.to_be_bytes());
                    buf.extend_from_slice(&0i32.to_be_bytes());
                    buf.extend_from_slice(&INT4_OID.to_be_bytes());
                    put_i32_len(buf, values.len(), "int4 array")?;
                    buf.extend_from_slice(&1i32.to_be_bytes());
                    for value in values {
                        buf.extend_from_slice(&4i32.to_be_bytes());
                        buf.extend_from_slice(&value.to_be_bytes());
                    }
                }
            }
        }
        buf.extend_from_slice(&1u16.to_be_bytes()); // one format code for all results:
        buf.extend_from_slice(&1u16.to_be_bytes()); // binary
        Ok(())
    })
}

/// Describe a prepared statement (its parameter types and result columns).
pub fn describe_statement(buf: &mut Vec<u8>, name: &str) -> Result<(), EncodeError> {
    message(buf, Some(b'D'), |buf| {
        buf.push(b'S');
        put_cstr(buf, name, "statement name")
    })
}

/// Execute the unnamed portal, all rows.
pub fn execute(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
}

pub fn sync(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'S', 0, 0, 0, 4]);
}

pub fn terminate(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'X', 0, 0, 0, 4]);
}

/// What the server asks for in an Authentication message.
#[derive(Debug, PartialEq, Eq)]
pub enum Auth<'a> {
    Ok,
    Cleartext,
    Md5 {
        salt: [u8; 4],
    },
    /// The NUL-terminated list of SASL mechanism names, as sent.
    Sasl(&'a [u8]),
    SaslContinue(&'a [u8]),
    SaslFinal(&'a [u8]),
    /// A method this client does not implement (Kerberos, SCM, GSS, SSPI, ...).
    Unsupported(u32),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Authentication(Auth<'a>),
    ParameterStatus,
    BackendKeyData,
    ReadyForQuery(u8),
    ParseComplete,
    BindComplete,
    CloseComplete,
    NoData,
    PortalSuspended,
    ParameterDescription,
    RowDescription(RowDescription<'a>),
    DataRow(DataRow<'a>),
    CommandComplete,
    EmptyQueryResponse,
    ErrorResponse(ErrorFields<'a>),
    NoticeResponse,
    NotificationResponse,
    NegotiateProtocolVersion,
}

impl Message<'_> {
    /// The message's name, for error reports.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Authentication(_) => "Authentication",
            Message::ParameterStatus => "ParameterStatus",
            Message::BackendKeyData => "BackendKeyData",
            Message::ReadyForQuery(_) => "ReadyForQuery",
            Message::ParseComplete => "ParseComplete",
            Message::BindComplete => "BindComplete",
            Message::CloseComplete => "CloseComplete",
            Message::NoData => "NoData",
            Message::PortalSuspended => "PortalSuspended",
            Message::ParameterDescription => "ParameterDescription",
            Message::RowDescription(_) => "RowDescription",
            Message::DataRow(_) => "DataRow",
            Message::CommandComplete => "CommandComplete",
            Message::EmptyQueryResponse => "EmptyQueryResponse",
            Message::ErrorResponse(_) => "ErrorResponse",
            Message::NoticeResponse => "NoticeResponse",
            Message::NotificationResponse => "NotificationResponse",
            Message::NegotiateProtocolVersion => "NegotiateProtocolVersion",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError(pub &'static str);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Takes one backend message off the front of `buf`: `Ok(Some((message, bytes used)))`,
/// `Ok(None)` if the message is not complete yet, or an error for bytes that cannot be one
/// (among them a length over [`MAX_MESSAGE_LEN`]).
pub fn decode(buf: &[u8]) -> Result<Option<(Message<'_>, usize)>, ProtocolError> {
    decode_within(buf, MAX_MESSAGE_LEN)
}

/// `decode` with a message length limit of `max_len` bytes (tag excluded), checked as soon as
/// the header is there.
pub fn decode_within(
    buf: &[u8],
    max_len: usize,
) -> Result<Option<(Message<'_>, usize)>, ProtocolError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let tag = buf[0];
    if !BACKEND_TAGS.contains(&tag) {
        return Err(ProtocolError("unknown message type"));
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len < 4 {
        return Err(ProtocolError("message length below 4"));
    }
    if len > max_len {
        return Err(ProtocolError("message longer than the limit"));
    }
    if buf.len() < len + 1 {
        return Ok(None);
    }
    let body = &buf[5..len + 1];
    let message = decode_body(tag, body)?;
    Ok(Some((message, len + 1)))
}

fn expect_empty(body: &[u8], message: Message<'static>) -> Result<Message<'static>, ProtocolError> {
    if body.is_empty() {
        Ok(message)
    } else {
        Err(ProtocolError("unexpected bytes in an empty message"))
    }
}

fn decode_body(tag: u8, body: &[u8]) -> Result<Message<'_>, ProtocolError> {
    Ok(match tag {
        b'R' => Message::Authentication(decode_auth(body)?),
        b'S' => {
            let mut r = Reader(body);
            r.cstr()?;
            r.cstr()?;
            r.end()?;
            Message::ParameterStatus
        }
        b'K' => {
            if body.len() != 8 {
                return Err(ProtocolError("BackendKeyData of the wrong size"));
            }
            Message::BackendKeyData
        }
        b'Z' => match body {
            [status @ (b'I' | b'T' | b'E')] => Message::ReadyForQuery(*status),
            _ => return Err(ProtocolError("bad ReadyForQuery")),
        },
        b'1' => expect_empty(body, Message::ParseComplete)?,
        b'2' => expect_empty(body, Message::BindComplete)?,
        b'3' => expect_empty(body, Message::CloseComplete)?,
        b'n' => expect_empty(body, Message::NoData)?,
        b's' => expect_empty(body, Message::PortalSuspended)?,
        b'I' => expect_empty(body, Message::EmptyQueryResponse)?,
        b't' => {
            let mut r = Reader(body);
            let count = r.u16()? as usize;
            r.take(count * 4)?;
            r.end()?;
            Message::ParameterDescription
        }
        b'T' => Message::RowDescription(RowDescription::validate(body)?),
        b'D' => Message::DataRow(DataRow::validate(body)?),
        b'C' => {
            let mut r = Reader(body);
            r.cstr()?;
            r.end()?;
            Message::CommandComplete
        }
        b'E' => Message::ErrorResponse(ErrorFields::validate(body)?),
        b'N' => {
            ErrorFields::validate(body)?;
            Message::NoticeResponse
        }
        b'A' => {
            let mut r = Reader(body);
            r.take(4)?;
            r.cstr()?;
            r.cstr()?;
            r.end()?;
            Message::NotificationResponse
        }
        b'v' => Message::NegotiateProtocolVersion,
        _ => return Err(ProtocolError("unknown message type")),
    })
}

fn decode_auth(body: &[u8]) -> Result<Auth<'_>, ProtocolError> {
    let mut r = Reader(body);
    let code = r.u32()?;
    let auth = match code {
        0 => Auth::Ok,
        3 => Auth::Cleartext,
        5 => {
            let salt = r.take(4)?;
            Auth::Md5 {
                salt: [salt[0], salt[1], salt[2], salt[3]],
            }
        }
        10 => {
            let list = r.rest();
            if list.last() != Some(&0) {
                return Err(ProtocolError("unterminated SASL mechanism list"));
            }
            return Ok(Auth::Sasl(list));
        }
        11 => return Ok(Auth::SaslContinue(r.rest())),
        12 => return Ok(Auth::SaslFinal(r.rest())),
        other => return Ok(Auth::Unsupported(other)),
    };
    r.end()?;
    Ok(auth)
}

/// A bounds-checked cursor over a message body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        if self.0.len() < n {
            return Err(ProtocolError("message shorter than its contents"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u16(&mut self) -> Result<u16, ProtocolError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, ProtocolError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn cstr(&mut self) -> Result<&'a [u8], ProtocolError> {
        let end = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or(ProtocolError("unterminated string"))?;
        let s = &self.0[..end];
        self.0 = &self.0[end + 1..];
        Ok(s)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }

    fn end(&self) -> Result<(), ProtocolError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ProtocolError("trailing bytes in message"))
        }
    }
}

/// A DataRow body whose column lengths have been checked against its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRow<'a> {
    count: u16,
    columns: &'a [u8],
}

impl<'a> DataRow<'a> {
    fn validate(body: &'a [u8]) -> Result<Self, ProtocolError> {
        let mut r = Reader(body);
        let count = r.u16()?;
        let columns = r.0;
        for _ in 0..count {
            let len = r.u32()? as i32;
            if len >= 0 {
                r.take(len as usize)?;
            } else if len != -1 {
                return Err(ProtocolError("negative column length"));
            }
        }
        r.end()?;
        Ok(DataRow { count, columns })
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The row's size on the wire, without the message's tag and length.
    pub fn size(&self) -> usize {
        2 + self.columns.len()
    }

    /// Column `index`: `None` past the end, `Some(None)` for NULL.
    pub fn get(&self, index: usize) -> Option<Option<&'a [u8]>> {
        if index >= self.len() {
            return None;
        }
        let mut rest = self.columns;
        let mut i = 0;
        loop {
            // validate() checked every length, so these slices are in bounds.
            let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            rest = &rest[4..];
            let value = if len < 0 {
                None
            } else {
                let (value, tail) = rest.split_at(len as usize);
                rest = tail;
                Some(value)
            };
            if i == index {
                return Some(value);
            }
            i += 1;
        }
    }
}

/// A value read from one binary result column whose type is one of `OIDS`: the decoding of
/// each type the client reads, in one place. Bytes of the wrong length or form are an error,
/// never a panic.
pub trait ColumnValue<'a>: Sized {
    /// The type oids whose binary form `decode` reads.
    const OIDS: &'static [u32];
    /// The PostgreSQL type's name, for errors.
    const NAME: &'static str;
    fn decode(bytes: &'a [u8]) -> Result<Self, ProtocolError>;
}

impl ColumnValue<'_> for bool {
    const OIDS: &'static [u32] = &[BOOL_OID];
    const NAME: &'static str = "bool";
    fn decode(bytes: &[u8]) -> Result<bool, ProtocolError> {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err(ProtocolError("bool not one byte of 0 or 1")),
        }
    }
}

impl ColumnValue<'_> for i32 {
    const OIDS: &'static [u32] = &[INT4_OID];
    const NAME: &'static str = "int4";
    fn decode(bytes: &[u8]) -> Result<i32, ProtocolError> {
        let bytes = bytes
            .try_into()
            .map_err(|_| ProtocolError("int4 of the wrong size"))?;
        Ok(i32::from_be_bytes(bytes))
    }
}

impl ColumnValue<'_> for i64 {
    const OIDS: &'static [u32] = &[INT8_OID];
    const NAME: &'static str = "int8";
    fn decode(bytes: &[u8]) -> Result<i64, ProtocolError> {
        let bytes = bytes
            .try_into()
            .map_err(|_| ProtocolError("int8 of the wrong size"))?;
        Ok(i64::from_be_bytes(bytes))
    }
}

/// text, varchar, char and name: in binary, the UTF-8 bytes themselves.
impl<'a> ColumnValue<'a> for &'a str {
    const OIDS: &'static [u32] = &[TEXT_OID, VARCHAR_OID, BPCHAR_OID, NAME_OID];
    const NAME: &'static str = "text";
    fn decode(bytes: &'a [u8]) -> Result<&'a str, ProtocolError> {
        std::str::from_utf8(bytes).map_err(|_| ProtocolError("text is not UTF-8"))
    }
}

/// A jsonb column's JSON text, as the server wrote it (valid JSON: the server checked it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jsonb<'a>(pub &'a str);

impl<'a> ColumnValue<'a> for Jsonb<'a> {
    const OIDS: &'static [u32] = &[JSONB_OID];
    const NAME: &'static str = "jsonb";
    /// Binary jsonb is a version byte, 1 (the only one there is), then the JSON text.
    fn decode(bytes: &'a [u8]) -> Result<Jsonb<'a>, ProtocolError> {
        match bytes.split_first() {
            Some((1, text)) => std::str::from_utf8(text)
                .map(Jsonb)
                .map_err(|_| ProtocolError("jsonb text is not UTF-8")),
            Some(_) => Err(ProtocolError("jsonb of an unknown version")),
            None => Err(ProtocolError("jsonb without its version byte")),
        }
    }
}

/// A RowDescription body, validated; yields each column's type oid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowDescription<'a>(&'a [u8]);

impl<'a> RowDescription<'a> {
    fn validate(body: &'a [u8]) -> Result<Self, ProtocolError> {
        let mut r = Reader(body);
        let count = r.u16()?;
        for _ in 0..count {
            r.cstr()?;
            r.take(18)?; // table oid, column number, type oid, type size, type modifier, format
        }
        r.end()?;
        Ok(RowDescription(body))
    }

    pub fn type_oids(&self) -> Vec<u32> {
        let mut r = Reader(self.0);
        let count = r.u16().unwrap_or(0);
        let mut oids = Vec::with_capacity(count as usize);
        for _ in 0..count {
            // Validated above: these cannot fail, but stay panic-free regardless.
            let (Ok(_), Ok(field)) = (r.cstr(), r.take(18)) else {
                break;
            };
            oids.push(u32::from_be_bytes([field[6], field[7], field[8], field[9]]));
        }
        oids
    }
}

/// The fields of an ErrorResponse or NoticeResponse, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorFields<'a>(&'a [u8]);

impl<'a> ErrorFields<'a> {
    fn validate(body: &'a [u8]) -> Result<Self, ProtocolError> {
        let mut r = Reader(body);
        loop {
            let kind = r.take(1)?[0];
            if kind == 0 {
                break;
            }
            r.cstr()?;
        }
        r.end()?;
        Ok(ErrorFields(body))
    }

    /// The field of the given type, escaped for a log line ([`printable`], invalid UTF-8
    /// replaced); "" if absent.
    pub fn text(&self, wanted: u8) -> String {
        self.raw(wanted)
            .map(|value| printable(&String::from_utf8_lossy(value)))
            .unwrap_or_default()
    }

    /// The field of the given type (`b'C'` code, `b'M'` message, `b'V'` severity, ...), if
    /// it is UTF-8.
    pub fn field(&self, wanted: u8) -> Option<&'a str> {
        std::str::from_utf8(self.raw(wanted)?).ok()
    }

    fn raw(&self, wanted: u8) -> Option<&'a [u8]> {
        let mut r = Reader(self.0);
        loop {
            let kind = r.take(1).ok()?[0];
            if kind == 0 {
                return None;
            }
            let value = r.cstr().ok()?;
            if kind == wanted {
                return Some(value);
            }
        }
    }
}

/// Text the server sent, made safe for one log line: control characters (newlines, escape
/// sequences that would drive a terminal) and backslashes are escaped as Rust writes them
/// (`\n`, `\u{1b}`, `\\`), so that nothing the server says can forge or hide log lines.
/// Every log line carrying server text goes through this.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\\' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A scripted server for unit tests: encoders of backend messages, and a splitter of what a
/// client wrote into frontend messages.
#[cfg(test)]
pub(crate) mod script {
    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn auth(code: u32, data: &[u8]) -> Vec<u8> {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice(data);
        message(b'R', &body)
    }

    pub fn auth_ok() -> Vec<u8> {
        auth(0, b"")
    }

    pub fn auth_cleartext() -> Vec<u8> {
        auth(3, b"")
    }

    pub fn auth_md5(salt: [u8; 4]) -> Vec<u8> {
        auth(5, &salt)
    }

    pub fn auth_sasl(mechanisms: &[&str]) -> Vec<u8> {
        let mut list = Vec::new();
        for mechanism in mechanisms {
            list.extend_from_slice(mechanism.as_bytes());
            list.push(0);
        }
        list.push(0);
        auth(10, &list)
    }

    pub fn sasl_continue(data: &str) -> Vec<u8> {
        auth(11, data.as_bytes())
    }

    pub fn sasl_final(data: &str) -> Vec<u8> {
        auth(12, data.as_bytes())
    }

    pub fn parameter_status(name: &str, value: &str) -> Vec<u8> {
        message(b'S', format!("{name}\0{value}\0").as_bytes())
    }

    pub fn backend_key_data() -> Vec<u8> {
        message(b'K', &[0, 0, 0, 42, 1, 2, 3, 4])
    }

    pub fn ready() -> Vec<u8> {
        message(b'Z', b"I")
    }

    pub fn parse_complete() -> Vec<u8> {
        message(b'1', b"")
    }

    pub fn bind_complete() -> Vec<u8> {
        message(b'2', b"")
    }

    pub fn no_data() -> Vec<u8> {
        message(b'n', b"")
    }

    pub fn parameter_description(oids: &[u32]) -> Vec<u8> {
        let mut body = (oids.len() as u16).to_be_bytes().to_vec();
        for oid in oids {
            body.extend_from_slice(&oid.to_be_bytes());
        }
        message(b't', &body)
    }

    pub fn row_description(oids: &[u32]) -> Vec<u8> {
        let mut body = (oids.len() as u16).to_be_bytes().to_vec();
        for (i, oid) in oids.iter().enumerate() {
            body.extend_from_slice(format!("c{i}\0").as_bytes());
            body.extend_from_slice(&[0; 6]); // table oid, column number
            body.extend_from_slice(&oid.to_be_bytes());
            body.extend_from_slice(&[0; 8]); // type size, type modifier, format
        }
        message(b'T', &body)
    }

    /// A row of int4 columns.
    pub fn data_row(values: &[i32]) -> Vec<u8> {
        let mut body = (values.len() as u16).to_be_bytes().to_vec();
        for value in values {
            body.extend_from_slice(&4i32.to_be_bytes());
            body.extend_from_slice(&value.to_be_bytes());
        }
        message(b'D', &body)
    }

    pub fn command_complete(tag: &str) -> Vec<u8> {
        message(b'C', format!("{tag}\0").as_bytes())
    }

    pub fn error(severity: &str, code: &str, text: &str) -> Vec<u8> {
        let body = format!("S{severity}\0V{severity}\0C{code}\0M{text}\0\0");
        message(b'E', body.as_bytes())
    }

    pub fn notice(text: &str) -> Vec<u8> {
        message(b'N', format!("SNOTICE\0M{text}\0\0").as_bytes())
    }

    /// A client's bytes as (tag, body) messages; a start-up message first, with tag 0, when
    /// `startup` says one is there. Panics on a malformed stream: the client wrote it.
    pub fn frontend(mut bytes: &[u8], startup: bool) -> Vec<(u8, Vec<u8>)> {
        let mut messages = Vec::new();
        if startup {
            let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
            messages.push((0, bytes[4..len].to_vec()));
            bytes = &bytes[len..];
        }
        while !bytes.is_empty() {
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            messages.push((bytes[0], bytes[5..len + 1].to_vec()));
            bytes = &bytes[len + 1..];
        }
        messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn data_row_columns_and_nulls() {
        let mut body = vec![0, 3];
        body.extend_from_slice(&4u32.to_be_bytes());
        body.extend_from_slice(&7i32.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&2u32.to_be_bytes());
        body.extend_from_slice(b"hi");
        let bytes = message(b'D', &body);
        let (msg, used) = decode(&bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        let Message::DataRow(row) = msg else {
            panic!("not a DataRow: {msg:?}")
        };
        assert_eq!(row.len(), 3);
        assert_eq!(row.get(0), Some(Some(&7i32.to_be_bytes()[..])));
        assert_eq!(row.get(1), Some(None));
        assert_eq!(row.get(2), Some(Some(&b"hi"[..])));
        assert_eq!(row.get(3), None);
    }

    #[test]
    fn partial_messages_wait_for_more() {
        let bytes = message(b'Z', b"I");
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), Ok(None));
        }
        assert_eq!(
            decode(&bytes),
            Ok(Some((Message::ReadyForQuery(b'I'), bytes.len())))
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode(&[b'D', 0, 0, 0, 2]).is_err());
        assert!(decode(&[b'D', 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode(&message(b'?', b"")).is_err());
        // A column claiming more bytes than the row holds.
        let mut body = vec![0, 1];
        body.extend_from_slice(&100u32.to_be_bytes());
        assert!(decode(&message(b'D', &body)).is_err());
        assert!(decode(&message(b'Z', b"X")).is_err());
    }

    #[test]
    fn bind_encodes_binary_params() {
        let mut buf = Vec::new();
        bind(&mut buf, "w", &[Param::Int4(42), Param::Int4Array(&[1, 2])]).unwrap();
        assert_eq!(buf[0], b'B');
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        assert_eq!(len + 1, buf.len());
        let expected_tail: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 2, 0, 1, 0, 1];
        assert!(buf.ends_with(expected_tail));
        assert!(buf.windows(4).any(|w| w == 42i32.to_be_bytes()));
    }

    #[test]
    fn execute_asks_for_all_rows_of_the_unnamed_portal() {
        let mut buf = Vec::new();
        execute(&mut buf);
        assert_eq!(buf, message(b'E', &[0, 0, 0, 0, 0]));
    }

    /// Each encoder, given a string with a NUL where a C string goes, refuses and leaves the
    /// buffer as it was.
    #[test]
    fn c_strings_with_a_nul_are_refused_and_nothing_is_written() {
        type Encoder = fn(&mut Vec<u8>) -> Result<(), EncodeError>;
        let cases: [(Encoder, &str); 8] = [
            (|b| startup(b, "us\0er", "db"), "user name"),
            (|b| startup(b, "user", "d\0b"), "database name"),
            (|b| password(b, "se\0cret"), "password"),
            (
                |b| sasl_initial_response(b, "SCRAM\0", b"n,,"),
                "SASL mechanism",
            ),
            (|b| parse(b, "w\0", "SELECT 1", &[]), "statement name"),
            (|b| parse(b, "w", "SELECT 1\0; DROP", &[]), "statement text"),
            (|b| bind(b, "w\0", &[]), "statement name"),
            (|b| describe_statement(b, "\0"), "statement name"),
        ];
        for (encode, what) in cases {
            let mut buf = b"before".to_vec();
            assert_eq!(encode(&mut buf), Err(EncodeError::Nul(what)));
            assert_eq!(buf, b"before", "{what}");
        }
    }

    #[test]
    fn counts_past_int16_are_refused() {
        let types = vec![INT4_OID; usize::from(u16::MAX) + 1];
        let params = vec![Param::Int4(1); types.len()];
        let mut buf = Vec::new();
        assert_eq!(
            parse(&mut buf, "w", "SELECT 1", &types),
            Err(EncodeError::TooLong("parameter type list"))
        );
        assert_eq!(
            bind(&mut buf, "w", &params),
            Err(EncodeError::TooLong("parameter list"))
        );
        assert!(buf.is_empty());
        // The largest count fits.
        parse(&mut buf, "w", "SELECT 1", &types[1..]).unwrap();
        bind(&mut buf, "w", &params[1..]).unwrap();
        let (parse_len, bind_len) = (
            4 + 2 + 9 + 2 + 4 * 65_535,
            4 + 1 + 2 + 4 + 2 + 8 * 65_535 + 4,
        );
        assert_eq!(buf.len(), 1 + parse_len + 1 + bind_len);
        assert_eq!(buf[1..5], (parse_len as u32).to_be_bytes());
    }

    #[test]
    fn lengths_past_int32_are_refused() {
        let mut buf = Vec::new();
        let too_long = usize::try_from(i32::MAX).unwrap() + 1;
        assert_eq!(
            put_i32_len(&mut buf, too_long, "array"),
            Err(EncodeError::TooLong("array"))
        );
        put_i32_len(&mut buf, too_long - 1, "array").unwrap();
        assert_eq!(buf, i32::MAX.to_be_bytes());
        // A message whose body fails halfway leaves no trace, tag and length included.
        let mut buf = b"before".to_vec();
        let failed = super::message(&mut buf, Some(b'B'), |buf| {
            buf.extend_from_slice(b"half a message");
            put_i32_len(buf, too_long, "array")
        });
        assert_eq!(failed, Err(EncodeError::TooLong("array")));
        assert_eq!(buf, b"before");
    }

    #[test]
    fn column_values_decode_their_binary_forms() {
        assert_eq!(bool::decode(&[1]), Ok(true));
        assert_eq!(bool::decode(&[0]), Ok(false));
        assert_eq!(i32::decode(&(-7i32).to_be_bytes()), Ok(-7));
        assert_eq!(i64::decode(&(1i64 << 40).to_be_bytes()), Ok(1 << 40));
        assert_eq!(<&str>::decode("フレーム".as_bytes()), Ok("フレーム"));
        assert_eq!(
            Jsonb::decode(b"\x01[\"fast\", \"eco\"]"),
            Ok(Jsonb(r#"["fast", "eco"]"#))
        );
        assert_eq!(Jsonb::decode(b"\x01"), Ok(Jsonb("")));
    }

    #[test]
    fn column_values_of_the_wrong_length_or_form_are_errors() {
        for bytes in [&[][..], &[2], &[0, 1], &[0xff]] {
            assert!(bool::decode(bytes).is_err(), "{bytes:?}");
        }
        for bytes in [&[][..], &[0, 0, 0], &[0; 5], &[0; 8]] {
            assert_eq!(
                i32::decode(bytes),
                Err(ProtocolError("int4 of the wrong size"))
            );
        }
        for bytes in [&[][..], &[0; 4], &[0; 7], &[0; 9]] {
            assert_eq!(
                i64::decode(bytes),
                Err(ProtocolError("int8 of the wrong size"))
            );
        }
        assert!(<&str>::decode(&[0xc3, 0x28]).is_err());
        assert_eq!(
            Jsonb::decode(b""),
            Err(ProtocolError("jsonb without its version byte"))
        );
        for version in [0u8, 2, b'['] {
            assert_eq!(
                Jsonb::decode(&[version, b'1']),
                Err(ProtocolError("jsonb of an unknown version"))
            );
        }
        assert!(Jsonb::decode(&[1, 0xff]).is_err());
    }

    #[test]
    fn bind_encodes_int8_as_eight_bytes() {
        let mut buf = Vec::new();
        bind(&mut buf, "s", &[Param::Int8(-2), Param::Int8(1 << 33)]).unwrap();
        let mut expected = vec![0, 2];
        expected.extend_from_slice(&8i32.to_be_bytes());
        expected.extend_from_slice(&(-2i64).to_be_bytes());
        expected.extend_from_slice(&8i32.to_be_bytes());
        expected.extend_from_slice(&(1i64 << 33).to_be_bytes());
        expected.extend_from_slice(&[0, 1, 0, 1]);
        assert!(buf.ends_with(&expected), "{buf:?}");
        // Tag, length, portal, "s", one binary format code: the parameters follow.
        assert_eq!(buf.len(), 1 + 4 + 1 + 2 + 4 + expected.len());
    }

    #[test]
    fn error_fields() {
        let bytes = message(b'E', b"SERROR\0C22012\0Mdivision by zero\0\0");
        let (Message::ErrorResponse(fields), _) = decode(&bytes).unwrap().unwrap() else {
            panic!("not an ErrorResponse")
        };
        assert_eq!(fields.field(b'C'), Some("22012"));
        assert_eq!(fields.field(b'M'), Some("division by zero"));
        assert_eq!(fields.field(b'D'), None);
        assert_eq!(fields.text(b'D'), "");
    }

    #[test]
    fn server_text_is_escaped_for_the_log() {
        let bytes = message(
            b'E',
            b"SERROR\0C22012\0Mline\n2024 FATAL forged\x1b[2J\\\0\0",
        );
        let (Message::ErrorResponse(fields), _) = decode(&bytes).unwrap().unwrap() else {
            panic!("not an ErrorResponse")
        };
        assert_eq!(fields.text(b'M'), "line\\n2024 FATAL forged\\u{1b}[2J\\\\");
        assert_eq!(printable("caf\u{e9} \t\r\u{7f}"), "caf\u{e9} \\t\\r\\u{7f}");
    }

    #[test]
    fn a_message_over_the_limit_is_refused_from_its_header() {
        let header = [b'D', 0, 0, 0x10, 1];
        assert_eq!(
            decode_within(&header, 4096),
            Err(ProtocolError("message longer than the limit"))
        );
        assert_eq!(decode_within(&header, 4100), Ok(None));
        let row = message(b'D', &[0, 0]);
        assert!(decode_within(&row, 6).unwrap().is_some());
        assert!(decode_within(&row, 5).is_err());
    }
}
