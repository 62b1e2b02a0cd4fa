//! One HTTP/2 connection, server side: the preface, settings, flow control, streams and
//! their errors, and the bounds a hostile client meets.
//!
//! The server feeds it plaintext ([`Connection::receive`]), takes each complete request
//! ([`Connection::take_request`]), answers it ([`Connection::answer`]) and sends
//! [`Connection::unsent`], reporting what went ([`Connection::sent`]).

mod answers;
mod bodies;
mod deadlines;

use std::collections::VecDeque;
use std::time::Instant;

use super::frame::{self, ErrorCode, Frame, H2Error, Head, HEAD_LEN, MAX_WINDOW};
use super::hpack::{self, BlockError, Decoder, PendingBlock};
use super::inflow::Inflow;
use super::output::Output;
use super::settings::{Limits, PeerSettings, DEFAULT_WINDOW};
use super::stream::{Closed, State, Stream, Taken};
use crate::http::{
    lent, BufferPool, Expiry, Handler, HttpDate, Reply, Status, Ticket, Timeouts, Wire,
};

/// The client's connection preface (RFC 9113, 3.4), which also tells an HTTP/2 client by
/// prior knowledge from an HTTP/1.1 one.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Streams the client may reset, or the server refuse or reset, more than it has been
/// answered, before the connection ends with ENHANCE_YOUR_CALM: the rapid reset attack
/// (CVE-2023-44487) opens and resets streams in a loop, each costing the server work.
const RESET_BUDGET: u32 = 200;

/// Input read as frames per [`Connection::process`] at most (the frame it ends in is read
/// whole): the rest waits for the next pass, after the worker's other connections had
/// theirs ([`Wire::has_input_waiting`]). Frames that write nothing (WINDOW_UPDATE,
/// PRIORITY, PING acknowledgements) are not stopped by the output's room, and io_uring
/// hands over megabytes of them at once; nginx too reads a bounded amount per pass.
pub const INPUT_PER_PASS: usize = 64 * 1024;

enum Phase {
    /// Waiting for the client's preface.
    Preface,
    /// The preface is in; the first frame must be SETTINGS.
    FirstSettings,
    Open,
    /// A GOAWAY went or came: no new stream is served (those above `last_stream` are
    /// ignored), and the connection ends once its streams are answered.
    Draining {
        last_stream: u32,
    },
    /// A connection error: GOAWAY went, nothing more is read, and the connection ends once
    /// it is sent.
    Failed,
}

pub struct Connection {
    limits: Limits,
    phase: Phase,
    /// Received bytes not yet read as frames.
    input: Vec<u8>,
    output: Output,
    decoder: Decoder,
    peer: PeerSettings,
    /// What the server may send on the connection.
    send_window: i64,
    inflow: Inflow,
    /// Open streams, by increasing identifier. A deque: streams mostly close oldest first,
    /// and a vector's removal from its front moved every stream after it (the largest
    /// share of baseline-h2's profile).
    streams: VecDeque<Stream>,
    /// The highest stream identifier the client has used: streams below it that are not
    /// in `streams` are closed.
    last_stream: u32,
    pending_block: Option<PendingBlock>,
    recently_closed: Closed,
    /// Resets charged against [`RESET_BUDGET`], less the streams answered since.
    resets: u32,
    /// The peer sent its last byte.
    peer_eof: bool,
    /// The last time a frame arrived or a byte went.
    last_active: Instant,
    /// Since when answers have waited with no DATA of theirs written (for the peer's
    /// window, or for room in the output): past the send timeout the connection ends, so
    /// that a peer that never opens its window cannot hold them forever. Only their DATA
    /// stops it, not what else goes (a PING's ACK is no progress on them).
    window_stalled_since: Option<Instant>,
    /// What the answers waiting to be written hold (their streams' buffers): past
    /// `answers_bound` no further request is taken.
    answers_held: usize,
    /// [`answers::MAX_WAITING`], or the connection's share of the worker's budget as
    /// [`Connection::process`] was last told, if less.
    answers_bound: u32,
    /// How many streams' answers have a piped body (an upstream's, arriving); beside
    /// `answers_bound`, in what was its padding.
    piped_streams: u32,
    /// Some piped body moved since the last [`Connection::process`], which writes it.
    pipes_moved: bool,
}

