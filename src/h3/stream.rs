//! One request stream (a client's bidirectional stream, RFC 9114 4.1): its bytes in,
//! however the transport splits them, until the whole request is (HEADERS, DATA, trailing
//! HEADERS, the stream's end); then its answer out, as HEADERS, DATA and trailing HEADERS
//! frames. A file's body is read as the transport has room for it, a piece at a time; a
//! piped body (an upstream's) is taken the same way, as it arrives.

use std::io::Read;

use super::frame::{self, ErrorCode, Event, Frame, FrameReader, H3Error};
use super::qpack::{self, Decoder, SectionError};
use crate::http::{
    self, Answer, Body, FileBody, HttpDate, Method, Pipe, Progress, Request, RequestHead, Status,
};

/// What the server takes on a request stream, and tells the client.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: a larger request head is answered 431; at most
    /// 65,535 (a head's offsets are 16-bit). Its encoded section (a HEADERS payload) may
    /// take twice this before the stream is H3_EXCESSIVE_LOAD.
    pub max_field_section: usize,
    /// The largest request body; a larger one is answered 413.
    pub max_body: usize,
    /// Whether a request carries every regular field as it came (`Request::field_lines`),
    /// for a proxy to forward: written as they are decoded, a cost only a proxy pays.
    pub keep_fields: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_field_section: 16 * 1024,
            max_body: http::MAX_BODY,
            keep_fields: false,
        }
    }
}

impl Limits {
    /// The limits, each within what this server can keep.
    pub fn within_bounds(self) -> Limits {
        Limits {
            max_field_section: self.max_field_section.min(u16::MAX as usize),
            ..self
        }
    }

    /// The longest frame payload held whole on a request stream: an encoded section.
    fn max_payload(&self) -> usize {
        2 * self.max_field_section
    }
}

/// The largest DATA frame a file's body is written in: what one read takes.
const MAX_FILE_CHUNK: usize = 64 * 1024;

/// The longest a DATA frame's head is (its type, a length up to 2^62).
const DATA_HEAD_LEN: usize = 1 + 8;

/// A complete request handed out, which its stream no longer holds.
pub struct Taken {
    head: RequestHead,
    pub body: Vec<u8>,
}

impl Taken {
    /// The request as the application reads it.
    pub fn request(&self) -> Request<'_> {
        self.head.request(&self.body)
    }

    pub fn head(&self) -> &RequestHead {
        &self.head
    }
}

/// What a stream's bytes made of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// More is needed.
    More,
    /// The whole request is in: [`RequestStream::take_request`] hands it out.
    Request,
    /// The request is refused with this status (413, 431), which the server answers at
    /// once; what still comes is dropped (the endpoint may stop it: STOP_SENDING with
    /// H3_NO_ERROR, RFC 9114 4.1.1).
    Refused(Status),
}

/// How much of an answer is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// All of it: the stream may end (FIN).
    Done,
    /// A file's or a piped body is left: [`RequestStream::write_more`] writes more once the
    /// transport has room (and, for a piped body, more of it came).
    More,
    /// The file could not be read whole, or the piped body failed, after its head was
    /// written: the stream is reset (H3_INTERNAL_ERROR).
    Failed,
}

/// Where a body written as the transport has room comes from.
enum Source {
    /// A file, `left` bytes of it still to read.
    File { file: FileBody, left: usize },
    /// An upstream's body, as it arrives.
    Piped(Pipe),
}

enum State {
    /// Nothing yet: the request's HEADERS come first.
    Head,
    /// The head is in; its body arrives in DATA frames.
    Body { head: RequestHead, body: Vec<u8> },
    /// The trailers are in: nothing but the stream's end (and unknown frames) may follow.
    Trailers { head: RequestHead, body: Vec<u8> },
    /// The whole request is in, waiting to be taken.
    Complete { head: RequestHead, body: Vec<u8> },
    /// Handed out, waiting for its answer (with no body if it answers a HEAD).
    Answering { head_only: bool },
    /// Refused (413, 431): what still comes is dropped, the answer is the refusal.
    Refused,
    /// The answer's head is out; a file's or a piped body is written as the transport has
    /// room, then its trailer section.
    Sending { source: Source, trailers: Vec<u8> },
    /// The answer is all written.
    Finished,
}

/// One request stream, from its first byte to its answer's last.
pub struct RequestStream {
    reader: FrameReader,
    state: State,
    limits: Limits,
}

impl RequestStream {
    pub fn new(limits: Limits) -> Self {
        let limits = limits.within_bounds();
        RequestStream {
            reader: FrameReader::new(limits.max_payload()),
            state: State::Head,
            limits,
        }
    }

