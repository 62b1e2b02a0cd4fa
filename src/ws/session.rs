//! One WebSocket connection after the switch: frames in, the app's messages out, control
//! frames answered, the close handshake, bounded buffers. No I/O: the core feeds it bytes
//! and sends its output, as for an HTTP connection.
//!
//! A message in one frame reaches the app where it lies in the input, unmasked in place: no
//! copy. Only a fragmented one is gathered in a buffer of its own, bounded by the message
//! limit as a single frame is. The answers to everything one read brought go to the output
//! together, and so out in one send.

use std::time::Instant;

use super::frame::{self, Decoded, Opcode, Utf8};
use crate::http::{lent, BufferPool, SendBuffer, Timeouts, Wire};

/// Unsent output above which no more frames are read (as an HTTP connection's high-water
/// mark): a client that does not read its echoes stops being read.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;

/// The default longest message (`--max-message`): 1 MiB, as `--max-body`; longer: close 1009.
pub const MAX_MESSAGE: usize = 1024 * 1024;

/// The most bytes a connection must be able to hold unread: one whole frame.
pub fn longest_frame(max_message: usize) -> usize {
    frame::MAX_HEADER + max_message
}

/// A data message, whole: text (valid UTF-8) or binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// [`Opcode::Text`] or [`Opcode::Binary`].
    pub opcode: Opcode,
    pub payload: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// A fragmented message is being gathered: its opcode and how its text checks so far.
    Gathering {
        opcode: Opcode,
        utf8: Utf8,
    },
    /// Our close frame is written: nothing more is read; once it is sent, the connection
    /// closes.
    Closed,
}

pub struct Session {
    /// The slot's generation, carried over from its HTTP connection.
    generation: u32,
    state: State,
    /// Received bytes not taken yet (a partial frame); no buffer while empty.
    input: Vec<u8>,
    output: SendBuffer,
    /// The fragments of the message being gathered.
    message: Vec<u8>,
    peer_eof: bool,
    /// The last time a frame came in or a byte went out.
    last_active: Instant,
    /// The output reached the high-water mark at the last [`Session::process`]: reading
    /// stopped, and must start again once it drains.
    full: bool,
}