impl Connection {
    /// A connection whose first bytes out are the server's SETTINGS.
    pub fn new(limits: Limits, now: Instant) -> Self {
        let limits = limits.within_bounds();
        let mut output = Output::default();
        limits.write_settings(output.frames());
        Connection {
            limits,
            phase: Phase::Preface,
            input: Vec::new(),
            output,
            decoder: Decoder::new(),
            peer: PeerSettings::default(),
            send_window: DEFAULT_WINDOW,
            inflow: Inflow::new(&limits),
            streams: VecDeque::new(),
            last_stream: 0,
            pending_block: None,
            recently_closed: Closed::default(),
            resets: 0,
            peer_eof: false,
            last_active: now,
            window_stalled_since: None,
            answers_held: 0,
            answers_bound: answers::MAX_WAITING as u32,
            piped_streams: 0,
            pipes_moved: false,
        }
    }

    /// Takes bytes received before the connection was known to be HTTP/2 (the preface and
    /// what followed it), as its input.
    pub fn take_input(&mut self, input: Vec<u8>) {
        self.input = input;
    }

    /// Reads the whole frames received, up to [`INPUT_PER_PASS`] bytes, as long as the
    /// output is under its high-water mark, lowered to `share` (the rest waits for the
    /// output to drain: [`Connection::has_backlog`]); over `share` it gives no window and
    /// takes no request. `date` is for the answers the connection gives itself (413, 431).
    pub fn process(
        &mut self,
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
        share: usize,
    ) {
        self.output.take_aside();
        if matches!(self.phase, Phase::Failed) {
            return;
        }
        self.answers_bound = answers::MAX_WAITING.min(share) as u32;
        let room = self.output.room();
        self.output.share(share);
        self.follow_share(share);
        self.output.lend(buffers);
        if self.output.room() > room {
            // Room came back with the worker's budget: answers it held back may go on.
            self.flush();
        }
        if std::mem::take(&mut self.pipes_moved) {
            self.flush_pipes();
        }
        self.decoder.lend(buffers);
        let input = std::mem::take(&mut self.input);
        let mut at = 0;
        while self.output.room() > 0 && at < INPUT_PER_PASS {
            match self.read_frame(&input[at..], date, now) {
                Ok(0) => break,
                Ok(len) => at += len,
                Err(code) => {
                    self.fail(code);
                    break;
                }
            }
        }
        if at > 0 {
            self.last_active = now;
        }
        if !matches!(self.phase, Phase::Failed) {
            self.input = input;
            self.input.drain(..at);
        }
        self.output.owe_progress(now);
        self.watch_window(now);
    }

    /// Reads the frame at the front of `input` and acts on it; returns its length, or 0
    /// while it is not all in. A stream error closes its stream: only a connection error
    /// comes out.
    fn read_frame(
        &mut self,
        input: &[u8],
        date: &HttpDate,
        now: Instant,
    ) -> Result<usize, ErrorCode> {
        if matches!(self.phase, Phase::Preface) {
            let len = input.len().min(PREFACE.len());
            if input[..len] != PREFACE[..len] {
                return Err(ErrorCode::Protocol);
            }
            if len < PREFACE.len() {
                return Ok(0);
            }
            self.phase = Phase::FirstSettings;
            return Ok(len);
        }
        let Some(head) = Head::read(input) else {
            return Ok(0);
        };
        if head.len > self.limits.max_frame_size as usize {
            return Err(ErrorCode::FrameSize);
        }
        let Some(payload) = input.get(HEAD_LEN..HEAD_LEN + head.len) else {
            return Ok(0);
        };
        match self.on_frame(&head, payload, date, now) {
            Ok(()) => {}
            Err(H2Error::Stream(id, code)) => self.reset(id, code)?,
            Err(H2Error::Connection(code)) => return Err(code),
        }
        Ok(HEAD_LEN + head.len)
    }