    /// Takes the stream's next bytes, all of them; `fin` if the stream ends with them.
    /// Frames out of order (DATA before HEADERS, anything but unknown frames after the
    /// trailers) and frames of the control stream are H3_FRAME_UNEXPECTED; a request cut
    /// short is H3_REQUEST_INCOMPLETE, one whose body is not its `content-length`
    /// H3_MESSAGE_ERROR.
    pub fn receive(
        &mut self,
        mut bytes: &[u8],
        fin: bool,
        decoder: &mut Decoder,
    ) -> Result<Received, H3Error> {
        while !bytes.is_empty() && self.reading() {
            let (event, used) = self.reader.next(bytes).map_err(H3Error::Connection)?;
            bytes = &bytes[used..];
            let Some(event) = event else { break };
            if let Some(refused) = on_event(&mut self.state, event, decoder, &self.limits)? {
                return Ok(refused);
            }
        }
        if !fin || !self.reading() {
            return Ok(Received::More);
        }
        if !self.reader.between_frames() {
            return Err(H3Error::Connection(ErrorCode::FrameError));
        }
        let (head, body) = match std::mem::replace(&mut self.state, State::Refused) {
            State::Body { head, body } | State::Trailers { head, body } => (head, body),
            _ => return Err(H3Error::Stream(ErrorCode::RequestIncomplete)),
        };
        if head
            .content_length
            .is_some_and(|length| length != body.len() as u64)
        {
            return Err(H3Error::Stream(ErrorCode::MessageError));
        }
        self.state = State::Complete { head, body };
        Ok(Received::Request)
    }

    /// Whether the request is still being read.
    pub fn reading(&self) -> bool {
        matches!(
            self.state,
            State::Head | State::Body { .. } | State::Trailers { .. }
        )
    }

    /// Hands the request out, if it is complete and not yet handed out: the stream then
    /// waits for its answer.
    pub fn take_request(&mut self) -> Option<Taken> {
        let State::Complete { head, .. } = &self.state else {
            return None;
        };
        let head_only = head.method() == Method::Head;
        match std::mem::replace(&mut self.state, State::Answering { head_only }) {
            State::Complete { head, body } => Some(Taken { head, body }),
            _ => None,
        }
    }

    /// What the stream holds: its request, or the trailers of the answer it writes.
    pub fn held(&self) -> usize {
        self.reader.held()
            + match &self.state {
                State::Body { head, body }
                | State::Trailers { head, body }
                | State::Complete { head, body } => head.capacity() + body.capacity(),
                State::Sending { source, trailers } => {
                    let piped = match source {
                        Source::Piped(pipe) => pipe.held(),
                        Source::File { .. } => 0,
                    };
                    trailers.capacity() + piped
                }
                _ => 0,
            }
    }

    /// Writes `answer` to `out`: its HEADERS, its body in DATA (none for a HEAD), its
    /// trailers in a last HEADERS. A file's body is written as far as `room` bytes of
    /// frames allow, the rest by [`RequestStream::write_more`]. An answer given before the
    /// request was taken (a refusal) is written all the same; a second one is not.
    pub fn answer(
        &mut self,
        answer: Answer<'_>,
        date: &HttpDate,
        out: &mut Vec<u8>,
        room: usize,
    ) -> Written {
        let head_only = match self.state {
            State::Answering { head_only } => head_only,
            State::Sending { .. } | State::Finished => return Written::Done,
            _ => false,
        };
        self.state = State::Finished;
        // HTTP/3 has no 101 (RFC 9114, 4.5): the app switches HTTP/1.1 requests only.
        let answer = match answer.status {
            Status::SwitchingProtocols => Answer::error(Status::InternalServerError),
            _ => answer,
        };
        frame::write_encoded(out, frame::HEADERS, |out| {
            qpack::encode_answer(out, &answer, answer.content_length(head_only), date)
        });
        let mut trailers = Vec::new();
        if answer.trailers().next().is_some() {
            qpack::encode_fields(&mut trailers, answer.trailers());
        }
        let bodiless = answer.bodiless();
        let body = match answer.body {
            Body::File(file) if !head_only && file.len > 0 => {
                let left = file.len;
                Ok(Source::File { file, left })
            }
            Body::Piped(pipe) if !head_only && !bodiless => Ok(Source::Piped(pipe)),
            body => Err(body),
        };
        match body {
            Ok(source) => {
                self.state = State::Sending { source, trailers };
                self.write_more(out, room)
            }
            Err(body) => {
                if let (Body::Bytes(bytes), false) = (body, head_only) {
                    if !bytes.is_empty() {
                        frame::write_data(out, bytes);
                    }
                }
                write_trailers(out, &trailers);
                Written::Done
            }
        }
    }

