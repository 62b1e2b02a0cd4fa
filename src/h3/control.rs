//! The unidirectional streams (RFC 9114 6.2): the server's control stream, which it opens
//! with its SETTINGS, and the client's, each told by the type it begins with: its control
//! stream (SETTINGS first, then GOAWAY and push limits), its QPACK encoder and decoder
//! streams (RFC 9204 4.2), which a table of capacity 0 leaves almost nothing to say, and
//! streams of unknown types (grease among them), whose bytes are dropped. Every error on
//! these streams is the connection's.

use super::frame::{self, ErrorCode, Event, Frame, FrameReader, Settings};
use super::stream::Limits;
use super::varint;

pub const STREAM_CONTROL: u64 = 0x0;
pub const STREAM_PUSH: u64 = 0x1;
pub const STREAM_QPACK_ENCODER: u64 = 0x2;
pub const STREAM_QPACK_DECODER: u64 = 0x3;

/// The longest frame payload held whole on the control stream (a SETTINGS frame: a few
/// settings are a few dozen bytes; grease may add some).
const MAX_CONTROL_PAYLOAD: usize = 4096;

/// Writes the opening of the server's control stream: its type and SETTINGS, which say
/// that the server's QPACK decoder has no dynamic table and blocks no stream, and the
/// largest field section it takes. The server opens no QPACK stream: its encoder uses no
/// dynamic table and its decoder has none (RFC 9204 4.2 allows both to stay unopened).
pub fn write_control_stream(out: &mut Vec<u8>, limits: &Limits) {
    varint::write(out, STREAM_CONTROL);
    frame::write_settings(
        out,
        &[
            (frame::SETTINGS_QPACK_MAX_TABLE_CAPACITY, 0),
            (frame::SETTINGS_QPACK_BLOCKED_STREAMS, 0),
            (
                frame::SETTINGS_MAX_FIELD_SECTION_SIZE,
                limits.within_bounds().max_field_section as u64,
            ),
        ],
    );
}

/// Writes a GOAWAY on the server's control stream: no request stream from `stream_id` on
/// is taken (RFC 9114, 5.2). Successive ones must not raise it.
pub fn write_goaway(out: &mut Vec<u8>, stream_id: u64) {
    frame::write_goaway(out, stream_id);
}

/// Which of the client's critical streams are open: at most one of each (RFC 9114 6.2.1,
/// RFC 9204 4.2), a second is H3_STREAM_CREATION_ERROR.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenedStreams {
    control: bool,
    encoder: bool,
    decoder: bool,
}

/// One of the client's unidirectional streams.
pub enum UniStream {
    /// Its type is not all in yet: `have` bytes of it.
    Typing {
        bytes: [u8; varint::MAX_LEN],
        have: u8,
    },
    Control(ControlStream),
    QpackEncoder,
    QpackDecoder(DecoderStream),
    /// A type the server does not know: its bytes are dropped (the endpoint may stop it,
    /// STOP_SENDING with H3_STREAM_CREATION_ERROR, RFC 9114 6.2).
    Ignored,
}

impl Default for UniStream {
    fn default() -> Self {
        UniStream::Typing {
            bytes: [0; varint::MAX_LEN],
            have: 0,
        }
    }
}

impl UniStream {
    /// Takes the stream's next bytes, all of them; `fin` if the stream ends with them.
    /// A critical stream (control, QPACK) may not end (H3_CLOSED_CRITICAL_STREAM).
    pub fn receive(
        &mut self,
        mut bytes: &[u8],
        fin: bool,
        opened: &mut OpenedStreams,
    ) -> Result<(), ErrorCode> {
        if let UniStream::Typing { bytes: kind, have } = self {
            let have_now = usize::from(*have);
            let take = bytes.len().min(varint::MAX_LEN - have_now);
            kind[have_now..have_now + take].copy_from_slice(&bytes[..take]);
            match varint::read(&kind[..have_now + take]) {
                Some((stream_type, len)) => {
                    bytes = &bytes[len - have_now..];
                    *self = UniStream::open(stream_type, opened)?;
                }
                None => {
                    *have = (have_now + take) as u8;
                    return Ok(());
                }
            }
        }
        match self {
            UniStream::Typing { .. } | UniStream::Ignored => return Ok(()),
            UniStream::Control(control) => control.receive(bytes)?,
            // Set Dynamic Table Capacity 0 (001, a 5-bit 0) is the one instruction a table
            // of capacity 0 allows (RFC 9204 4.3.1); any other would insert, or raise the
            // capacity past the server's 0.
            UniStream::QpackEncoder => {
                if bytes.iter().any(|&byte| byte != 0x20) {
                    return Err(ErrorCode::QpackEncoderStreamError);
                }
            }
            UniStream::QpackDecoder(decoder) => decoder.receive(bytes)?,
        }
        match fin {
            true => Err(ErrorCode::ClosedCriticalStream),
            false => Ok(()),
        }
    }