    fn on_frame(
        &mut self,
        head: &Head,
        payload: &[u8],
        date: &HttpDate,
        now: Instant,
    ) -> Result<(), H2Error> {
        let protocol_error = Err(H2Error::Connection(ErrorCode::Protocol));
        // A header block's frames come one after the other, on its stream (RFC 9113, 4.3).
        if let Some(pending) = &self.pending_block {
            if head.kind != frame::CONTINUATION || head.stream != pending.stream {
                return protocol_error;
            }
        }
        if matches!(self.phase, Phase::FirstSettings) {
            let settings = frame::parse(head, payload)?;
            if !matches!(settings, Frame::Settings { ack: false, .. }) {
                return protocol_error;
            }
            self.phase = Phase::Open;
        }
        match frame::parse(head, payload)? {
            Frame::Data {
                stream,
                data,
                end_stream,
                flow_len,
            } => self.on_data(stream, data, end_stream, flow_len, date),
            Frame::Headers {
                stream,
                block,
                end_stream,
                end_headers,
                priority,
            } => {
                let self_dependent = priority.is_some_and(|p| p.depends_on == stream);
                if end_headers {
                    let opened = now;
                    return self.on_header_block(
                        stream,
                        block,
                        end_stream,
                        self_dependent,
                        date,
                        opened,
                    );
                }
                let mut pending = PendingBlock {
                    stream,
                    end_stream,
                    self_dependent,
                    bytes: Vec::new(),
                    since: now,
                };
                pending.extend(block, self.limits.max_header_list)?;
                self.pending_block = Some(pending);
                Ok(())
            }
            Frame::Continuation {
                block, end_headers, ..
            } => {
                let Some(pending) = &mut self.pending_block else {
                    return protocol_error;
                };
                pending.extend(block, self.limits.max_header_list)?;
                if !end_headers {
                    return Ok(());
                }
                let Some(pending) = self.pending_block.take() else {
                    return protocol_error;
                };
                self.on_header_block(
                    pending.stream,
                    &pending.bytes,
                    pending.end_stream,
                    pending.self_dependent,
                    date,
                    pending.since,
                )
            }
            Frame::Priority { stream, priority } => {
                if priority.depends_on == stream {
                    return Err(H2Error::Stream(stream, ErrorCode::Protocol));
                }
                Ok(())
            }
            Frame::RstStream { stream } => {
                if stream > self.last_stream {
                    return protocol_error;
                }
                if let Some(index) = self.index(stream) {
                    self.remove(index, false);
                    self.charge_reset().map_err(H2Error::Connection)?;
                }
                Ok(())
            }
            Frame::Settings { ack: true, .. } => {
                self.inflow.settings_acknowledged(self.streams.iter_mut());
                Ok(())
            }
            Frame::Settings {
                ack: false,
                entries,
            } => {
                self.apply_settings(entries)?;
                frame::write_settings_ack(self.output.frames());
                self.output.count_control().map_err(H2Error::Connection)
            }
            Frame::Ping {
                ack: false,
                payload,
            } => {
                frame::write_ping_ack(self.output.frames(), &payload);
                self.output.count_control().map_err(H2Error::Connection)
            }
            Frame::Ping { ack: true, .. } | Frame::Unknown => Ok(()),
            Frame::GoAway => {
                if !matches!(self.phase, Phase::Draining { .. }) {
                    self.phase = Phase::Draining {
                        last_stream: self.last_stream,
                    };
                }
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
        }
    }

    fn apply_settings(&mut self, entries: &[u8]) -> Result<(), H2Error> {
        let change = self.peer.apply(entries).map_err(H2Error::Connection)?;
        for stream in &mut self.streams {
            stream.send_window += change;
            if stream.send_window > MAX_WINDOW {
                return Err(H2Error::Connection(ErrorCode::FlowControl));
            }
        }
        self.flush();
        Ok(())
    }

    fn on_window_update(&mut self, stream: u32, increment: u32) -> Result<(), H2Error> {
        if stream == 0 {
            if increment == 0 {
                return Err(H2Error::Connection(ErrorCode::Protocol));
            }
            let was_open = self.send_window > 0;
            self.send_window += increment as i64;
            if self.send_window > MAX_WINDOW {
                return Err(H2Error::Connection(ErrorCode::FlowControl));
            }
            // While the window was open, every answer still waiting was held by its own
            // stream's window or by the output's room (a flush that ends with window left
            // has tried every stream, and whatever opens a stream's window or the room
            // flushes): more of it frees nothing, and a flood of small updates costs no
            // walk over the waiting streams.
            if !was_open {
                self.flush();
            }
            return Ok(());
        } else {
            if stream > self.last_stream {
                return Err(H2Error::Connection(ErrorCode::Protocol));
            }
            // A closed stream's update may still be in flight: ignored.
            let Some(index) = self.index(stream) else {
                return Ok(());
            };
            if increment == 0 {
                return Err(H2Error::Stream(stream, ErrorCode::Protocol));
            }
            let window = &mut self.streams[index].send_window;
            *window += increment as i64;
            if *window > MAX_WINDOW {
                return Err(H2Error::Stream(stream, ErrorCode::FlowControl));
            }
            // Only this stream's answer can go further (the others' windows are as they
            // were), as the connection's window and the output's room allow.
            self.flush_stream(index);
        }
        Ok(())
    }

    /// A header block is in: a request's head (its first frame came at `opened`), or a
    /// stream's trailers.
    fn on_header_block(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
        self_dependent: bool,
        date: &HttpDate,
        opened: Instant,
    ) -> Result<(), H2Error> {
        let max_list = self.limits.max_header_list as usize;
        if let Some(index) = self.index(stream) {
            // Trailers: they end the stream, and carry nothing the server keeps.
            let checked = self.decoder.trailers(block, max_list);
            if checked == Err(BlockError::Compression) {
                return Err(H2Error::Connection(ErrorCode::Compression));
            }
            match self.streams[index].state {
                State::Receiving { .. } => {}
                State::Sending {
                    reset_after: true, ..
                } => return Ok(()),
                _ => return Err(H2Error::Stream(stream, ErrorCode::StreamClosed)),
            }
            if !end_stream {
                return Err(H2Error::Stream(stream, ErrorCode::Protocol));
            }
            return match checked {
                Err(error) => Err(H2Error::Stream(stream, error.code())),
                Ok(()) => self.request_complete(index),
            };
        }
        if stream.is_multiple_of(2) {
            return Err(H2Error::Connection(ErrorCode::Protocol));
        }
        if stream <= self.last_stream {
            // Decoded all the same, to keep the dynamic table in step.
            if self.decoder.trailers(block, max_list) == Err(BlockError::Compression) {
                return Err(H2Error::Connection(ErrorCode::Compression));
            }
            // A stream closed lately: STREAM_CLOSED, unless the server reset it; one never
            // used is a stream identifier out of order.
            return if self.recently_closed.by_reset(stream) {
                Ok(())
            } else if self.recently_closed.otherwise(stream) {
                Err(H2Error::Connection(ErrorCode::StreamClosed))
            } else {
                Err(H2Error::Connection(ErrorCode::Protocol))
            };
        }
        self.last_stream = stream;
        let decoded = self
            .decoder
            .request(block, max_list, self.limits.keep_fields);
        if matches!(self.phase, Phase::Draining { last_stream } if stream > last_stream) {
            return match decoded {
                Err(BlockError::Compression) => Err(H2Error::Connection(ErrorCode::Compression)),
                _ => Ok(()),
            };
        }
        let too_large = decoded.is_err();
        let head = match decoded {
            Err(BlockError::TooLarge) => hpack::RequestHead::default(),
            Err(error @ BlockError::Compression) => return Err(H2Error::Connection(error.code())),
            Err(error) => return Err(H2Error::Stream(stream, error.code())),
            Ok(head) => head,
        };
        if self_dependent {
            return Err(H2Error::Stream(stream, ErrorCode::Protocol));
        }
        if self.streams.len() >= self.limits.max_concurrent_streams as usize {
            return Err(H2Error::Stream(stream, ErrorCode::RefusedStream));
        }
        self.streams.push_back(Stream {
            id: stream,
            send_window: self.peer.initial_window,
            recv_window: self.inflow.new_stream_window(),
            opened,
            state: State::Receiving {
                head,
                body: Vec::new(),
            },
        });
        let index = self.streams.len() - 1;
        if too_large {
            self.answer_error(index, Status::HeaderTooLarge, !end_stream, date);
            return Ok(());
        }
        if end_stream {
            return self.request_complete(index);
        }
        Ok(())
    }

    /// The request of the stream at `index` is all in.
    fn request_complete(&mut self, index: usize) -> Result<(), H2Error> {
        let entry = &mut self.streams[index];
        entry
            .complete()
            .map_err(|code| H2Error::Stream(entry.id, code))
    }

    /// Hands every complete request not yet handed out to `handler`, in the order of their
    /// streams, and answers those it answers at once; the others wait for
    /// [`Connection::answer`] by their ticket (whose sequence number is the stream).
    pub fn serve(
        &mut self,
        handler: &mut impl Handler,
        connection: (u32, u32),
        date: &HttpDate,
        now: Instant,
        buffers: &mut BufferPool,
    ) {
        let (slot, generation) = connection;
        while let Some(taken) = self.take_request() {
            let ticket = Ticket {
                slot,
                generation,
                seq: taken.stream,
            };
            if let Reply::Now(answer) = &handler.handle(&taken.request(), ticket) {
                self.answer(taken.stream, answer, date, now, buffers);
            }
        }
    }

    /// The next request not yet handed out, in the order of their streams; none while the
    /// output is over its high-water mark (the client does not read its answers) or the
    /// answers waiting for window or room hold their bound, so that answers are not made
    /// faster than they go. Its body is out of the connection's count once handed out: its
    /// window is granted again.
    pub fn take_request(&mut self) -> Option<Taken> {
        if self.output.room() == 0 || self.answers_full() {
            return None;
        }
        let taken = self.streams.iter_mut().find_map(Stream::take_request)?;
        self.inflow.release(taken.body.len());
        if !taken.body.is_empty() {
            self.grant_windows();
        }
        Some(taken)
    }

    /// Closes the stream at `index` (`by_reset`: with the server's RST_STREAM).
    fn remove(&mut self, index: usize, by_reset: bool) -> Option<Stream> {
        let entry = self.streams.remove(index)?;
        self.inflow.release(entry.body_len());
        if matches!(entry.state, State::Sending { .. }) {
            self.answers_held -= entry.held();
            if let State::Sending { pipe: Some(_), .. } = entry.state {
                self.piped_streams -= 1;
            }
        }
        if entry.body_len() > 0 {
            self.grant_windows();
        }
        self.recently_closed.remember(entry.id, by_reset);
        Some(entry)
    }

    /// Runs `write` for an event, outside the server's passes (an answer given later, the
    /// sweep's deadlines): the kernel may be sending from the output then (io_uring), so what
    /// it writes waits aside while the output has bytes unsent, for the next pass or the
    /// send's end to append.
    pub fn for_event<T>(&mut self, write: impl FnOnce(&mut Self) -> T) -> T {
        self.output.for_event(true);
        let written = write(self);
        self.output.for_event(false);
        written
    }

    fn index(&self, stream: u32) -> Option<usize> {
        self.streams
            .binary_search_by_key(&stream, |entry| entry.id)
            .ok()
    }

    /// A stream error: the stream closes with RST_STREAM, and the reset is charged.
    fn reset(&mut self, stream: u32, code: ErrorCode) -> Result<(), ErrorCode> {
        if let Some(index) = self.index(stream) {
            self.remove(index, true);
        }
        self.write_reset(stream, code);
        self.charge_reset()
    }

    fn write_reset(&mut self, stream: u32, code: ErrorCode) {
        frame::write_rst_stream(self.output.frames(), stream, code);
        self.recently_closed.remember(stream, true);
    }

    fn charge_reset(&mut self) -> Result<(), ErrorCode> {
        self.resets += 1;
        if self.resets > RESET_BUDGET {
            return Err(ErrorCode::EnhanceYourCalm);
        }
        Ok(())
    }

    /// A connection error, or a close the server decides (a deadline passed): GOAWAY with
    /// `code` and the last stream the server took, and nothing more is read or answered.
    fn fail(&mut self, code: ErrorCode) {
        frame::write_goaway(self.output.frames(), self.last_stream, code);
        self.phase = Phase::Failed;
        self.streams = VecDeque::new();
        self.answers_held = 0;
        self.piped_streams = 0;
        self.pending_block = None;
    }

    /// Ends the connection gracefully (the server shuts down): GOAWAY with NO_ERROR, the
    /// streams already open answered, no new one served.
    pub fn shutdown(&mut self) {
        if matches!(self.phase, Phase::Draining { .. } | Phase::Failed) {
            return;
        }
        frame::write_goaway(self.output.frames(), self.last_stream, ErrorCode::NoError);
        self.phase = Phase::Draining {
            last_stream: self.last_stream,
        };
    }
}

impl Wire for Connection {
    /// Whether processing again would read a frame that waits whole in the input: the last
    /// [`Connection::process`] stopped at [`INPUT_PER_PASS`], not at a frame still arriving,
    /// an output over its high-water mark or a connection error. The server processes it
    /// again without waiting for more bytes, once the worker's other connections had a pass.
    fn has_input_waiting(&self) -> bool {
        let whole = match self.phase {
            Phase::Failed => return false,
            Phase::Preface => self.input.len() >= PREFACE.len(),
            _ => Head::read(&self.input).is_some_and(|head| {
                let too_long = head.len > self.limits.max_frame_size as usize;
                too_long || self.input.len() >= HEAD_LEN + head.len
            }),
        };
        whole && self.output.room() > 0
    }

