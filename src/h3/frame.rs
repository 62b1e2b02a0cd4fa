//! HTTP/3 frames (RFC 9114, section 7): a type and a length, each a variable-length
//! integer, then the payload. [`FrameReader`] reads them off one stream's bytes however the
//! transport splits them: DATA's payload is handed on in the pieces it comes in, frames of
//! unknown types are skipped unread, and only the other frames are held whole, bounded,
//! and copied only when they are split across reads. The writers append frames to a
//! stream's output; error codes are RFC 9114's (8.1) and RFC 9204's (6).

use super::varint;

pub const DATA: u64 = 0x0;
pub const HEADERS: u64 = 0x1;
pub const CANCEL_PUSH: u64 = 0x3;
pub const SETTINGS: u64 = 0x4;
pub const PUSH_PROMISE: u64 = 0x5;
pub const GOAWAY: u64 = 0x7;
pub const MAX_PUSH_ID: u64 = 0xd;

/// Frame types of HTTP/2's that HTTP/3 reserves (PRIORITY, PING, WINDOW_UPDATE,
/// CONTINUATION): receiving one is an error (RFC 9114, 7.2.8).
const HTTP2_ONLY: [u64; 4] = [0x2, 0x6, 0x8, 0x9];

pub const SETTINGS_QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
pub const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x6;
pub const SETTINGS_QPACK_BLOCKED_STREAMS: u64 = 0x7;
/// Extended CONNECT (RFC 9220), 0 or 1.
pub const SETTINGS_ENABLE_CONNECT_PROTOCOL: u64 = 0x8;
/// HTTP datagrams (RFC 9297), 0 or 1.
pub const SETTINGS_H3_DATAGRAM: u64 = 0x33;
/// Settings of HTTP/2's that HTTP/3 reserves: receiving one is an error (RFC 9114, 7.2.4.1).
const HTTP2_ONLY_SETTINGS: [u64; 4] = [0x2, 0x3, 0x4, 0x5];

/// The error codes of HTTP/3 (RFC 9114, 8.1) and QPACK (RFC 9204, 6), as the transport
/// sends them in CONNECTION_CLOSE, RESET_STREAM and STOP_SENDING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum ErrorCode {
    NoError = 0x100,
    GeneralProtocolError = 0x101,
    InternalError = 0x102,
    StreamCreationError = 0x103,
    ClosedCriticalStream = 0x104,
    FrameUnexpected = 0x105,
    FrameError = 0x106,
    ExcessiveLoad = 0x107,
    IdError = 0x108,
    SettingsError = 0x109,
    MissingSettings = 0x10a,
    RequestRejected = 0x10b,
    RequestCancelled = 0x10c,
    RequestIncomplete = 0x10d,
    MessageError = 0x10e,
    ConnectError = 0x10f,
    VersionFallback = 0x110,
    QpackDecompressionFailed = 0x200,
    QpackEncoderStreamError = 0x201,
    QpackDecoderStreamError = 0x202,
}

impl ErrorCode {
    /// The code's number on the wire.
    pub fn value(self) -> u64 {
        self as u64
    }
}

/// An error in what the peer sent: of the whole connection (CONNECTION_CLOSE) or of one
/// request stream (RESET_STREAM and STOP_SENDING; the others carry on), as RFC 9114 8
/// tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H3Error {
    Connection(ErrorCode),
    Stream(ErrorCode),
}

/// A frame's type and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub kind: u64,
    pub len: u64,
}

/// The longest a frame's head is: two 8-byte integers.
const MAX_HEAD_LEN: usize = 2 * varint::MAX_LEN;

impl Head {
    /// The head at the front of `bytes` and its length, once all of it is in.
    pub fn read(bytes: &[u8]) -> Option<(Head, usize)> {
        let (kind, kind_len) = varint::read(bytes)?;
        let (len, len_len) = varint::read(&bytes[kind_len..])?;
        Some((Head { kind, len }, kind_len + len_len))
    }
}

/// The settings a peer sent, each checked (RFC 9114 7.2.4.1, RFC 9204 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub qpack_max_table_capacity: u64,
    pub qpack_blocked_streams: u64,
    /// The largest field section the peer takes; unlimited if absent.
    pub max_field_section_size: Option<u64>,
    pub enable_connect_protocol: bool,
    pub h3_datagram: bool,
}

