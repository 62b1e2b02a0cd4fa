//! A connection's answers: HEADERS at once, DATA as the windows and the output's room
//! allow, then trailers; and the clock on answers that wait for the peer's window.

use std::time::Instant;

use super::Connection;
use crate::h2::frame::{self, ErrorCode};
use crate::h2::hpack;
use crate::h2::stream::{write_data, Answer, State};
use crate::http::{BufferPool, Encoding, HttpDate, Method};

impl Connection {
    /// Starts the clock on answers that wait for the peer's window alone (nothing unsent),
    /// or stops it. Called last by whatever may write: DATA written leaves the output
    /// unsent, which stops the clock, so progress restarts it.
    pub(super) fn watch_window(&mut self, now: Instant) {
        let waiting = self.output.unsent().is_empty()
            && self.streams.iter().any(|stream| stream.data_left() > 0);
        self.window_stalled_since = match waiting {
            true => self.window_stalled_since.or(Some(now)),
            false => None,
        };
    }

    /// Answers the request of `stream`: its HEADERS now, its body as flow control allows,
    /// then its trailers. A stream that is gone (reset by the client) is not answered.
    pub fn answer(
        &mut self,
        stream: u32,
        answer: &Answer<'_>,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
    ) {
        let Some(index) = self.index(stream) else {
            return;
        };
        if !matches!(
            self.streams[index].state,
            State::Request { taken: true, .. }
        ) {
            return;
        }
        self.last_active = now;
        self.output.lend(buffers);
        self.respond(index, answer, false, date);
        self.output.owe_progress(now);
        self.watch_window(now);
    }

    /// The connection's own answer to a request it refuses (413, 431).
    pub(super) fn answer_error(
        &mut self,
        index: usize,
        status: u16,
        reset_after: bool,
        date: &HttpDate,
    ) {
        let reason: &[u8] = match status {
            413 => b"Content Too Large",
            _ => b"Request Header Fields Too Large",
        };
        let answer = Answer {
            status,
            content_type: b"text/plain",
            encoding: Encoding::default(),
            body: reason,
            trailers: &[],
        };
        self.respond(index, &answer, reset_after, date);
    }

    fn respond(&mut self, index: usize, answer: &Answer<'_>, reset_after: bool, date: &HttpDate) {
        let entry = &mut self.streams[index];
        let id = entry.id;
        let (head_only, mut data) = match &mut entry.state {
            State::Receiving { head, body } | State::Request { head, body, .. } => {
                (head.method() == Method::Head, std::mem::take(body))
            }
            State::Sending { .. } => return,
        };
        self.inflow.release(data.len());
        if !data.is_empty() {
            self.grant_windows();
        }
        data.clear();
        let body = if head_only { &[][..] } else { answer.body };
        let end_stream = body.is_empty() && answer.trailers.is_empty();
        let (status, content_type, len) = (answer.status, answer.content_type, answer.body.len());
        let encoding = answer.encoding;
        let out = self.output.frames();
        frame::write_encoded_headers(out, id, end_stream, self.peer.max_frame, |block| {
            hpack::encode_answer(block, status, content_type, encoding, len, date)
        });
        let mut trailers = Vec::new();
        hpack::encode_trailers(&mut trailers, answer.trailers);
        // What the windows let go at once is written from the answer itself; only the rest
        // is copied, to wait.
        let room = self.output.room();
        let out = self.output.frames();
        let entry = &mut self.streams[index];
        let windows = (&mut self.send_window, &mut entry.send_window);
        let end = trailers.is_empty();
        let written = write_data(out, id, body, end, windows, self.peer.max_frame, room);
        data.extend_from_slice(&body[written..]);
        entry.state = State::Sending {
            data,
            at: 0,
            trailers,
            reset_after,
        };
        if end_stream || written == body.len() {
            self.flush_stream(index);
        }
    }

    /// Writes what the answers waiting for window may send now, stream by stream, while
    /// the connection's window and the output's room last.
    pub(super) fn flush(&mut self) {
        let mut index = 0;
        while index < self.streams.len() && self.send_window > 0 && self.output.room() > 0 {
            if !self.flush_stream(index) {
                index += 1;
            }
        }
    }

    /// Writes what the answer of the stream at `index` may send now; returns whether it
    /// is all written (and the stream closed).
    pub(super) fn flush_stream(&mut self, index: usize) -> bool {
        let room = self.output.room();
        let out = self.output.frames();
        let window = &mut self.send_window;
        let done = self.streams[index].write_answer(out, window, self.peer.max_frame, room);
        if done {
            self.finish(index);
        }
        done
    }

    /// The answer of the stream at `index` is all written: the stream closes.
    fn finish(&mut self, index: usize) {
        let entry = self.remove(index, false);
        if matches!(
            entry.state,
            State::Sending {
                reset_after: true,
                ..
            }
        ) {
            self.write_reset(entry.id, ErrorCode::NoError);
        }
        self.resets = self.resets.saturating_sub(1);
    }
}