    /// See [`Connection::deadline_passed`].
    fn timed_out(&self, now: Instant, limits: &Timeouts) -> bool {
        self.deadline_passed(now, limits)
    }

    /// See [`Connection::act_on_deadlines`]; the sweep's, outside the server's passes.
    fn expire(&mut self, now: Instant, limits: &Timeouts) -> Expiry {
        self.for_event(|connection| connection.act_on_deadlines(now, limits))
    }

    /// See [`Connection::shutdown`].
    fn drain(&mut self, buffers: &mut BufferPool) {
        self.output.take_aside();
        self.output.lend(buffers);
        self.shutdown();
    }

    /// The buffer received plaintext is appended to, lent from `buffers` if it has none;
    /// [`Connection::process`] reads it.
    fn input(&mut self, buffers: &mut BufferPool) -> &mut Vec<u8> {
        lent(&mut self.input, buffers)
    }

    fn buffered_input(&self) -> usize {
        self.input.len()
    }

    /// The peer sent its last byte: the whole frames already in are still read, and the
    /// streams whose requests are in still answered.
    fn peer_closed(&mut self) {
        self.peer_eof = true;
    }

    fn peer_eof(&self) -> bool {
        self.peer_eof
    }

    /// The bytes to send.
    fn unsent(&self) -> &[u8] {
        self.output.unsent()
    }

