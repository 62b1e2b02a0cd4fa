//! One HTTP/3 connection over the streams of one QUIC connection, without I/O: the
//! transport hands in each stream's bytes as they arrive ([`Connection::receive`]), the
//! requests go to the application through an [`http::Handler`](crate::http::Handler)
//! ([`Connection::serve`]), their answers come back now or later ([`Connection::answer`]),
//! and the transport takes each stream's bytes as its flow control allows
//! ([`Connection::flush`]). Streams are named by their QUIC identifiers.
//!
//! A request stream's life is [`RequestStream`]'s; here each also has the bytes of its
//! answer still to write. An error of one stream resets it (its code in
//! [`Connection::resets`]); an error of the connection closes it ([`Connection::error`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::control::{write_control_stream, write_goaway, OpenedStreams, UniStream};
use super::frame::{ErrorCode, H3Error};
use super::qpack::Decoder;
use super::stream::{Limits, Received, RequestStream, Written};
use crate::http::{Answer, Handler, HttpDate, Reply, Status, Ticket};

/// How many bytes of a file's or a piped body are written ahead of the transport, per
/// stream: what a stream holds when QUIC's send window is full, so 16 KiB (1 MiB for 64
/// streams), beside what waits in a pipe.
const FILE_ROOM: usize = 16 * 1024;

/// Where an exchange is after a flush.
enum Flushed {
    /// Its request or its answer is not all in, or the transport took only part of it.
    Waiting,
    /// Its answer is all written, the stream ended.
    Done,
    /// A file's body could not be read: the stream is reset.
    Failed,
}

/// A request stream and its answer's bytes still to write.
struct Exchange {
    /// When its first bytes arrived: the request must be all in within the request timeout.
    opened: Instant,
    stream: RequestStream,
    out: Vec<u8>,
    /// The answer is all in `out` (or a file's body is still to read: `More`).
    written: Option<Written>,
    /// The request was refused with this status (413, 431), to answer at the next serve.
    refused: Option<Status>,
}

impl Exchange {
    /// Hands the answer's bytes to `write`, and more of a file's or a piped body as it
    /// takes them (a piped body as far as it has arrived).
    fn flush(&mut self, id: u64, write: &mut impl FnMut(u64, &[u8], bool) -> usize) -> Flushed {
        while let Some(written) = &self.written {
            if *written == Written::Failed {
                return Flushed::Failed;
            }
            let complete = *written == Written::Done;
            let taken = write(id, &self.out, complete);
            self.out.drain(..taken);
            if !self.out.is_empty() {
                break;
            }
            if complete {
                return Flushed::Done;
            }
            let more = self.stream.write_more(&mut self.out, FILE_ROOM);
            let stalled = more == Written::More && self.out.is_empty();
            self.written = Some(more);
            if stalled {
                break;
            }
        }
        Flushed::Waiting
    }
}

pub struct Connection {
    limits: Limits,
    decoder: Decoder,
    opened: OpenedStreams,
    /// The client's unidirectional streams: its control stream and QPACK's, and any it
    /// opens of unknown types.
    uni: Vec<(u64, UniStream)>,
    requests: BTreeMap<u64, Exchange>,
    /// Our control stream and its bytes still to write (its SETTINGS, a GOAWAY).
    control: Option<(u64, Vec<u8>)>,
    /// Streams to reset, with the code of their error.
    resets: Vec<(u64, ErrorCode)>,
    /// Request streams refused before their end, whose rest is not read.
    stops: Vec<u64>,
    error: Option<ErrorCode>,
    /// The first request stream not taken once we sent GOAWAY.
    going_away: Option<u64>,
}

impl Connection {
    pub fn new(limits: Limits) -> Self {
        Connection {
            limits,
            decoder: Decoder::default(),
            opened: OpenedStreams::default(),
            uni: Vec::new(),
            requests: BTreeMap::new(),
            control: None,
            resets: Vec::new(),
            stops: Vec::new(),
            error: None,
            going_away: None,
        }
    }