    fn open(stream_type: u64, opened: &mut OpenedStreams) -> Result<UniStream, ErrorCode> {
        let once = |seen: &mut bool| match std::mem::replace(seen, true) {
            true => Err(ErrorCode::StreamCreationError),
            false => Ok(()),
        };
        Ok(match stream_type {
            STREAM_CONTROL => {
                once(&mut opened.control)?;
                UniStream::Control(ControlStream::default())
            }
            STREAM_QPACK_ENCODER => {
                once(&mut opened.encoder)?;
                UniStream::QpackEncoder
            }
            STREAM_QPACK_DECODER => {
                once(&mut opened.decoder)?;
                UniStream::QpackDecoder(DecoderStream::default())
            }
            // Only a server pushes (RFC 9114, 6.2.2).
            STREAM_PUSH => return Err(ErrorCode::StreamCreationError),
            _ => UniStream::Ignored,
        })
    }

    /// Whether it is the client's control stream or a QPACK stream, which may not close.
    pub fn is_critical(&self) -> bool {
        matches!(
            self,
            UniStream::Control(_) | UniStream::QpackEncoder | UniStream::QpackDecoder(_)
        )
    }

    /// What the stream holds: a control frame split across reads, at most 4 KiB.
    pub fn held(&self) -> usize {
        match self {
            UniStream::Control(control) => control.reader.held(),
            _ => 0,
        }
    }

    /// The client's control stream, once its type is known.
    pub fn control(&self) -> Option<&ControlStream> {
        match self {
            UniStream::Control(control) => Some(control),
            _ => None,
        }
    }
}

/// The client's control stream: its SETTINGS first, then what it says of pushes and its
/// going away.
pub struct ControlStream {
    reader: FrameReader,
    settings: Option<Settings>,
    /// The last GOAWAY's push identifier: each may only lower it (RFC 9114, 5.2).
    goaway: Option<u64>,
    /// The last MAX_PUSH_ID: each may only raise it (RFC 9114, 7.2.7).
    max_push_id: Option<u64>,
}

impl Default for ControlStream {
    fn default() -> Self {
        ControlStream {
            reader: FrameReader::new(MAX_CONTROL_PAYLOAD),
            settings: None,
            goaway: None,
            max_push_id: None,
        }
    }
}

impl ControlStream {
    /// The client's SETTINGS, once in.
    pub fn settings(&self) -> Option<Settings> {
        self.settings
    }

    /// The client's GOAWAY, if it sent one: it is going away.
    pub fn goaway(&self) -> Option<u64> {
        self.goaway
    }

    fn receive(&mut self, mut bytes: &[u8]) -> Result<(), ErrorCode> {
        while !bytes.is_empty() {
            let (event, used) = self.reader.next(bytes)?;
            bytes = &bytes[used..];
            let Some(event) = event else { break };
            if self.settings.is_none() {
                let Event::Frame(Frame::Settings(settings)) = event else {
                    return Err(ErrorCode::MissingSettings);
                };
                self.settings = Some(settings);
                continue;
            }
            match event {
                Event::Unknown => {}
                Event::Frame(Frame::GoAway(push_id)) => {
                    if self.goaway.is_some_and(|last| push_id > last) {
                        return Err(ErrorCode::IdError);
                    }
                    self.goaway = Some(push_id);
                }
                Event::Frame(Frame::MaxPushId(push_id)) => {
                    if self.max_push_id.is_some_and(|last| push_id < last) {
                        return Err(ErrorCode::IdError);
                    }
                    self.max_push_id = Some(push_id);
                }
                // The server promised no push to cancel (RFC 9114, 7.2.3).
                Event::Frame(Frame::CancelPush(_)) => return Err(ErrorCode::IdError),
                // A second SETTINGS, or a request's frames.
                _ => return Err(ErrorCode::FrameUnexpected),
            }
        }
        Ok(())
    }
}

/// The client's QPACK decoder stream, which speaks of the server's encoder: with no
/// dynamic table and no section that needs acknowledging, the one instruction it may send
/// is Stream Cancellation (RFC 9204 4.4.2: 01 and a 6-bit stream identifier).
#[derive(Default)]
pub struct DecoderStream {
    /// Continuation bytes read of a Stream Cancellation's identifier; `None` between
    /// instructions.
    in_integer: Option<u8>,
}

/// Continuation bytes an identifier may take: 62 bits need 9.
const MAX_CONTINUATION: u8 = 9;

impl DecoderStream {
    fn receive(&mut self, bytes: &[u8]) -> Result<(), ErrorCode> {
        for &byte in bytes {
            self.in_integer = match self.in_integer {
                Some(count) if count >= MAX_CONTINUATION => {
                    return Err(ErrorCode::QpackDecoderStreamError)
                }
                Some(count) => (byte & 0x80 != 0).then_some(count + 1),
                // Stream Cancellation; its identifier goes on if the prefix is all ones.
                None if byte & 0xc0 == 0x40 => (byte & 0x3f == 0x3f).then_some(0),
                // Section Acknowledgment (1) or Insert Count Increment (00): the server
                // sent no section that references a table, and inserted nothing.
                None => return Err(ErrorCode::QpackDecoderStreamError),
            };
        }
        Ok(())
    }
}
