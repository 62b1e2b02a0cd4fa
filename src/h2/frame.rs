//! HTTP/2 frames (RFC 9113, section 4 and 6): the 9-byte header, each frame type's payload
//! read with its size and padding checks, and the frames the server writes.

/// The length of a frame header.
pub const HEAD_LEN: usize = 9;
/// The frame size every endpoint must accept, and the least SETTINGS_MAX_FRAME_SIZE.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE (2^24 - 1).
pub const LARGEST_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// A frame's header: its payload's length, type, flags and stream (the reserved bit dropped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// The header at the front of `bytes`, once all 9 bytes are in.
    pub fn read(bytes: &[u8]) -> Option<Head> {
        let head: &[u8; HEAD_LEN] = bytes.get(..HEAD_LEN)?.try_into().ok()?;
        Some(Head {
            len: u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize,
            kind: head[3],
            flags: head[4],
            stream: stream_id(&head[5..9]),
        })
    }
}

/// A stream identifier, the reserved bit ignored.
fn stream_id(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & 0x7fff_ffff
}

/// What a HEADERS frame's priority says: only a stream depending on itself matters (an
/// error); priorities are otherwise ignored (RFC 9113 deprecates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub depends_on: u32,
}

/// One received frame, its payload read and its padding removed.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        /// The whole payload's length, padding included: what flow control counts.
        flow_len: u32,
    },
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
    },
    /// The settings as 6-byte entries (identifier, value); empty for an ACK.
    Settings {
        ack: bool,
        entries: &'a [u8],
    },
    Ping {
        ack: bool,
        payload: [u8; 8],
    },
    GoAway,
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    /// A frame of a type this server does not know: ignored (RFC 9113, 5.5).
    Unknown,
}

/// Reads the frame with header `head` and payload `payload` (exactly `head.len` bytes).
pub fn parse<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    let stream = head.stream;
    let connection_error = |code| Err(H2Error::Connection(code));
    let on_stream = |kind| {
        if stream == 0 {
            connection_error(ErrorCode::Protocol)
        } else {
            Ok(kind)
        }
    };
    match head.kind {
        DATA => {
            let data = unpadded(head.flags, payload)?;
            on_stream(Frame::Data {
                stream,
                data,
                end_stream: head.flags & END_STREAM != 0,
                flow_len: payload.len() as u32,
            })
        }
        HEADERS => {
            let mut block = unpadded(head.flags, payload)?;
            let mut priority = None;
            if head.flags & PRIORITY_FLAG != 0 {
                let Some(fields) = block.get(..5) else {
                    return connection_error(ErrorCode::FrameSize);
                };
                priority = Some(Priority {
                    depends_on: stream_id(fields),
                });
                block = &block[5..];
            }
            on_stream(Frame::Headers {
                stream,
                block,
                end_stream: head.flags & END_STREAM != 0,
                end_headers: head.flags & END_HEADERS != 0,
                priority,
            })
        }
        PRIORITY => {
            if stream == 0 {
                return connection_error(ErrorCode::Protocol);
            }
            if payload.len() != 5 {
                return Err(H2Error::Stream(stream, ErrorCode::FrameSize));
            }
            Ok(Frame::Priority {
                stream,
                priority: Priority {
                    depends_on: stream_id(payload),
                },
            })
        }
        RST_STREAM => {
            if payload.len() != 4 {
                return connection_error(ErrorCode::FrameSize);
            }
            on_stream(Frame::RstStream { stream })
        }
        SETTINGS => {
            if stream != 0 {
                return connection_error(ErrorCode::Protocol);
            }
            let ack = head.flags & ACK != 0;
            if (ack && !payload.is_empty()) || !payload.len().is_multiple_of(6) {
                return connection_error(ErrorCode::FrameSize);
            }
            Ok(Frame::Settings {
                ack,
                entries: payload,
            })
        }
        // A client must not push (RFC 9113, 8.4).
        PUSH_PROMISE => connection_error(ErrorCode::Protocol),
        PING => {
            if stream != 0 {
                return connection_error(ErrorCode::Protocol);
            }
            let Ok(payload) = <[u8; 8]>::try_from(payload) else {
                return connection_error(ErrorCode::FrameSize);
            };
            Ok(Frame::Ping {
                ack: head.flags & ACK != 0,
                payload,
            })
        }
        GOAWAY => {
            if stream != 0 {
                return connection_error(ErrorCode::Protocol);
            }
            if payload.len() < 8 {
                return connection_error(ErrorCode::FrameSize);
            }
            Ok(Frame::GoAway)
        }
        WINDOW_UPDATE => {
            if payload.len() != 4 {
                return connection_error(ErrorCode::FrameSize);
            }
            Ok(Frame::WindowUpdate {
                stream,
                increment: stream_id(payload),
            })
        }
        CONTINUATION => on_stream(Frame::Continuation {
            stream,
            block: payload,
            end_headers: head.flags & END_HEADERS != 0,
        }),
        _ => Ok(Frame::Unknown),
    }
}