    /// Our control stream is `id`: its SETTINGS go first.
    pub fn open_control(&mut self, id: u64) {
        let mut out = Vec::new();
        write_control_stream(&mut out, &self.limits);
        self.control = Some((id, out));
    }

    /// Bytes of stream `id`, all of them, arrived at `now`; `fin` if the stream ends with
    /// them.
    pub fn receive(&mut self, id: u64, bytes: &[u8], fin: bool, now: Instant) {
        if self.error.is_some() {
            return;
        }
        match stream_kind(id) {
            StreamKind::ClientRequest => self.receive_request(id, bytes, fin, now),
            StreamKind::ClientUni => {
                let index = match self.uni.iter().position(|(uni, _)| *uni == id) {
                    Some(index) => index,
                    None => {
                        self.uni.push((id, UniStream::default()));
                        self.uni.len() - 1
                    }
                };
                let stream = &mut self.uni[index].1;
                match stream.receive(bytes, fin, &mut self.opened) {
                    Err(code) => self.error = Some(code),
                    // Ended (of an unknown type: a critical one may not end), it is
                    // forgotten; else a client opening and ending streams grows the list.
                    Ok(()) if fin => {
                        self.uni.swap_remove(index);
                    }
                    Ok(()) => {}
                }
            }
            // The server's own streams carry nothing in.
            StreamKind::Server => self.error = Some(ErrorCode::StreamCreationError),
        }
    }

    fn receive_request(&mut self, id: u64, bytes: &[u8], fin: bool, now: Instant) {
        if self.going_away.is_some_and(|first| id >= first) {
            return self.resets.push((id, ErrorCode::RequestRejected));
        }
        let limits = self.limits;
        let exchange = self.requests.entry(id).or_insert_with(|| Exchange {
            opened: now,
            stream: RequestStream::new(limits),
            out: Vec::new(),
            written: None,
            refused: None,
        });
        match exchange.stream.receive(bytes, fin, &mut self.decoder) {
            Ok(Received::More | Received::Request) => {}
            Ok(Received::Refused(status)) => {
                exchange.refused = Some(status);
                // Its answer may end the exchange before the client's body does: what comes
                // after would be read as a new request (a DATA frame first).
                self.stops.push(id);
            }
            Err(H3Error::Stream(code)) => {
                self.requests.remove(&id);
                self.resets.push((id, code));
            }
            Err(H3Error::Connection(code)) => self.error = Some(code),
        }
    }

    /// Hands every complete request not yet handed out to `handler`, with a ticket naming
    /// `connection` (a slot and its generation) and the stream; answers those answered now.
    pub fn serve(&mut self, handler: &mut impl Handler, connection: (u32, u32), date: &HttpDate) {
        let (slot, generation) = connection;
        for (&id, exchange) in &mut self.requests {
            if let Some(status) = exchange.refused.take() {
                let answer = Answer::error(status);
                exchange.written = Some(exchange.stream.answer(answer, date, &mut exchange.out, 0));
            }
            let Some(taken) = exchange.stream.take_request() else {
                continue;
            };
            let seq = (id >> 2) as u32;
            let ticket = Ticket {
                slot,
                generation,
                seq,
            };
            if let Reply::Now(answer) = handler.handle(&taken.request(), ticket) {
                let room = FILE_ROOM;
                exchange.written = Some(exchange.stream.answer(
                    answer,
                    date,
                    &mut exchange.out,
                    room,
                ));
            }
        }
    }

    /// The answer to the request of `seq` (its ticket's), given later.
    pub fn answer(&mut self, seq: u32, answer: Answer<'_>, date: &HttpDate) {
        let id = u64::from(seq) << 2;
        if let Some(exchange) = self.requests.get_mut(&id) {
            let written = exchange
                .stream
                .answer(answer, date, &mut exchange.out, FILE_ROOM);
            exchange.written = Some(written);
        }
    }