    /// `len` bytes of [`Connection::unsent`] went; answers waiting for room follow them.
    fn mark_sent(&mut self, len: usize, now: Instant) {
        self.output.sent(len, now);
        // The send ended: what an event wrote aside meanwhile may join the output.
        self.output.take_aside();
        if len > 0 {
            self.last_active = now;
        }
        if !matches!(self.phase, Phase::Failed) {
            self.flush();
            self.output.owe_progress(now);
            self.watch_window(now);
        }
    }

    /// Whether the connection takes more bytes now: not once it failed, nor while it holds
    /// a whole frame it cannot read (its output is over the high-water mark, the client
    /// not reading).
    fn wants_input(&self) -> bool {
        !matches!(self.phase, Phase::Failed)
            && !self.peer_eof
            && self.input.len() < HEAD_LEN + self.limits.max_frame_size as usize
    }

    /// Whether processing again once the output has drained may do more: frames wait in
    /// the input, requests to be taken, or answers whose DATA stopped at the high-water mark.
    fn has_backlog(&self) -> bool {
        let waiting = |stream: &Stream| match stream.state {
            State::Request { .. } => true,
            // An answer whose DATA stopped at the output's high-water mark, not at a window.
            State::Sending { .. } => self.send_window > 0 && stream.data_left() > 0,
            _ => false,
        };
        !matches!(self.phase, Phase::Failed)
            && (!self.input.is_empty() || self.streams.iter().any(waiting))
    }

