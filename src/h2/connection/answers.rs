//! A connection's answers: HEADERS at once, DATA as the windows and the output's room
//! allow, then trailers; the bound on what the answers waiting for them hold; and the clock
//! on answers that wait.

use std::time::Instant;

use super::Connection;
use crate::h2::frame::{self, ErrorCode};
use crate::h2::hpack;
use crate::h2::stream::{write_data, Sent, State, Stream};
use crate::http::{Answer, Body, BufferPool, HttpDate, Method, Status};

/// What the answers waiting for the peer's window or the output's room may hold before the
/// connection takes no further request: each holds the rest of its body, copied, and a
/// client that opens no window (SETTINGS_INITIAL_WINDOW_SIZE 0) would otherwise make the
/// connection hold every answer of every stream it opens (RFC 9113, 10.5). Four times the
/// output's high-water mark; one answer more may go past it. nginx and h2o hold about a
/// window per stream, reading a file as its window opens.
pub(super) const MAX_WAITING: usize = 1024 * 1024;

impl Connection {
    /// Starts the clock on answers that wait, unless it runs, or stops it once none does.
    /// Called last by whatever may write; DATA written for an answer stops it first
    /// ([`Connection::answers_moved`]), so only their progress restarts it.
    pub(super) fn watch_window(&mut self, now: Instant) {
        let waiting = self.answers_held > 0 || self.piped().1 > 0;
        self.window_stalled_since = match waiting {
            true => self.window_stalled_since.or(Some(now)),
            false => None,
        };
    }

    /// DATA of an answer was written: the answers are not stalled.
    fn answers_moved(&mut self) {
        self.window_stalled_since = None;
    }

    /// Whether the answers waiting hold their bound, [`MAX_WAITING`] or the connection's
    /// share of the worker's budget if less: no further request is taken until they go.
    pub(super) fn answers_full(&self) -> bool {
        self.answers_held + self.piped().1 > self.answers_bound as usize
    }

    /// What the pipes of its streams' answers hold: (the memory, the bytes waiting). Each
    /// holds a window at most (`http::WINDOW`); a walk only while some stream has one.
    pub(super) fn piped(&self) -> (usize, usize) {
        if self.piped_streams == 0 {
            return (0, 0);
        }
        let piped = self.streams.iter().map(Stream::piped);
        piped.fold((0, 0), |(held, waiting), (h, w)| (held + h, waiting + w))
    }

    /// More of the piped body answering `stream` is in (or it ended, or failed): noted
    /// only, for the next [`Connection::process`] to write. The upstream's event comes
    /// whenever, and the kernel may be sending from the output then (io_uring): it must not
    /// move.
    pub fn moved(&mut self, stream: u32) {
        let sending = |index| matches!(self.streams[index].state, State::Sending { .. });
        if self.index(stream).is_some_and(sending) {
            self.pipes_moved = true;
        }
    }

    /// Writes what the piped bodies hold, as far as the windows and the output's room
    /// allow; one that failed resets its stream.
    pub(super) fn flush_pipes(&mut self) {
        let mut index = 0;
        while index < self.streams.len() {
            let piped = matches!(
                self.streams[index].state,
                State::Sending { pipe: Some(_), .. }
            );
            if !(piped && self.flush_stream(index)) {
                index += 1;
            }
        }
    }