    /// Hands each stream's bytes to `write` (stream, bytes, whether the stream ends with
    /// them), which returns how many the transport took; reads more of a file's body as
    /// the transport takes it. Forgets the exchanges that are all written.
    pub fn flush(&mut self, mut write: impl FnMut(u64, &[u8], bool) -> usize) {
        if let Some((id, out)) = &mut self.control {
            if !out.is_empty() {
                let taken = write(*id, out, false);
                out.drain(..taken);
            }
        }
        let resets = &mut self.resets;
        self.requests
            .retain(|&id, exchange| match exchange.flush(id, &mut write) {
                Flushed::Waiting => true,
                Flushed::Done => false,
                Flushed::Failed => {
                    resets.push((id, ErrorCode::InternalError));
                    false
                }
            });
    }

    /// Resets (H3_REQUEST_INCOMPLETE) the request streams whose request is not all in
    /// `timeout` after its first bytes, as HTTP/1.1 and HTTP/2 answer a slow request: a
    /// client cannot hold a stream and its buffers by sending a request slowly.
    pub fn reset_late_requests(&mut self, now: Instant, timeout: Duration) {
        let late = |exchange: &Exchange| {
            exchange.stream.reading() && now.duration_since(exchange.opened) > timeout
        };
        let resets = &mut self.resets;
        self.requests.retain(|&id, exchange| match late(exchange) {
            true => {
                resets.push((id, ErrorCode::RequestIncomplete));
                false
            }
            false => true,
        });
    }

    /// Stream `id` was reset or stopped by the client: a request stream's exchange ends,
    /// its answer cancelled (H3_REQUEST_CANCELLED); a unidirectional stream of the client's
    /// is forgotten. Its control or QPACK streams reset, or ours stopped, fail the
    /// connection (RFC 9114 6.2.1, RFC 9204 4.2).
    pub fn stream_gone(&mut self, id: u64) {
        // The reset ends our side too: left open, the stream would never be freed, and
        // the client would get no stream in its place (RFC 9114 4.1.2).
        if self.requests.remove(&id).is_some() {
            self.resets.push((id, ErrorCode::RequestCancelled));
        }
        let critical = match self.uni.iter().position(|(uni, _)| *uni == id) {
            Some(index) => self.uni.swap_remove(index).1.is_critical(),
            None => self.control.as_ref().is_some_and(|(ours, _)| *ours == id),
        };
        if critical {
            self.error.get_or_insert(ErrorCode::ClosedCriticalStream);
        }
    }

    /// Takes no request stream from the next one on, and tells the client so (GOAWAY).
    pub fn go_away(&mut self) {
        if self.going_away.is_some() {
            return;
        }
        let next = self.requests.keys().next_back().map_or(0, |last| last + 4);
        self.going_away = Some(next);
        if let Some((_, out)) = &mut self.control {
            write_goaway(out, next);
        }
    }

    /// Streams to reset (and stop), with their codes, since the last call.
    pub fn resets(&mut self) -> impl Iterator<Item = (u64, ErrorCode)> + '_ {
        self.resets.drain(..)
    }

    /// Request streams refused before the client finished them, since the last call: stop
    /// reading them (STOP_SENDING with H3_NO_ERROR, RFC 9114 4.1.1), so that nothing more
    /// arrives on them.
    pub fn stops(&mut self) -> impl Iterator<Item = u64> + '_ {
        self.stops.drain(..)
    }

    /// The connection's error, once it has one: close it with this code.
    pub fn error(&self) -> Option<ErrorCode> {
        self.error
    }

    /// Whether every request taken is answered and written.
    pub fn is_idle(&self) -> bool {
        self.requests.is_empty() && self.control.as_ref().is_none_or(|(_, out)| out.is_empty())
    }

    /// The memory it holds, for the worker's budget: requests coming in or waiting for
    /// their answers, answers still to write, the client's unidirectional streams', QPACK's
    /// and our control stream's buffers.
    pub fn held(&self) -> usize {
        let requests: usize = self
            .requests
            .values()
            .map(|exchange| exchange.stream.held() + exchange.out.capacity())
            .sum();
        let uni: usize = self.uni.iter().map(|(_, stream)| stream.held()).sum();
        let control = self.control.as_ref().map_or(0, |(_, out)| out.capacity());
        requests + uni + self.decoder.held() + control
    }
}