impl Settings {
    /// Reads a SETTINGS payload: identifier and value pairs. Unknown identifiers (the
    /// reserved ones that grease among them) are ignored; a known one twice, one of
    /// HTTP/2's, or a flag other than 0 or 1 is H3_SETTINGS_ERROR; a pair cut short,
    /// H3_FRAME_ERROR.
    pub fn parse(mut payload: &[u8]) -> Result<Settings, ErrorCode> {
        let mut settings = Settings::default();
        let mut seen = 0u8;
        while !payload.is_empty() {
            let (id, id_len) = varint::read(payload).ok_or(ErrorCode::FrameError)?;
            let (value, value_len) =
                varint::read(&payload[id_len..]).ok_or(ErrorCode::FrameError)?;
            payload = &payload[id_len + value_len..];
            if HTTP2_ONLY_SETTINGS.contains(&id) {
                return Err(ErrorCode::SettingsError);
            }
            let flag = || match value {
                0 | 1 => Ok(value == 1),
                _ => Err(ErrorCode::SettingsError),
            };
            let bit = match id {
                SETTINGS_QPACK_MAX_TABLE_CAPACITY => {
                    settings.qpack_max_table_capacity = value;
                    1
                }
                SETTINGS_MAX_FIELD_SECTION_SIZE => {
                    settings.max_field_section_size = Some(value);
                    2
                }
                SETTINGS_QPACK_BLOCKED_STREAMS => {
                    settings.qpack_blocked_streams = value;
                    4
                }
                SETTINGS_ENABLE_CONNECT_PROTOCOL => {
                    settings.enable_connect_protocol = flag()?;
                    8
                }
                SETTINGS_H3_DATAGRAM => {
                    settings.h3_datagram = flag()?;
                    16
                }
                _ => 0,
            };
            if seen & bit != 0 {
                return Err(ErrorCode::SettingsError);
            }
            seen |= bit;
        }
        Ok(settings)
    }
}

/// A whole frame other than DATA, its payload read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// An encoded field section (QPACK), a request's or its trailers.
    Headers(&'a [u8]),
    CancelPush(u64),
    Settings(Settings),
    /// The last request stream (from a server) or push (from a client) the sender will
    /// take.
    GoAway(u64),
    MaxPushId(u64),
}

impl<'a> Frame<'a> {
    /// Reads a whole payload of a frame type [`FrameReader`] holds whole. What is not
    /// exactly the fields of its type is H3_FRAME_ERROR (RFC 9114, 7.1).
    fn parse(kind: u64, payload: &'a [u8]) -> Result<Frame<'a>, ErrorCode> {
        let one_integer = || match varint::read(payload) {
            Some((value, len)) if len == payload.len() => Ok(value),
            _ => Err(ErrorCode::FrameError),
        };
        Ok(match kind {
            HEADERS => Frame::Headers(payload),
            SETTINGS => Frame::Settings(Settings::parse(payload)?),
            CANCEL_PUSH => Frame::CancelPush(one_integer()?),
            GOAWAY => Frame::GoAway(one_integer()?),
            _ => Frame::MaxPushId(one_integer()?),
        })
    }
}

/// What [`FrameReader::next`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A DATA frame begins, `len` bytes of payload to come as [`Event::Data`].
    DataHead {
        len: u64,
    },
    /// A piece of a DATA frame's payload, as it came.
    Data(&'a [u8]),
    Frame(Frame<'a>),
    /// A frame of a type the server does not know (grease among them) begins: its payload
    /// is skipped (RFC 9114, 9). Said only because a control stream must begin with
    /// SETTINGS, whatever the type of the frame that comes first instead.
    Unknown,
}

/// Where the reader is in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Between frames; `have` bytes of the next head are held.
    Head { have: u8 },
    /// In a DATA frame's payload, `left` bytes to come.
    Data { left: u64 },
    /// In the payload of a frame of an unknown type, skipped.
    Skip { left: u64 },
    /// In the payload of a frame held whole: `len` bytes, those in `pending` so far.
    Whole { kind: u64, len: usize },
}

/// Reads the frames of one stream from its bytes, in whatever pieces they arrive.
pub struct FrameReader {
    reading: Reading,
    head: [u8; MAX_HEAD_LEN],
    /// A held frame's payload, when split across reads (and then freed once read: streams
    /// are many, split frames few).
    pending: Vec<u8>,
    /// The longest payload held whole (HEADERS, SETTINGS and the rest): longer ones are
    /// H3_EXCESSIVE_LOAD (RFC 9114, 10.5).
    max_payload: usize,
}

/// Where a whole frame's payload is, once in.
enum Payload {
    Input(usize, usize),
    Pending,
}

impl FrameReader {
    pub fn new(max_payload: usize) -> Self {
        FrameReader {
            reading: Reading::Head { have: 0 },
            head: [0; MAX_HEAD_LEN],
            pending: Vec::new(),
            max_payload,
        }
    }

    /// Whether the stream may end here: between frames (RFC 9114 7.1: a frame cut short
    /// by the stream's end is H3_FRAME_ERROR).
    pub fn between_frames(&self) -> bool {
        self.reading == Reading::Head { have: 0 }
    }

    /// What the payloads it holds take.
    pub fn held(&self) -> usize {
        self.pending.capacity()
    }

