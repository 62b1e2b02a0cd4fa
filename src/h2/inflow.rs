//! Flow control of what the peer sends: the connection's receive window, the request body
//! bytes its streams hold, and when window is given back.

use super::frame::{self, ErrorCode};
use super::settings::{Limits, DEFAULT_WINDOW};
use super::stream::{State, Stream};

pub struct Inflow {
    /// What the peer may still send on the connection.
    window: i64,
    /// Request body bytes held by all streams.
    held: usize,
    /// The body bytes the streams may hold at once: past it, the client gets no more
    /// window until bodies are let go (their requests answered).
    budget: usize,
    /// A stream's window (the server's SETTINGS_INITIAL_WINDOW_SIZE).
    stream_window: i64,
    /// Whether the peer has acknowledged the server's SETTINGS: until then a new stream's
    /// window is the default.
    settings_acked: bool,
    max_body: usize,
    /// The connection holds more than its share of the worker's budget: no window is
    /// granted until it is back under, so that its peer is held by flow control.
    paused: bool,
    /// Window was due while paused: it is granted once the connection is back under.
    owed: bool,
}

impl Inflow {
    pub fn new(limits: &Limits) -> Self {
        Inflow {
            window: DEFAULT_WINDOW,
            held: 0,
            budget: 2 * limits.max_body.max(DEFAULT_WINDOW as usize),
            stream_window: limits.initial_window as i64,
            settings_acked: false,
            max_body: limits.max_body,
            paused: false,
            owed: false,
        }
    }

    /// Pauses the grants while the connection holds more than its share of the worker's
    /// budget, or resumes them; returns whether window was due meanwhile, to grant now.
    pub fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        !paused && std::mem::take(&mut self.owed)
    }

    /// Whether the bodies held reached the budget: no window is given until some are let
    /// go.
    pub fn over_budget(&self) -> bool {
        self.held >= self.budget
    }

    /// Whether window that is due may be given now: within the budget and not paused (then
    /// it is owed).
    fn may_grant(&mut self) -> bool {
        if self.paused {
            self.owed = true;
            return false;
        }
        !self.over_budget()
    }

    /// The window of a stream the peer opens now.
    pub fn new_stream_window(&self) -> i64 {
        if self.settings_acked {
            self.stream_window
        } else {
            DEFAULT_WINDOW
        }
    }

    /// The peer acknowledged the server's SETTINGS: the streams opened before had the
    /// default window, and now have the server's.
    pub fn settings_acknowledged<'s>(&mut self, streams: impl Iterator<Item = &'s mut Stream>) {
        if !self.settings_acked {
            self.settings_acked = true;
            for stream in streams {
                stream.recv_window += self.stream_window - DEFAULT_WINDOW;
            }
        }
    }

    /// DATA of `len` bytes (padding included) arrived: more than the window is a
    /// connection error.
    pub fn take(&mut self, len: i64) -> Result<(), ErrorCode> {
        if len > self.window {
            return Err(ErrorCode::FlowControl);
        }
        self.window -= len;
        Ok(())
    }

    pub fn hold(&mut self, len: usize) {
        self.held += len;
    }

    pub fn release(&mut self, len: usize) {
        self.held -= len;
    }

    /// Gives the peer back the connection window its DATA used, once half of it is used,
    /// while the bodies held are within the budget and the connection is not paused.
    pub fn grant_connection(&mut self, out: &mut Vec<u8>) {
        if self.window <= DEFAULT_WINDOW / 2 && self.may_grant() {
            let increment = DEFAULT_WINDOW - self.window;
            frame::write_window_update(out, 0, increment as u32);
            self.window = DEFAULT_WINDOW;
        }
    }

    /// Gives `stream` back the window its body used, once half of it is used, while its
    /// body is under the limit, the bodies held are within the budget and the connection
    /// is not paused.
    pub fn grant_stream(&mut self, out: &mut Vec<u8>, stream: &mut Stream) {
        let State::Receiving { body, .. } = &stream.state else {
            return;
        };
        let target = self.stream_window;
        if stream.recv_window <= target / 2 && body.len() < self.max_body && self.may_grant() {
            let increment = (target - stream.recv_window) as u32;
            frame::write_window_update(out, stream.id, increment);
            stream.recv_window = target;
        }
    }
}