/// Who opened a stream, and which way it goes (RFC 9000, 2.1: its two low bits).
enum StreamKind {
    ClientRequest,
    ClientUni,
    Server,
}

fn stream_kind(id: u64) -> StreamKind {
    match id & 0b11 {
        0b00 => StreamKind::ClientRequest,
        0b10 => StreamKind::ClientUni,
        _ => StreamKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::control::{STREAM_CONTROL, STREAM_QPACK_ENCODER};
    use crate::h3::frame;

    /// The opening of a client's control stream: its type and an empty SETTINGS.
    fn control_stream() -> Vec<u8> {
        let mut bytes = vec![STREAM_CONTROL as u8];
        frame::write_settings(&mut bytes, &[]);
        bytes
    }

    #[test]
    fn ended_unidirectional_streams_are_forgotten() {
        let (mut conn, now) = (Connection::new(Limits::default()), Instant::now());
        conn.receive(2, &control_stream(), false, now);
        // Reserved types (0x21), ended with their bytes, or before their type is whole.
        for n in 1..1000 {
            match n % 2 {
                0 => conn.receive(2 + 4 * n, &[0x21, 1, 2, 3], true, now),
                _ => conn.receive(2 + 4 * n, &[0x40], true, now),
            }
        }
        assert_eq!(conn.error(), None);
        assert_eq!(conn.uni.len(), 1, "the control stream alone");
    }

    #[test]
    fn a_critical_stream_reset_or_ours_stopped_closes_the_connection() {
        let (mut conn, now) = (Connection::new(Limits::default()), Instant::now());
        conn.receive(2, &control_stream(), false, now);
        conn.receive(6, &[0x21], false, now);
        conn.stream_gone(6);
        assert_eq!(conn.error(), None, "a stream of an unknown type may go");
        conn.stream_gone(2);
        assert_eq!(conn.error(), Some(ErrorCode::ClosedCriticalStream));

        let mut conn = Connection::new(Limits::default());
        conn.receive(2, &[STREAM_QPACK_ENCODER as u8], false, now);
        conn.stream_gone(2);
        assert_eq!(conn.error(), Some(ErrorCode::ClosedCriticalStream));

        let mut conn = Connection::new(Limits::default());
        conn.open_control(3);
        conn.stream_gone(3);
        assert_eq!(conn.error(), Some(ErrorCode::ClosedCriticalStream));
    }

    #[test]
    fn a_request_stream_gone_before_its_answer_is_reset_with_request_cancelled() {
        let (mut conn, now) = (Connection::new(Limits::default()), Instant::now());
        let mut frames = Vec::new();
        frame::write_encoded(&mut frames, frame::HEADERS, |out| {
            // :method GET, :scheme https, :path /, :authority a
            out.extend_from_slice(&[0, 0, 0xd1, 0xd7, 0xc1, 0x50, 1, b'a']);
        });
        conn.receive(0, &frames, false, now);
        conn.stream_gone(0);
        conn.stream_gone(4);
        let resets: Vec<_> = conn.resets().collect();
        assert_eq!(
            resets,
            [(0, ErrorCode::RequestCancelled)],
            "not 4: never opened"
        );
        assert_eq!(conn.error(), None);
    }

    #[test]
    fn a_request_refused_before_its_end_is_stopped() {
        let limits = Limits {
            max_body: 10,
            ..Limits::default()
        };
        let (mut conn, now) = (Connection::new(limits), Instant::now());
        let mut frames = Vec::new();
        frame::write_encoded(&mut frames, frame::HEADERS, |out| {
            // :method POST, :scheme https, :path /, :authority a, content-length 100
            out.extend_from_slice(&[0, 0, 0xd4, 0xd7, 0xc1, 0x50, 1, b'a', 0x54, 3]);
            out.extend_from_slice(b"100");
        });
        conn.receive(0, &frames, false, now);
        assert_eq!(conn.stops().collect::<Vec<_>>(), [0]);
        assert_eq!(conn.error(), None);
    }
}
