//! One QUIC connection of the endpoint's, and the HTTP/3 connection over its streams:
//! the stream events quinn-proto reports become bytes for `h3::Connection`, and what
//! HTTP/3 writes goes to the streams as far as their flow control lets it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{Connection, Dir, Event, ReadError, StreamEvent, StreamId, VarInt};

use crate::h3;
use crate::http::{Answer, Handler, HttpDate};

pub struct Peer {
    pub conn: Connection,
    pub h3: h3::Connection,
    /// Tells this connection from an earlier one under the same handle (its tickets).
    pub generation: u32,
    /// The deadline last scheduled in the endpoint's timers.
    pub deadline: Option<Instant>,
    /// Its handshake is done (quinn-proto's `Connected`).
    pub established: bool,
    /// The server drains: the client was told (GOAWAY), and the connection closes once
    /// what it took is answered.
    pub draining: bool,
    /// What HTTP/3 held when last counted for the worker's budget (`Endpoint::held`).
    pub held: usize,
    /// What quinn-proto may hold of its answers until the peer acknowledges them.
    send_window: u64,
    /// Streams with bytes left unread because the connection held its share of the budget:
    /// read once it holds less. Meanwhile QUIC's flow control stops the client.
    unread: Vec<StreamId>,
}

impl Peer {
    pub fn new(conn: Connection, generation: u32, limits: h3::Limits) -> Self {
        Peer {
            conn,
            h3: h3::Connection::new(limits),
            generation,
            deadline: None,
            established: false,
            draining: false,
            held: 0,
            send_window: super::SEND_WINDOW,
            unread: Vec::new(),
        }
    }