    /// Answers the request of `stream`: its HEADERS now, its body as flow control allows,
    /// then its trailers. A stream that is gone (reset by the client) is not answered. A
    /// file is read into a spare buffer, which the frames are written from (what the
    /// windows hold back is copied, to wait); one that cannot be read is answered with the
    /// error instead. An answer given later, for an event, is given within
    /// [`Connection::for_event`].
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
        let State::Answering { head_only } = self.streams[index].state else {
            return;
        };
        self.last_active = now;
        self.output.lend(buffers);
        let mut file = Vec::new();
        let error;
        let read;
        let answer = match &answer.body {
            Body::File(_) if !head_only => {
                file = buffers.take();
                match answer.body.write_to(&mut file) {
                    Ok(()) => {
                        read = answer.with_body(Body::Bytes(&file));
                        &read
                    }
                    Err(status) => {
                        error = Answer::error(status);
                        &error
                    }
                }
            }
            _ => answer,
        };
        self.respond(index, answer, false, date);
        buffers.give_back(file);
        self.output.owe_progress(now);
        self.watch_window(now);
    }

    /// The connection's own answer to a request it refuses (413, 431).
    pub(super) fn answer_error(
        &mut self,
        index: usize,
        status: Status,
        reset_after: bool,
        date: &HttpDate,
    ) {
        self.respond(index, &Answer::error(status), reset_after, date);
    }

    /// Writes `answer`, whose body is bytes unless it answers a HEAD.
    fn respond(&mut self, index: usize, answer: &Answer<'_>, reset_after: bool, date: &HttpDate) {
        let entry = &mut self.streams[index];
        let id = entry.id;
        let (head_only, mut data) = match &mut entry.state {
            State::Receiving { head, body } | State::Request { head, body } => {
                (head.method() == Method::Head, std::mem::take(body))
            }
            State::Answering { head_only } => (*head_only, Vec::new()),
            State::Sending { .. } => return,
        };
        self.inflow.release(data.len());
        if !data.is_empty() {
            self.grant_windows();
        }
        data.clear();
        // HTTP/2 has no 101 (RFC 9113, 8.6): the app switches HTTP/1.1 requests only.
        let internal_error = Answer::error(Status::InternalServerError);
        let answer = match answer.status {
            Status::SwitchingProtocols => &internal_error,
            _ => answer,
        };
        let (body, pipe) = match (&answer.body, head_only) {
            (Body::Bytes(bytes), false) => (*bytes, None),
            (Body::Piped(pipe), false) if !answer.bodiless() => (&[][..], Some(pipe.clone())),
            _ => (&[][..], None),
        };
        let end_stream = body.is_empty() && answer.trailers().next().is_none() && pipe.is_none();
        // Once per connection: a client remembers it for the origin (`ma`), and on answers
        // this small it would cost a tenth of the CPU per request.
        let alt_svc = self.limits.alt_svc.take();
        let out = self.output.frames();
        frame::write_encoded_headers(out, id, end_stream, self.peer.max_frame, |block| {
            hpack::encode_answer(
                block,
                answer,
                answer.content_length(head_only),
                date,
                alt_svc,
            )
        });
        let mut trailers = Vec::new();
        hpack::encode_fields(&mut trailers, answer.trailers());
        // What the windows let go at once is written from the answer itself; only the rest
        // is copied, to wait.
        let room = self.output.room();
        let out = self.output.frames();
        let entry = &mut self.streams[index];
        let windows = (&mut self.send_window, &mut entry.send_window);
        let end = trailers.is_empty() && pipe.is_none();
        let written = write_data(out, id, body, end, windows, self.peer.max_frame, room);
        data.extend_from_slice(&body[written..]);
        self.piped_streams += u32::from(pipe.is_some());
        entry.state = State::Sending {
            data,
            at: 0,
            pipe,
            trailers,
            reset_after,
        };
        self.answers_held += entry.held();
        if written > 0 {
            self.answers_moved();
        }
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

    /// Writes what the answer of the stream at `index` may send now; returns whether the
    /// stream closed: its answer all written, or reset (INTERNAL_ERROR) as its piped body
    /// failed.
    pub(super) fn flush_stream(&mut self, index: usize) -> bool {
        let room = self.output.room();
        let out = self.output.frames();
        let window = &mut self.send_window;
        let entry = &mut self.streams[index];
        let left = entry.data_left();
        let sent = entry.write_answer(out, window, self.peer.max_frame, room);
        if entry.data_left() < left {
            self.answers_moved();
        }
        match sent {
            Sent::All => self.finish(index),
            Sent::Waiting => return false,
            Sent::Failed => {
                if let Some(entry) = self.remove(index, true) {
                    self.write_reset(entry.id, ErrorCode::Internal);
                }
            }
        }
        true
    }

    /// The answer of the stream at `index` is all written: the stream closes.
    fn finish(&mut self, index: usize) {
        let Some(entry) = self.remove(index, false) else {
            return;
        };
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