    /// Whether the connection is over and everything is sent: after a connection error;
    /// after a GOAWAY, once its streams are answered; after the peer's last byte, once the
    /// requests it finished are answered.
    fn is_finished(&self) -> bool {
        let answered = || {
            let owed = |stream: &Stream| !matches!(stream.state, State::Receiving { .. });
            !self.streams.iter().any(owed)
        };
        self.output.is_empty()
            && match self.phase {
                Phase::Failed => true,
                Phase::Draining { .. } => self.streams.is_empty(),
                _ => self.peer_eof && answered(),
            }
    }

    /// What the connection holds in memory, for the worker's budget: its buffers, its
    /// streams' and the HPACK decoder's.
    fn held(&self) -> usize {
        self.input.capacity()
            + self.output.capacity()
            + self
                .pending_block
                .as_ref()
                .map_or(0, |block| block.bytes.capacity())
            + self.streams.capacity() * std::mem::size_of::<Stream>()
            + self.streams.iter().map(Stream::held).sum::<usize>()
            + self.piped().0
            + self.decoder.held()
    }

    /// Gives back the buffers that are empty: the input once every frame in it is read, the
    /// output once all of it is sent, the decoder's scratch (empty between blocks), and the
    /// streams' list once no stream is open, so that an idle connection holds none.
    fn give_back_idle(&mut self, buffers: &mut BufferPool) {
        if self.input.is_empty() && self.input.capacity() > 0 {
            buffers.give_back(std::mem::take(&mut self.input));
        }
        self.output.give_back_idle(buffers);
        self.decoder.give_back(buffers);
        if self.streams.is_empty() {
            self.streams = VecDeque::new();
        }
    }

    /// Gives every buffer back: the connection is closed.
    fn give_back_all(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.input));
        self.output.give_back_all(buffers);
        self.decoder.give_back(buffers);
    }
}
