//! The server's settings: what it tells a client it may do, and what it takes.

use super::frame::{self, ErrorCode, MAX_WINDOW};
use crate::http::{self, AltSvc};

/// The flow-control window of every new connection and stream until SETTINGS change it.
pub const DEFAULT_WINDOW: i64 = 65_535;

/// What the server tells the client it may do (its SETTINGS), and what it takes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: more open streams are refused (REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what a client may send on a stream before the server
    /// says it may send more.
    pub initial_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger request head is answered 431; at most
    /// 65,535 (a head's offsets are 16-bit). Its encoded block may take twice this across
    /// HEADERS and CONTINUATION frames before the connection ends (a CONTINUATION flood).
    pub max_header_list: u32,
    /// The largest request body; a larger one is answered 413.
    pub max_body: usize,
    /// Over TLS, where the server also answers over HTTP/3: its first answer says so.
    pub alt_svc: Option<AltSvc>,
    /// Whether a request carries every regular field as it came (`Request::field_lines`),
    /// for a proxy to forward: written as they are decoded, a cost only a proxy pays.
    pub keep_fields: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_concurrent_streams: 128,
            initial_window: 65_535,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            max_header_list: 16 * 1024,
            max_body: http::MAX_BODY,
            alt_svc: None,
            keep_fields: false,
        }
    }
}

impl Limits {
    /// The limits, each within what HTTP/2 allows and this server can keep.
    pub fn within_bounds(self) -> Limits {
        Limits {
            max_header_list: self.max_header_list.min(u16::MAX as u32),
            max_frame_size: self
                .max_frame_size
                .clamp(frame::DEFAULT_MAX_FRAME_SIZE, frame::LARGEST_MAX_FRAME_SIZE),
            initial_window: self.initial_window.min(MAX_WINDOW as u32),
            ..self
        }
    }

    /// Writes the server's SETTINGS frame (its connection preface): no push, and the
    /// limits.
    pub fn write_settings(&self, out: &mut Vec<u8>) {
        frame::write_settings(
            out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (
                    frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                    self.max_concurrent_streams,
                ),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, self.initial_window),
                (frame::SETTINGS_MAX_FRAME_SIZE, self.max_frame_size),
                (frame::SETTINGS_MAX_HEADER_LIST_SIZE, self.max_header_list),
            ],
        );
    }
}

/// The peer's settings that shape what the server sends.
pub struct PeerSettings {
    /// SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window.
    pub initial_window: i64,
    /// SETTINGS_MAX_FRAME_SIZE.
    pub max_frame: usize,
}

impl Default for PeerSettings {
    fn default() -> Self {
        PeerSettings {
            initial_window: DEFAULT_WINDOW,
            max_frame: frame::DEFAULT_MAX_FRAME_SIZE as usize,
        }
    }
}

impl PeerSettings {
    /// Applies a SETTINGS frame's entries (the last of a kind wins); returns by how much
    /// the initial window changed, which every open stream's send window changes by.
    pub fn apply(&mut self, entries: &[u8]) -> Result<i64, ErrorCode> {
        let before = self.initial_window;
        for (id, value) in frame::settings(entries) {
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => return Err(ErrorCode::Protocol),
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value as i64 > MAX_WINDOW {
                        return Err(ErrorCode::FlowControl);
                    }
                    self.initial_window = value as i64;
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !frame::valid_max_frame_size(value) {
                        return Err(ErrorCode::Protocol);
                    }
                    self.max_frame = value as usize;
                }
                // The server's answers never use the dynamic table, whatever its size;
                // it never pushes; the others are advice or unknown, and ignored.
                _ => {}
            }
        }
        Ok(self.initial_window - before)
    }
}
