//! An upstream's responses read as their bytes arrive (RFC 9112 sections 4 to 7, RFC 9110
//! sections 6.4.1 and 15.2): the head of each, then its body in pieces, then its end.

use std::mem::MaybeUninit;

use super::super::message::{
    list, BodyFraming, ChunkError, ChunkedReader, FramingError, FramingFields, Piece, MAX_HEAD,
    MAX_HEADERS,
};
use super::is_hop_by_hop;
use crate::http::FieldLines;

// A head's dropped fields are bits of a u64.
const _: () = assert!(MAX_HEADERS <= 64);

/// Reads the responses of one upstream connection, in order. It holds no bytes: the caller
/// keeps what it received in a buffer, hands it to [`ResponseReader::read`] and drops the
/// bytes each call used. Between calls the caller holds less than [`MAX_HEAD`] bytes
/// (a head, a chunk line or trailers not all in) whatever the size of the bodies: a body
/// is handed out as it arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseReader {
    state: State,
}

/// Where the reader stands, with what it needs there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// A head is next: between responses, or after interim ones.
    #[default]
    Head,
    /// In a body with a Content-Length, `left` bytes of it still to come.
    Length { left: usize, keep_alive: bool },
    /// In a chunked body.
    Chunked {
        reader: ChunkedReader,
        keep_alive: bool,
    },
    /// In a body that runs to the connection's close.
    UntilClose,
    /// The body is over: its end is the next event.
    Ended { keep_alive: bool },
    /// The last response is over and the connection is not to be reused: not a byte more.
    Closed,
    /// An error was found: every later call returns it.
    Failed(Error),
}

/// What the caller awaits of the upstream: the response to the oldest of its requests
/// that has not had its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// Every request has had its response: a byte from the upstream now is an error.
    Nothing,
    /// The response to a request other than HEAD.
    Response,
    /// The response to a HEAD request, which has no body whatever its fields say.
    HeadResponse,
}

/// How a final response's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// None: the response to HEAD, a 204 or a 304 (its Content-Length, if any, describes
    /// the representation, and is among its fields).
    Empty,
    /// Content-Length bytes.
    Known(usize),
    /// Chunked: decoded, its trailers checked and dropped; its length is known at its end.
    Chunked,
    /// No length: the body runs to the upstream's close, and the connection is not reused.
    UntilClose,
}

/// A response's head: its status, how its body is framed, and its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head<'a> {
    /// 100 to 599.
    pub status: u16,
    /// For an interim (1xx) response, [`BodyLength::Empty`].
    pub body: BodyLength,
    /// Whether the connection can carry another response after this one's: HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `Connection: keep-alive`, and a body
    /// that does not run to the close. Known from the head, so that no more requests are
    /// sent on a connection that will close.
    pub keep_alive: bool,
    /// Its end-to-end fields, in order: the hop-by-hop ones are left out (Connection,
    /// Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade, and any field
    /// a Connection field names); Content-Length is kept, since for HEAD and 304 it says the
    /// representation's length (the caller frames what it sends on).
    pub fields: FieldLines<'a>,
}

/// One step of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// An interim response (1xx but 101: 100 Continue, 103 Early Hints), surfaced for the
    /// caller to pass on or drop; the final response follows.
    Interim(Head<'a>),
    /// The final response's head.
    Head(Head<'a>),
    /// The next bytes of its body, decoded.
    Body(&'a [u8]),
    /// The response is over; another may follow on the connection if `keep_alive`.
    End { keep_alive: bool },
}

/// What a call to [`ResponseReader::read`] gives.
#[derive(Debug, PartialEq, Eq)]
pub struct Read<'a> {
    /// The next event, or `None` when more bytes are needed (at the upstream's close: it
    /// closed between responses with nothing awaited, or after the last one).
    pub event: Option<Event<'a>>,
    /// The bytes taken at the front of the input, framing included, which the caller
    /// drops before the next call (they may have been rewritten).
    pub used: usize,
}

impl<'a> Read<'a> {
    fn event(event: Event<'a>, used: usize) -> Self {
        Read {
            event: Some(event),
            used,
        }
    }

    fn more(used: usize) -> Self {
        Read { event: None, used }
    }
}

/// What is wrong with what the upstream sent: the connection cannot be used any more, and
/// the response at fault (if any) is not to be passed on as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The status line or a field line is not as RFC 9112 has it (as httparse reads it:
    /// no obs-fold, no blank before a colon), a line ends in a bare LF, or empty lines
    /// come before the status line.
    Malformed,
    /// The status is not 100 to 599.
    Status,
    /// The head is longer than [`MAX_HEAD`].
    HeadTooLarge,
    /// The head has more than [`MAX_HEADERS`] fields.
    TooManyFields,
    /// 101 Switching Protocols, which no request asked for.
    SwitchingProtocols,
    /// A Content-Length is not digits alone, overflows, or disagrees with another.
    ContentLength,
    /// A transfer coding other than `chunked` alone and once, or any in HTTP/1.0.
    TransferEncoding,
    /// Both Transfer-Encoding and Content-Length.
    LengthAndEncoding,
    /// The chunked body's framing is wrong.
    Chunked(ChunkError),
    /// Bytes came when no response was awaited, or after a response that closes the
    /// connection: never read as a response to a later request.
    Unsolicited,
    /// The upstream closed before the awaited response began: a request that can be
    /// retried (an idempotent one) can be sent again elsewhere.
    NoResponse,
    /// The upstream closed within a response.
    Truncated,
}