    /// Takes the connection's events (its handshake's end, its streams' bytes, as long as
    /// it holds less than `share`), hands the requests complete to `handler` with tickets
    /// naming `slot`, and writes what HTTP/3 has to write.
    pub fn serve(
        &mut self,
        handler: &mut impl Handler,
        slot: u32,
        date: &HttpDate,
        now: Instant,
        share: usize,
    ) {
        let mut room = share.saturating_sub(self.held);
        self.read_unread(&mut room, now);
        while let Some(event) = self.conn.poll() {
            match event {
                Event::Connected => {
                    self.established = true;
                    if let Some(id) = self.conn.streams().open(Dir::Uni) {
                        self.h3.open_control(id.into());
                    }
                }
                Event::Stream(StreamEvent::Opened { dir }) => {
                    while let Some(id) = self.conn.streams().accept(dir) {
                        self.read(id, &mut room, now);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => self.read(id, &mut room, now),
                Event::Stream(StreamEvent::Stopped { id, .. }) => {
                    self.h3.stream_gone(id.into());
                    // A request stream is read no more, from now: HTTP/3 forgot it, and
                    // would take its next bytes for a new request's. (Our unidirectional
                    // streams have no receiving side: quinn-proto panics if asked for one.)
                    if id.dir() == Dir::Bi {
                        let _ = self.conn.recv_stream(id).stop(REQUEST_CANCELLED);
                    }
                }
                Event::Stream(_)
                | Event::ConnectionLost { .. }
                | Event::HandshakeDataReady
                | Event::DatagramReceived
                | Event::DatagramsUnblocked => {}
            }
        }
        // An IPv4 client of a dual-stack socket as itself, not as ::ffff:a.b.c.d.
        handler.set_client(self.conn.remote_address().ip().to_canonical());
        self.h3.serve(handler, (slot, self.generation), date);
        self.flush(now);
    }

    /// The server drains: no new request is taken (GOAWAY), and the connection closes with
    /// H3_NO_ERROR once every request it took is answered.
    pub fn drain(&mut self, now: Instant) {
        self.draining = true;
        self.h3.go_away();
        self.flush(now);
    }

    /// The answer to the request of `seq`, given later.
    pub fn answer(&mut self, seq: u32, answer: Answer<'_>, date: &HttpDate, now: Instant) {
        self.h3.answer(seq, answer, date);
        self.flush(now);
    }

    /// More of a piped body is in: the streams take what they have room for.
    pub fn moved(&mut self, now: Instant) {
        self.flush(now);
    }

    /// Lets quinn-proto hold `window` bytes of its answers until the peer acknowledges them.
    pub fn set_send_window(&mut self, window: u64) {
        if window != self.send_window {
            self.conn.set_send_window(window);
            self.send_window = window;
        }
    }

    /// Whether it left bytes unread for the budget.
    pub fn has_unread(&self) -> bool {
        !self.unread.is_empty()
    }

    /// Reads the streams left unread, as far as `room` goes.
    fn read_unread(&mut self, room: &mut usize, now: Instant) {
        for id in std::mem::take(&mut self.unread) {
            self.read(id, room, now);
        }
    }

    /// Resets the streams whose request is not all in within `timeout` (see
    /// `h3::Connection::reset_late_requests`).
    pub fn reset_late_requests(&mut self, now: Instant, timeout: Duration) {
        self.h3.reset_late_requests(now, timeout);
        self.flush(now);
    }

    /// Reads what stream `id` has, to its end, until it has no more for now, or until
    /// `room` bytes are read (then it is read again later).
    fn read(&mut self, id: StreamId, room: &mut usize, now: Instant) {
        let Peer {
            conn, h3, unread, ..
        } = self;
        let mut stream = conn.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return;
        };
        loop {
            if *room == 0 {
                if !unread.contains(&id) {
                    unread.push(id);
                }
                break;
            }
            match chunks.next(*room) {
                Ok(Some(chunk)) => {
                    *room -= chunk.bytes.len();
                    h3.receive(id.into(), &chunk.bytes, false, now);
                }
                Ok(None) => break h3.receive(id.into(), &[], true, now),
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => break h3.stream_gone(id.into()),
            }
        }
        // Whether to send flow-control credit is poll_transmit's to find.
        let _ = chunks.finalize();
    }

    /// Writes HTTP/3's bytes to their streams, resets the streams it failed, and closes
    /// the connection on its error.
    fn flush(&mut self, now: Instant) {
        let Peer {
            conn, h3, draining, ..
        } = self;
        h3.flush(|id, bytes, fin| {
            let Some(id) = stream_id(id) else {
                return bytes.len();
            };
            let mut stream = conn.send_stream(id);
            let taken = match bytes.is_empty() {
                true => 0,
                false => stream.write(bytes).unwrap_or(0),
            };
            if fin && taken == bytes.len() {
                let _ = stream.finish();
            }
            taken
        });
        for (id, code) in h3.resets() {
            let (Some(id), Ok(code)) = (stream_id(id), VarInt::from_u64(code.value())) else {
                continue;
            };
            let _ = conn.send_stream(id).reset(code);
            let _ = conn.recv_stream(id).stop(code);
        }
        for id in h3.stops().filter_map(stream_id) {
            let _ = conn.recv_stream(id).stop(NO_ERROR);
        }
        // Closing drops what is not yet acknowledged: a draining connection closes once its
        // answers are (every send stream done but our control stream, which never ends).
        let answered = *draining && h3.is_idle() && conn.streams().send_streams() <= 1;
        let error = match (h3.error(), answered) {
            (Some(code), _) => Some(code),
            (None, true) => Some(h3::ErrorCode::NoError),
            (None, false) => None,
        };
        if let Some(code) = error.filter(|_| !conn.is_closed()) {
            if let Ok(code) = VarInt::from_u64(code.value()) {
                conn.close(now, code, Bytes::new());
            }
        }
    }
}

const NO_ERROR: VarInt = VarInt::from_u32(h3::ErrorCode::NoError as u32);
const REQUEST_CANCELLED: VarInt = VarInt::from_u32(h3::ErrorCode::RequestCancelled as u32);

fn stream_id(id: u64) -> Option<StreamId> {
    VarInt::from_u64(id).ok().map(StreamId::from)
}