    /// Writes more of a file's or a piped body, in DATA frames of at most `room` bytes in
    /// all (a file's read straight into `out`); then the trailers.
    pub fn write_more(&mut self, out: &mut Vec<u8>, room: usize) -> Written {
        let State::Sending { source, trailers } = &mut self.state else {
            return Written::Done;
        };
        let written = match source {
            Source::File { file, left } => write_file(file, left, out, room),
            Source::Piped(pipe) => write_piped(pipe, out, room),
        };
        match written {
            Written::More => return Written::More,
            Written::Failed => {}
            Written::Done => write_trailers(out, trailers),
        }
        self.state = State::Finished;
        written
    }
}

/// Writes what `room` allows of a file's `left` bytes, read straight into `out`: `Done` once
/// all of it is.
fn write_file(file: &FileBody, left: &mut usize, out: &mut Vec<u8>, mut room: usize) -> Written {
    while *left > 0 && room > DATA_HEAD_LEN {
        let chunk = (*left).min(MAX_FILE_CHUNK).min(room - DATA_HEAD_LEN);
        let frame_at = out.len();
        frame::write_head(out, frame::DATA, chunk);
        let data_at = out.len();
        let read = (&file.file).take(chunk as u64).read_to_end(out);
        if read.ok() != Some(chunk) {
            out.truncate(frame_at);
            return Written::Failed;
        }
        room -= out.len() - frame_at;
        *left -= out.len() - data_at;
    }
    match *left {
        0 => Written::Done,
        _ => Written::More,
    }
}

/// Writes what `room` allows of what waits in `pipe`, in one DATA frame: `Done` once the
/// body ended and all of it is written.
fn write_piped(pipe: &Pipe, out: &mut Vec<u8>, room: usize) -> Written {
    let room = room.saturating_sub(DATA_HEAD_LEN);
    let progress = pipe.take_body(|bytes, _| {
        let len = bytes.len().min(room);
        if len > 0 {
            frame::write_data(out, &bytes[..len]);
        }
        len
    });
    match progress {
        Progress::More => Written::More,
        Progress::Whole => Written::Done,
        Progress::Failed => Written::Failed,
    }
}

/// Writes an encoded trailer section, if there is one, as the last HEADERS.
fn write_trailers(out: &mut Vec<u8>, trailers: &[u8]) {
    if !trailers.is_empty() {
        frame::write_head(out, frame::HEADERS, trailers.len());
        out.extend_from_slice(trailers);
    }
}

/// Takes one event of a request stream in `state`; `Some` if the request is refused.
fn on_event(
    state: &mut State,
    event: Event<'_>,
    decoder: &mut Decoder,
    limits: &Limits,
) -> Result<Option<Received>, H3Error> {
    let unexpected = Err(H3Error::Connection(ErrorCode::FrameUnexpected));
    match event {
        Event::Unknown => {}
        Event::DataHead { .. } => {
            if !matches!(state, State::Body { .. }) {
                return unexpected;
            }
        }
        Event::Data(data) => {
            let State::Body { head, body } = state else {
                return unexpected;
            };
            let len = body.len() + data.len();
            if head
                .content_length
                .is_some_and(|length| len as u64 > length)
            {
                return Err(H3Error::Stream(ErrorCode::MessageError));
            }
            if len > limits.max_body {
                *state = State::Refused;
                return Ok(Some(Received::Refused(Status::PayloadTooLarge)));
            }
            body.extend_from_slice(data);
        }
        Event::Frame(Frame::Headers(section)) => match std::mem::replace(state, State::Refused) {
            State::Head => {
                match decoder.request(section, limits.max_field_section, limits.keep_fields) {
                    Ok(head)
                        if head
                            .content_length
                            .is_some_and(|length| length > limits.max_body as u64) =>
                    {
                        return Ok(Some(Received::Refused(Status::PayloadTooLarge)));
                    }
                    Ok(head) => {
                        *state = State::Body {
                            head,
                            body: Vec::new(),
                        }
                    }
                    Err(SectionError::TooLarge) => {
                        return Ok(Some(Received::Refused(Status::HeaderTooLarge)));
                    }
                    Err(error) => return Err(error.error()),
                }
            }
            State::Body { head, body } => {
                decoder
                    .trailers(section, limits.max_field_section)
                    .map_err(SectionError::error)?;
                *state = State::Trailers { head, body };
            }
            _ => return unexpected,
        },
        // SETTINGS, GOAWAY, MAX_PUSH_ID and CANCEL_PUSH belong on the control stream.
        Event::Frame(_) => return unexpected,
    }
    Ok(None)
}
