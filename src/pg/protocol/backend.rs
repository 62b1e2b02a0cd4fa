//! Backend messages: an incremental decoder that takes what the server sends out of a byte
//! buffer, validating every length before slicing.

/// The default bound on a backend message's length; a longer one is refused as garbage from
/// its header, before the read buffer grows for it. What gnosis reads is far smaller: a world
/// row is 22 bytes, a fortune row under 200, an ErrorResponse a few hundred; 64 KiB leaves
/// room for any ErrorResponse PostgreSQL sends (it never includes the query's text) and is
/// the connection's initial read buffer, which therefore never grows far.
pub const MAX_MESSAGE_LEN: usize = 64 << 10;

/// The type bytes of every backend message `decode` knows.
const BACKEND_TAGS: &[u8] = b"RSKZ123nsItTDCENAv";

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

/// Declares `Message` with its variants, and `Message::name` from their names.
macro_rules! messages {
    ($($variant:ident $(($data:ty))?,)*) => {
        #[derive(Debug, PartialEq, Eq)]
        pub enum Message<'a> {
            $($variant $(($data))?,)*
        }

        impl Message<'_> {
            /// The message's name, for error reports.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Message::$variant { .. } => stringify!($variant),)*
                }
            }
        }
    };
}

messages! {
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
        5 => Auth::Md5 {
            salt: r.u32()?.to_be_bytes(),
        },
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
        let end = self.0.iter().position(|&b| b == 0);
        let s = self.take(end.ok_or(ProtocolError("unterminated string"))?)?;
        self.0 = &self.0[1..]; // the NUL
        Ok(s)
    }

    /// A DataRow column: its length, then its bytes; -1 is NULL.
    fn column(&mut self) -> Result<Option<&'a [u8]>, ProtocolError> {
        match self.u32()? as i32 {
            -1 => Ok(None),
            len if len >= 0 => self.take(len as usize).map(Some),
            _ => Err(ProtocolError("negative column length")),
        }
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
            r.column()?;
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
        let mut r = Reader(self.columns);
        // validate() read every column: these reads succeed.
        let mut columns = (0..self.len()).map_while(|_| r.column().ok());
        columns.nth(index)
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
        // Validated above: these reads succeed, but stay panic-free regardless.
        let mut field = || r.cstr().and_then(|_| r.take(18)).ok();
        let fields = (0..count).map_while(|_| field());
        fields
            .map(|f| u32::from_be_bytes([f[6], f[7], f[8], f[9]]))
            .collect()
    }
}

/// The fields of an ErrorResponse or NoticeResponse, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorFields<'a>(&'a [u8]);

impl<'a> ErrorFields<'a> {
    fn validate(body: &'a [u8]) -> Result<Self, ProtocolError> {
        let mut r = Reader(body);
        // Each field's type byte, then its value; a zero byte ends them.
        while r.take(1)?[0] != 0 {
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