impl Session {
    /// Takes over an HTTP connection's input (the bytes after the handshake) and its
    /// output (the `101` unsent, after any answers before it), with the clock on it.
    pub fn new(generation: u32, input: Vec<u8>, output: SendBuffer, now: Instant) -> Self {
        Session {
            generation,
            state: State::Open,
            input,
            output,
            message: Vec::new(),
            peer_eof: false,
            last_active: now,
            full: false,
        }
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Takes every whole frame in the input while the client reads its answers: each data
    /// message goes to `on_message` with the output to answer into; a ping is answered with
    /// a pong, a close with a close carrying its code. A frame that breaks the protocol, a
    /// message over `max_message` or text that is not UTF-8 is answered with a close
    /// carrying the reason (1002, 1009, 1007), and nothing more is read.
    pub fn process(
        &mut self,
        mut on_message: impl FnMut(Message<'_>, &mut Vec<u8>),
        max_message: usize,
        now: Instant,
        buffers: &mut BufferPool,
        share: usize,
    ) {
        let high_water = share.min(OUTPUT_HIGH_WATER);
        let mut input = std::mem::take(&mut self.input);
        let mut consumed = 0;
        while self.state != State::Closed && self.output.unsent().len() < high_water {
            let rest = &mut input[consumed..];
            let header = match frame::decode(rest, max_message) {
                Decoded::Frame(header) => header,
                Decoded::Partial => break,
                Decoded::Invalid(code) => {
                    self.close(code, buffers);
                    break;
                }
            };
            let end = header.len + header.payload_len;
            let Some(payload) = rest.get_mut(header.len..end) else {
                break;
            };
            frame::unmask(payload, header.mask);
            consumed += end;
            self.last_active = now;
            let payload = &*payload;
            if let Err(code) = self.take(header, payload, max_message, &mut on_message, buffers) {
                self.close(code, buffers);
            }
        }
        input.drain(..consumed);
        if self.state == State::Closed {
            input.clear();
        }
        self.input = input;
        self.full = self.output.unsent().len() >= high_water;
        if self.peer_eof && self.state != State::Closed {
            // The peer left without a close frame: nothing can be answered any more.
            self.state = State::Closed;
            self.input.clear();
        }
        self.output.owe_progress(now);
    }

    /// Takes one whole frame; the close code if it breaks the protocol.
    fn take(
        &mut self,
        header: frame::Header,
        payload: &[u8],
        max_message: usize,
        on_message: &mut impl FnMut(Message<'_>, &mut Vec<u8>),
        buffers: &mut BufferPool,
    ) -> Result<(), u16> {
        match (header.opcode, &mut self.state) {
            (Opcode::Ping, _) => {
                frame::write(self.output.lend(buffers), Opcode::Pong, payload);
            }
            (Opcode::Pong, _) => {}
            (Opcode::Close, _) => {
                let code = close_code(payload)?;
                self.close(code, buffers);
            }
            (Opcode::Text | Opcode::Binary, State::Open) if header.fin => {
                if header.opcode == Opcode::Text && std::str::from_utf8(payload).is_err() {
                    return Err(frame::INVALID_DATA);
                }
                let message = Message {
                    opcode: header.opcode,
                    payload,
                };
                on_message(message, self.output.lend(buffers));
            }
            (opcode @ (Opcode::Text | Opcode::Binary), State::Open) => {
                let mut utf8 = Utf8::default();
                if opcode == Opcode::Text && !utf8.feed(payload) {
                    return Err(frame::INVALID_DATA);
                }
                lent(&mut self.message, buffers).extend_from_slice(payload);
                self.state = State::Gathering { opcode, utf8 };
            }
            (Opcode::Continuation, State::Gathering { opcode, utf8 }) => {
                let opcode = *opcode;
                if self.message.len() + payload.len() > max_message {
                    return Err(frame::TOO_BIG);
                }
                if opcode == Opcode::Text && !utf8.feed(payload) {
                    return Err(frame::INVALID_DATA);
                }
                let complete = utf8.is_complete();
                self.message.extend_from_slice(payload);
                if header.fin {
                    if opcode == Opcode::Text && !complete {
                        return Err(frame::INVALID_DATA);
                    }
                    let message = Message {
                        opcode,
                        payload: &self.message,
                    };
                    on_message(message, self.output.lend(buffers));
                    self.message.clear();
                    self.state = State::Open;
                }
            }
            // A continuation with nothing to continue, a new message inside another, or
            // anything after our close.
            _ => return Err(frame::PROTOCOL_ERROR),
        }
        Ok(())
    }

    /// Writes our close frame with `code`; nothing more is read.
    fn close(&mut self, code: u16, buffers: &mut BufferPool) {
        if self.state != State::Closed {
            frame::write_close(self.output.lend(buffers), code);
            self.state = State::Closed;
        }
        buffers.give_back(std::mem::take(&mut self.message));
    }
}

impl Wire for Session {
    /// The buffer received bytes are appended to, lent from `buffers` if it has none.
    fn input(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8> {
        lent(&mut self.input, buffers)
    }

    fn buffered_input(&self) -> usize {
        self.input.len()
    }

    /// The peer sent its last byte: the whole frames already in are still taken.
    fn peer_closed(&mut self) {
        self.peer_eof = true;
    }

    fn peer_eof(&self) -> bool {
        self.peer_eof
    }

    fn unsent(&self) -> &[u8] {
        self.output.unsent()
    }

    /// `n` bytes of [`Session::unsent`] went out.
    fn mark_sent(&mut self, n: usize, now: Instant) {
        self.output.sent(n, now);
        if n > 0 {
            self.last_active = now;
        }
    }

    /// Whether to read more now: it is open and the client reads its answers.
    fn wants_input(&self) -> bool {
        self.state != State::Closed
            && !self.peer_eof
            && self.output.unsent().len() < OUTPUT_HIGH_WATER
    }

    /// Whether advancing again once the output has drained may do more: take the frames
    /// waiting in the input, or read again (reading stopped while the output was full).
    fn has_backlog(&self) -> bool {
        self.state != State::Closed && (self.full || !self.input.is_empty())
    }

    /// Closed and everything sent: the connection may close.
    fn is_finished(&self) -> bool {
        self.state == State::Closed && self.output.is_drained()
    }

    /// The client took too long to read what was unsent at some instant, or nothing moved
    /// either way for the idle timeout (which also bounds how long a frame may take to
    /// arrive once begun).
    fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool {
        self.output.late(now, limits.send) || now.duration_since(self.last_active) > limits.idle
    }

    /// A close of 1001 (going away), as for a close it must answer: nothing more is read,
    /// and once it is sent the connection lingers for the peer's close.
    fn drain(&mut self, buffers: &mut BufferPool) {
        self.close(frame::GOING_AWAY, buffers);
    }

    /// The buffer memory it holds.
    fn held(&self) -> usize {
        self.input.capacity() + self.output.capacity() + self.message.capacity()
    }

    /// Gives back the buffers that are empty.
    fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        self.output.give_back_idle(buffers);
        for buffer in [&mut self.input, &mut self.message] {
            if buffer.is_empty() && buffer.capacity() > 0 {
                buffers.give_back(std::mem::take(buffer));
            }
        }
    }

    /// Gives every buffer back: the connection is closed.
    fn give_back_all(&mut self, buffers: &mut BufferPool) {
        self.output.give_back_all(buffers);
        for buffer in [&mut self.input, &mut self.message] {
            buffers.give_back(std::mem::take(buffer));
        }
    }
}

/// The code to answer a close frame's payload with: its own code (1000 when it has none),
/// or why the payload is wrong (one byte, a code that may not be sent: 1002; a reason that
/// is not UTF-8: 1007).
fn close_code(payload: &[u8]) -> Result<u16, u16> {
    let (code, reason) = match payload {
        [] => return Ok(frame::NORMAL),
        [_] => return Err(frame::PROTOCOL_ERROR),
        [high, low, reason @ ..] => (u16::from_be_bytes([*high, *low]), reason),
    };
    if !frame::is_valid_close_code(code) {
        return Err(frame::PROTOCOL_ERROR);
    }
    if std::str::from_utf8(reason).is_err() {
        return Err(frame::INVALID_DATA);
    }
    Ok(code)
}

#[cfg(test)]
mod tests;