impl From<FramingError> for Error {
    fn from(error: FramingError) -> Self {
        match error {
            FramingError::ContentLength => Error::ContentLength,
            FramingError::TransferEncoding => Error::TransferEncoding,
            FramingError::Both => Error::LengthAndEncoding,
        }
    }
}

impl ResponseReader {
    /// Reads the next event at the front of `input`, the bytes received and not yet used;
    /// `awaited` says what the caller awaits (read only where a head is next), `eof` that
    /// the upstream has closed and `input` is all that is left. Call again while it gives
    /// an event. A chunked body's data is moved down over its framing, in `input` itself,
    /// so that the chunks that have arrived come out as one [`Event::Body`].
    pub fn read<'a>(
        &mut self,
        input: &'a mut [u8],
        awaited: Awaited,
        eof: bool,
    ) -> Result<Read<'a>, Error> {
        let read = self.step(input, awaited, eof);
        if let Err(error) = read {
            self.state = State::Failed(error);
        }
        read
    }

    fn step<'a>(
        &mut self,
        input: &'a mut [u8],
        awaited: Awaited,
        eof: bool,
    ) -> Result<Read<'a>, Error> {
        match self.state {
            State::Head if input.is_empty() => match (awaited, eof) {
                (Awaited::Nothing, _) | (_, false) => Ok(Read::more(0)),
                _ => Err(Error::NoResponse),
            },
            State::Head if awaited == Awaited::Nothing => Err(Error::Unsolicited),
            State::Head => {
                let input: &'a [u8] = input;
                let Some((head, len)) = parse_head(input, awaited == Awaited::HeadResponse)? else {
                    return match eof {
                        true => Err(Error::Truncated),
                        false => Ok(Read::more(0)),
                    };
                };
                if head.status < 200 {
                    return Ok(Read::event(Event::Interim(head), len));
                }
                let keep_alive = head.keep_alive;
                self.state = match head.body {
                    BodyLength::Empty | BodyLength::Known(0) => State::Ended { keep_alive },
                    BodyLength::Known(left) => State::Length { left, keep_alive },
                    BodyLength::Chunked => State::Chunked {
                        reader: ChunkedReader::default(),
                        keep_alive,
                    },
                    BodyLength::UntilClose => State::UntilClose,
                };
                Ok(Read::event(Event::Head(head), len))
            }
            State::Length { left, keep_alive } => {
                let len = left.min(input.len());
                if len == 0 {
                    return match eof {
                        true => Err(Error::Truncated),
                        false => Ok(Read::more(0)),
                    };
                }
                self.state = match left - len {
                    0 => State::Ended { keep_alive },
                    left => State::Length { left, keep_alive },
                };
                Ok(Read::event(Event::Body(&input[..len]), len))
            }
            State::Chunked { reader, keep_alive } => self.chunked(input, reader, keep_alive, eof),
            State::UntilClose if input.is_empty() => match eof {
                true => self.end(false, 0),
                false => Ok(Read::more(0)),
            },
            State::UntilClose => {
                let len = input.len();
                Ok(Read::event(Event::Body(input), len))
            }
            State::Ended { keep_alive } => self.end(keep_alive, 0),
            State::Closed if input.is_empty() => Ok(Read::more(0)),
            State::Closed => Err(Error::Unsolicited),
            State::Failed(error) => Err(error),
        }
    }

    /// Decodes as much of a chunked body as `input` holds: its data moved down to the
    /// front, one event for all of it. An error or the body's end after some data comes
    /// at the next call, so that the events do not depend on how the bytes were cut.
    fn chunked<'a>(
        &mut self,
        input: &'a mut [u8],
        mut reader: ChunkedReader,
        keep_alive: bool,
        eof: bool,
    ) -> Result<Read<'a>, Error> {
        let (mut at, mut decoded) = (0, 0);
        let outcome = loop {
            match reader.next(&input[at..]) {
                Ok(Some(Piece::Data(len))) => {
                    input.copy_within(at..at + len, decoded);
                    decoded += len;
                    at += len;
                }
                Ok(Some(Piece::Size { len, .. } | Piece::Trailer(len))) => at += len,
                Ok(Some(Piece::DataEnd)) => at += 2,
                Ok(Some(Piece::End)) => break Ok(true),
                Ok(None) => break Ok(false),
                Err(error) => break Err(Error::Chunked(error)),
            }
        };
        let (at, over) = match outcome {
            Ok(true) => (at + 2, true),
            _ => (at, false),
        };
        self.state = match outcome {
            Ok(true) => State::Ended { keep_alive },
            Ok(false) => State::Chunked { reader, keep_alive },
            Err(error) => State::Failed(error),
        };
        if decoded > 0 {
            return Ok(Read::event(Event::Body(&input[..decoded]), at));
        }
        match outcome {
            Err(error) => Err(error),
            _ if over => self.end(keep_alive, at),
            _ if eof => Err(Error::Truncated),
            _ => Ok(Read::more(at)),
        }
    }

    /// The response's end, after `used` bytes.
    fn end<'a>(&mut self, keep_alive: bool, used: usize) -> Result<Read<'a>, Error> {
        self.state = match keep_alive {
            true => State::Head,
            false => State::Closed,
        };
        Ok(Read::event(Event::End { keep_alive }, used))
    }
}