    /// Reads from `input` up to the next event, and says how much of `input` it took; no
    /// event when all of `input` is taken without one (more is needed). PUSH_PROMISE (which
    /// a client must not send) and HTTP/2's frame types are H3_FRAME_UNEXPECTED.
    pub fn next<'r>(
        &'r mut self,
        input: &'r [u8],
    ) -> Result<(Option<Event<'r>>, usize), ErrorCode> {
        if let Reading::Head { have: 0 } = self.reading {
            // The payload handed out last is read: its copy goes.
            self.pending = Vec::new();
        }
        let mut at = 0;
        let (kind, payload) = loop {
            match self.reading {
                Reading::Head { have } => {
                    let Some((head, used)) = self.read_head(have, &input[at..]) else {
                        return Ok((None, input.len()));
                    };
                    at += used;
                    if let Some(event) = self.start(head)? {
                        return Ok((Some(event), at));
                    }
                }
                Reading::Data { left } | Reading::Skip { left } => {
                    let take = (input.len() - at).min(usize::try_from(left).unwrap_or(usize::MAX));
                    let piece = &input[at..at + take];
                    at += take;
                    let left = left - take as u64;
                    let data = matches!(self.reading, Reading::Data { .. });
                    self.reading = match (data, left) {
                        (_, 0) => Reading::Head { have: 0 },
                        (true, left) => Reading::Data { left },
                        (false, left) => Reading::Skip { left },
                    };
                    if data && take > 0 {
                        return Ok((Some(Event::Data(piece)), at));
                    }
                    if take == 0 {
                        return Ok((None, at));
                    }
                }
                Reading::Whole { kind, len } => {
                    let rest = &input[at..];
                    if self.pending.is_empty() && rest.len() >= len {
                        self.reading = Reading::Head { have: 0 };
                        at += len;
                        break (kind, Payload::Input(at - len, at));
                    }
                    let take = rest.len().min(len - self.pending.len());
                    self.pending.extend_from_slice(&rest[..take]);
                    at += take;
                    if self.pending.len() < len {
                        return Ok((None, at));
                    }
                    self.reading = Reading::Head { have: 0 };
                    break (kind, Payload::Pending);
                }
            }
        };
        let payload = match payload {
            Payload::Input(start, end) => &input[start..end],
            Payload::Pending => &self.pending[..],
        };
        Ok((Some(Event::Frame(Frame::parse(kind, payload)?)), at))
    }

    /// Completes the head of the next frame from the `have` bytes held and `input`: the
    /// head and how much of `input` it took, or `None` once all of `input` is held.
    fn read_head(&mut self, have: u8, input: &[u8]) -> Option<(Head, usize)> {
        let have = usize::from(have);
        if have == 0 {
            if let Some(found) = Head::read(input) {
                return Some(found);
            }
        }
        // Fewer than MAX_HEAD_LEN bytes in all: a whole head is never longer.
        let take = input.len().min(MAX_HEAD_LEN - have);
        self.head[have..have + take].copy_from_slice(&input[..take]);
        match Head::read(&self.head[..have + take]) {
            Some((head, len)) => {
                self.reading = Reading::Head { have: 0 };
                Some((head, len - have))
            }
            None => {
                self.reading = Reading::Head {
                    have: (have + take) as u8,
                };
                None
            }
        }
    }

    /// Begins reading the payload of a frame whose head is `head`; what to tell of it at
    /// once, if anything (a held frame is told once whole).
    fn start(&mut self, head: Head) -> Result<Option<Event<'static>>, ErrorCode> {
        let (reading, event) = match head.kind {
            DATA => (
                Reading::Data { left: head.len },
                Some(Event::DataHead { len: head.len }),
            ),
            PUSH_PROMISE => return Err(ErrorCode::FrameUnexpected),
            kind if HTTP2_ONLY.contains(&kind) => return Err(ErrorCode::FrameUnexpected),
            HEADERS | SETTINGS | CANCEL_PUSH | GOAWAY | MAX_PUSH_ID => {
                let len = usize::try_from(head.len)
                    .ok()
                    .filter(|&len| len <= self.max_payload)
                    .ok_or(ErrorCode::ExcessiveLoad)?;
                let kind = head.kind;
                (Reading::Whole { kind, len }, None)
            }
            _ => (Reading::Skip { left: head.len }, Some(Event::Unknown)),
        };
        // A DATA or unknown frame without payload is over already.
        self.reading = match reading {
            Reading::Data { left: 0 } | Reading::Skip { left: 0 } => Reading::Head { have: 0 },
            reading => reading,
        };
        Ok(event)
    }
}

pub fn write_head(out: &mut Vec<u8>, kind: u64, len: usize) {
    varint::write(out, kind);
    varint::write(out, len as u64);
}

/// Writes a frame whose payload `encode` appends to `out`: encoded in place, its head put
/// before it after (moving the payload by the head's few bytes), so that no buffer is kept
/// for it.
pub fn write_encoded(out: &mut Vec<u8>, kind: u64, encode: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    encode(out);
    let len = out.len() - start;
    write_head(out, kind, len);
    let head_len = out.len() - start - len;
    out[start..].rotate_right(head_len);
}

pub fn write_data(out: &mut Vec<u8>, data: &[u8]) {
    write_head(out, DATA, data.len());
    out.extend_from_slice(data);
}

pub fn write_settings(out: &mut Vec<u8>, settings: &[(u64, u64)]) {
    write_encoded(out, SETTINGS, |out| {
        for &(id, value) in settings {
            varint::write(out, id);
            varint::write(out, value);
        }
    });
}

pub fn write_goaway(out: &mut Vec<u8>, id: u64) {
    write_head(out, GOAWAY, varint::len(id));
    varint::write(out, id);
}