/// The payload without its padding, if the frame is padded. Padding that takes the whole
/// payload or more is a connection error (RFC 9113, 6.1).
fn unpadded(flags: u8, payload: &[u8]) -> Result<&[u8], H2Error> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(H2Error::Connection(ErrorCode::FrameSize));
    };
    rest.len()
        .checked_sub(pad as usize)
        .map(|len| &rest[..len])
        .ok_or(H2Error::Connection(ErrorCode::Protocol))
}

/// The settings in a SETTINGS frame's payload (checked to be whole 6-byte entries).
pub fn settings(entries: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    entries.chunks_exact(6).map(|entry| {
        (
            u16::from_be_bytes([entry[0], entry[1]]),
            u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]),
        )
    })
}

/// Checks a SETTINGS_MAX_FRAME_SIZE value.
pub fn valid_max_frame_size(value: u32) -> bool {
    (DEFAULT_MAX_FRAME_SIZE..=LARGEST_MAX_FRAME_SIZE).contains(&value)
}

pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head(len, kind, flags, stream));
}

fn head(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEAD_LEN] {
    let [_, len @ ..] = (len as u32).to_be_bytes();
    let [s0, s1, s2, s3] = stream.to_be_bytes();
    [len[0], len[1], len[2], kind, flags, s0, s1, s2, s3]
}

pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_head(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, SETTINGS, ACK, 0);
}

pub fn write_ping_ack(out: &mut Vec<u8>, payload: &[u8; 8]) {
    write_head(out, 8, PING, ACK, 0);
    out.extend_from_slice(payload);
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    write_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&(code as u32).to_be_bytes());
}

pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&(code as u32).to_be_bytes());
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { END_STREAM } else { 0 };
    write_head(out, data.len(), DATA, flags, stream);
    out.extend_from_slice(data);
}

/// Writes a header block as one HEADERS frame and as many CONTINUATION frames as frames of
/// at most `max_frame` bytes need.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let mut chunks = block.chunks(max_frame.max(1)).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or_default();
        let last = chunks.peek().is_none();
        if last {
            flags |= END_HEADERS;
        }
        write_head(out, chunk.len(), kind, flags, stream);
        out.extend_from_slice(chunk);
        if last {
            return;
        }
        (kind, flags) = (CONTINUATION, 0);
    }
}

/// Writes a header block that `encode` appends to `out`, in HEADERS (and CONTINUATION
/// frames if it is longer than `max_frame`): the block is encoded in place after its frame
/// head, so that a connection keeps no buffer for it; only a block too long for one frame
/// is copied out to be split.
pub fn write_encoded_headers(
    out: &mut Vec<u8>,
    stream: u32,
    end_stream: bool,
    max_frame: usize,
    encode: impl FnOnce(&mut Vec<u8>),
) {
    let head_at = out.len();
    write_head(out, 0, HEADERS, 0, stream);
    encode(out);
    let len = out.len() - head_at - HEAD_LEN;
    if len > max_frame {
        let block = out.split_off(head_at + HEAD_LEN);
        out.truncate(head_at);
        write_headers(out, stream, &block, end_stream, max_frame);
        return;
    }
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    out[head_at..head_at + HEAD_LEN].copy_from_slice(&head(len, HEADERS, flags, stream));
}

/// The error codes the server sends (RFC 9113, section 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    NoError = 0x0,
    Protocol = 0x1,
    /// An upstream's body failed after its head was passed on (RFC 9113, 8.1: a stream
    /// reset before its end is not a whole answer).
    Internal = 0x2,
    FlowControl = 0x3,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Compression = 0x9,
    EnhanceYourCalm = 0xb,
}

/// An error found in what the peer sent: of the whole connection (GOAWAY, then close) or
/// of one stream (RST_STREAM, the others carry on), as RFC 9113 section 5.4 tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H2Error {
    Connection(ErrorCode),
    Stream(u32, ErrorCode),
}