/// Parses the head at the front of `input`, once it is all in: the head and its length.
fn parse_head(input: &[u8], to_head: bool) -> Result<Option<(Head<'_>, usize)>, Error> {
    // Within MAX_HEAD however much has arrived, so that the outcome does not depend on how
    // the bytes were cut.
    let window = &input[..input.len().min(MAX_HEAD)];
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        window,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() == MAX_HEAD => {
            return Err(Error::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::TooManyFields),
        Err(_) => return Err(Error::Malformed),
    };
    let head = &window[..len];
    // httparse takes a bare LF for a line's end, and skips empty lines before the status
    // line: where two parsers could see different messages, nothing is guessed.
    let bare_lf = head
        .iter()
        .enumerate()
        .any(|(at, &b)| b == b'\n' && (at == 0 || head[at - 1] != b'\r'));
    if bare_lf || !head.starts_with(b"HTTP/") {
        return Err(Error::Malformed);
    }
    // httparse only completes with both set.
    let (Some(minor), Some(status)) = (response.version, response.code) else {
        return Err(Error::Malformed);
    };
    let http10 = minor == 0;
    match status {
        101 => return Err(Error::SwitchingProtocols),
        100..=599 => {}
        _ => return Err(Error::Status),
    }

    let mut framing = FramingFields::default();
    let mut dropped = 0;
    for (i, header) in response.headers.iter().enumerate() {
        framing.read(header.name, header.value)?;
        if is_hop_by_hop(header.name.as_bytes()) {
            dropped |= 1 << i;
        }
        if header.name.eq_ignore_ascii_case("connection") {
            for option in list(header.value) {
                for (j, named) in response.headers.iter().enumerate() {
                    if named.name.as_bytes().eq_ignore_ascii_case(option) {
                        dropped |= 1 << j;
                    }
                }
            }
        }
    }
    // The framing fields are held to their rules in every response, even one whose body
    // they do not frame: an upstream that sends them wrong is not trusted with the next.
    let framed = framing.body(http10)?;
    // RFC 9112, 6.3: no body for HEAD, 1xx, 204 and 304, whatever the fields say; then
    // chunked, then Content-Length, else to the close.
    let body = match framed {
        _ if to_head || status < 200 || status == 204 || status == 304 => BodyLength::Empty,
        BodyFraming::Chunked => BodyLength::Chunked,
        BodyFraming::Length(length) => BodyLength::Known(length),
        BodyFraming::Unframed => BodyLength::UntilClose,
    };
    let keep_alive = framing.keep_alive(http10) && body != BodyLength::UntilClose;
    let status_line = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(0, |end| end + 1);
    Ok(Some((
        Head {
            status,
            body,
            keep_alive,
            // Without the empty line that ends the head.
            fields: FieldLines::new(&head[status_line..len - 2], dropped),
        },
        len,
    )))
}
