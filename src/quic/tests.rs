//! The endpoint without a socket: a quinn-proto client's datagrams carried to it and back
//! in memory, on one clock the tests move.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, ConnectionHandle, DatagramEvent, EndpointConfig};

use super::*;
use crate::h3;
use crate::http::{Answer, ContentType, Handler, HttpDate, Reply, Request, Ticket};
use crate::transport::{load, test_pair};

/// Answers `/hello` at once, `/later` when the test says, and 404 otherwise.
#[derive(Default)]
struct TestApp {
    later: Vec<Ticket>,
}

impl Handler for TestApp {
    fn handle<'a>(&'a mut self, request: &'a Request<'a>, ticket: Ticket) -> Reply<'a> {
        match request.path {
            "/hello" => Reply::Now(Answer::ok(ContentType::Plain, b"hello")),
            "/later" => {
                self.later.push(ticket);
                Reply::Later
            }
            _ => Reply::Now(Answer::error(crate::http::Status::NotFound)),
        }
    }
}

/// The server's request timeout here.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const SERVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8443);

fn client_addr(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
}

fn client_config(alpn: &[u8]) -> ClientConfig {
    let tls = crate::transport::client_config(&[&rustls::version::TLS13], &[alpn]);
    ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

fn server_tls() -> Arc<ServerConfig> {
    let pair = test_pair();
    let tls = load(&pair.cert, &pair.key).unwrap();
    with_idle_timeout(&tls.quic(), Duration::from_secs(30))
}

/// A client endpoint and the server's workers' endpoints, with the datagrams between them
/// carried by hand, each to the worker its connection ID names as the kernel's routing
/// does (`sys::route_by_connection_id`).
struct Pair {
    client: quinn_proto::Endpoint,
    servers: Vec<Endpoint>,
    app: TestApp,
    date: HttpDate,
    now: Instant,
    /// What each connection may hold of the worker's budget.
    share: usize,
    conns: Vec<(ConnectionHandle, quinn_proto::Connection, SocketAddr)>,
}

impl Pair {
    fn new(max_connections: usize) -> Self {
        Self::with_workers(1, max_connections)
    }

    fn with_workers(workers: u8, max_connections: usize) -> Self {
        let config = Arc::new(EndpointConfig::default());
        let (tls, spread) = (server_tls(), Spread::new(workers.into()));
        let bounds = Bounds {
            connections: max_connections,
            buffered: 64 << 20,
            request_timeout: REQUEST_TIMEOUT,
            h3: h3::Limits::default(),
        };
        let new = |worker| Endpoint::new(worker, tls.clone(), bounds, spread.clone());
        Pair {
            client: quinn_proto::Endpoint::new(config, None, false, None),
            servers: (0..workers).map(new).collect(),
            app: TestApp::default(),
            date: HttpDate::new(),
            now: Instant::now(),
            share: usize::MAX,
            conns: Vec::new(),
        }
    }

    /// Starts a connection from `port` offering `alpn`; returns its index.
    fn connect(&mut self, port: u16, alpn: &[u8]) -> usize {
        let (handle, conn) = self
            .client
            .connect(self.now, client_config(alpn), SERVER, "localhost")
            .unwrap();
        self.conns.push((handle, conn, client_addr(port)));
        self.conns.len() - 1
    }

    /// Carries datagrams both ways until neither side has any.
    fn exchange(&mut self) {
        for _ in 0..100 {
            let mut moved = false;
            for index in 0..self.conns.len() {
                let mut buf = Vec::new();
                let (_, conn, from) = &mut self.conns[index];
                let from = *from;
                let mut datagrams = Vec::new();
                while let Some(transmit) = conn.poll_transmit(self.now, 10, &mut buf) {
                    let segment = transmit.segment_size.unwrap_or(transmit.size);
                    datagrams.extend(buf[..transmit.size].chunks(segment).map(<[u8]>::to_vec));
                    buf.clear();
                    moved = true;
                }
                for datagram in datagrams {
                    self.send_to(self.worker_for(&datagram), from, &datagram);
                }
            }
            for worker in 0..self.servers.len() {
                while let Some(batch) = self.servers[worker].outbox().front() {
                    let (to, bytes, segment) = (batch.to, batch.bytes.clone(), batch.segment);
                    self.servers[worker].outbox().pop();
                    moved = true;
                    for datagram in bytes.chunks(segment.unwrap_or(bytes.len())) {
                        self.deliver(to, datagram);
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("the datagrams never stopped");
    }

    /// A datagram from the server to the client at `to`.
    fn deliver(&mut self, to: SocketAddr, datagram: &[u8]) {
        let mut buf = Vec::new();
        let data = BytesMut::from(datagram);
        let event = self
            .client
            .handle(self.now, SERVER, None, None, data, &mut buf);
        if let Some(DatagramEvent::ConnectionEvent(handle, event)) = event {
            let conn = self
                .conns
                .iter_mut()
                .find(|(h, _, from)| *h == handle && *from == to);
            let (_, conn, _) = conn.expect("a datagram for a client connection");
            conn.handle_event(event);
            while let Some(event) = conn.poll_endpoint_events() {
                if let Some(event) = self.client.handle_event(handle, event) {
                    conn.handle_event(event);
                }
            }
        }
    }

    fn client(&mut self, index: usize) -> &mut quinn_proto::Connection {
        &mut self.conns[index].1
    }

    /// The first (or only) worker's endpoint.
    fn server(&mut self) -> &mut Endpoint {
        &mut self.servers[0]
    }

    /// The worker the kernel hands `datagram` to: its destination connection ID's first
    /// byte (a short header's at byte 1, a long header's at byte 6), modulo the workers.
    fn worker_for(&self, datagram: &[u8]) -> usize {
        let at = if datagram[0] & 0x80 != 0 { 6 } else { 1 };
        usize::from(datagram[at]) % self.servers.len()
    }

    /// Hands the first worker a datagram from `from`.
    fn send(&mut self, from: SocketAddr, datagram: &[u8]) {
        self.send_to(0, from, datagram);
    }

    /// Hands worker `worker` a datagram from `from`.
    fn send_to(&mut self, worker: usize, from: SocketAddr, datagram: &[u8]) {
        let mut serve = Serve {
            handler: &mut self.app,
            date: &self.date,
            now: self.now,
            share: self.share,
        };
        self.servers[worker].handle(from, None, None, datagram, &mut serve);
    }

    /// Moves the clock to `at`, runs both sides' deadlines, and exchanges.
    fn advance_to(&mut self, at: Instant) {
        self.now = at;
        let mut serve = Serve {
            handler: &mut self.app,
            date: &self.date,
            now: at,
            share: self.share,
        };
        for server in &mut self.servers {
            server.on_timers(&mut serve);
        }
        for (_, conn, _) in &mut self.conns {
            if conn.poll_timeout().is_some_and(|t| t <= at) {
                conn.handle_timeout(at);
            }
        }
        self.exchange();
    }
}

#[test]
fn a_client_offering_h3_completes_its_handshake() {
    let mut pair = Pair::new(10);
    let client = pair.connect(40_000, b"h3");
    pair.exchange();
    assert!(!pair.client(client).is_handshaking());
    assert!(!pair.client(client).is_closed());
    assert_eq!(pair.server().open(), 1);
    assert!(pair.server().next_deadline().is_some());
}

#[test]
fn a_client_that_does_not_offer_h3_is_refused() {
    let mut pair = Pair::new(10);
    let client = pair.connect(40_000, b"h2");
    pair.exchange();
    assert!(pair.client(client).is_closed());
}

#[test]
fn an_idle_connection_is_closed_and_forgotten() {
    let mut pair = Pair::new(10);
    let client = pair.connect(40_000, b"h3");
    pair.exchange();
    assert_eq!(pair.server().open(), 1);
    // Past the idle timeout (the shorter of both sides', 30 s here), and past the drain
    // that follows a close (three probe timeouts).
    for _ in 0..4 {
        let at = pair.now + Duration::from_secs(31);
        pair.advance_to(at);
    }
    assert!(pair.client(client).is_closed());
    assert_eq!(pair.server().open(), 0);
}

#[test]
fn garbage_is_dropped_without_an_answer() {
    let mut pair = Pair::new(10);
    for len in [0, 1, 20, 1200, 1500] {
        let garbage: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        pair.send(client_addr(9), &garbage);
    }
    // A short header (0x40) for a connection ID this worker never gave out.
    pair.send(client_addr(9), &[0x40; 30]);
    assert!(pair.server().outbox().is_empty());
    assert_eq!(pair.server().open(), 0);
}

#[test]
fn an_unknown_version_is_answered_with_version_negotiation() {
    let mut pair = Pair::new(10);
    // A long header of version 0x1a2a3a4a, 8-byte IDs, padded to 1,200 bytes.
    let mut initial = vec![0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8];
    initial.extend_from_slice(&[1; 8]);
    initial.push(8);
    initial.extend_from_slice(&[2; 8]);
    initial.resize(1200, 0);
    pair.send(client_addr(9), &initial);
    let batch = pair
        .server()
        .outbox()
        .front()
        .expect("a version negotiation");
    // Version 0 is version negotiation, to the sender, naming its IDs swapped.
    assert_eq!(&batch.bytes[1..5], &[0, 0, 0, 0]);
    assert_eq!(batch.to, client_addr(9));
    assert_eq!(&batch.bytes[6..14], &[2; 8]);
}

#[test]
fn past_many_handshakes_a_client_must_first_prove_its_address() {
    let mut pair = Pair::new(10_000);
    // Clients whose Initials arrive but which never answer: handshakes under way.
    for port in 0..endpoint::RETRY_ABOVE as u16 {
        let (_, mut conn) = pair
            .client
            .connect(pair.now, client_config(b"h3"), SERVER, "localhost")
            .unwrap();
        let mut buf = Vec::new();
        let transmit = conn.poll_transmit(pair.now, 1, &mut buf).unwrap();
        let from = client_addr(20_000 + port);
        pair.send(from, &buf[..transmit.size]);
    }
    assert_eq!(pair.server().open(), endpoint::RETRY_ABOVE);
    while pair.server().outbox().front().is_some() {
        pair.server().outbox().pop();
    }
    // The next client is told to Retry first, and holds no state until it does; then its
    // handshake completes.
    let client = pair.connect(40_000, b"h3");
    let mut buf = Vec::new();
    let now = pair.now;
    let transmit = pair.client(client).poll_transmit(now, 1, &mut buf).unwrap();
    let from = client_addr(40_000);
    pair.send(from, &buf[..transmit.size]);
    assert_eq!(pair.server().open(), endpoint::RETRY_ABOVE);
    let retry = pair.server().outbox().front().unwrap();
    assert_eq!(retry.bytes[0] & 0xf0, 0xf0, "a Retry packet");
    pair.exchange();
    assert!(!pair.client(client).is_handshaking());
    assert_eq!(pair.server().open(), endpoint::RETRY_ABOVE + 1);
}

#[test]
fn new_clients_are_shared_evenly_by_the_workers_wherever_they_land() {
    let mut pair = Pair::with_workers(2, 100);
    // Every client's first Initial lands on worker 0, the worst luck its random ID can
    // have; those that worker 0 sends to worker 1 with a Retry come back there.
    for port in 0..8 {
        let client = pair.connect(40_000 + port, b"h3");
        let mut buf = Vec::new();
        let now = pair.now;
        let transmit = pair.client(client).poll_transmit(now, 1, &mut buf).unwrap();
        pair.send_to(0, client_addr(40_000 + port), &buf[..transmit.size]);
        pair.exchange();
        assert!(!pair.client(client).is_handshaking());
        assert!(!pair.client(client).is_closed());
    }
    assert_eq!([pair.servers[0].open(), pair.servers[1].open()], [4, 4]);
}

#[test]
fn a_full_endpoint_refuses_new_connections() {
    let mut pair = Pair::new(1);
    let first = pair.connect(40_000, b"h3");
    pair.exchange();
    let second = pair.connect(40_001, b"h3");
    pair.exchange();
    assert!(!pair.client(first).is_closed());
    assert!(pair.client(second).is_closed());
    assert_eq!(pair.server().open(), 1);
}

/// A request's HEADERS frame for GET `path`, its QPACK section with static references only.
fn get(path: &str) -> Vec<u8> {
    // Required Insert Count 0, Base 0; :method GET (17), :scheme https (23), :authority
    // (0) and :path (1) as literals with their static names.
    let mut section = vec![0x00, 0x00, 0xc0 | 17, 0xc0 | 23, 0x50, 9];
    section.extend_from_slice(b"localhost");
    section.extend_from_slice(&[0x51, path.len() as u8]);
    section.extend_from_slice(path.as_bytes());
    let mut frame = vec![0x01, section.len() as u8];
    frame.extend_from_slice(&section);
    frame
}

impl Pair {
    /// A connected client with its control stream open (its SETTINGS sent).
    fn h3_client(&mut self, port: u16) -> usize {
        let client = self.connect(port, b"h3");
        self.exchange();
        let conn = self.client(client);
        let control = conn.streams().open(quinn_proto::Dir::Uni).unwrap();
        // Stream type 0 (control), SETTINGS with none.
        conn.send_stream(control)
            .write(&[0x00, 0x04, 0x00])
            .unwrap();
        client
    }

    /// Sends `frames` on a new request stream and ends it; returns the stream.
    fn request(&mut self, client: usize, frames: &[u8]) -> quinn_proto::StreamId {
        let conn = self.client(client);
        let stream = conn.streams().open(quinn_proto::Dir::Bi).unwrap();
        conn.send_stream(stream).write(frames).unwrap();
        conn.send_stream(stream).finish().unwrap();
        stream
    }

    /// What arrived on `stream` so far, and whether it ended; or its reset code.
    fn response(
        &mut self,
        client: usize,
        stream: quinn_proto::StreamId,
    ) -> Result<(Vec<u8>, bool), u64> {
        let mut recv = self.client(client).recv_stream(stream);
        let mut chunks = recv.read(true).unwrap();
        let mut bytes = Vec::new();
        let ended = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk.bytes),
                Ok(None) => break true,
                Err(quinn_proto::ReadError::Blocked) => break false,
                Err(quinn_proto::ReadError::Reset(code)) => return Err(code.into_inner()),
            }
        };
        let _ = chunks.finalize();
        Ok((bytes, ended))
    }
}

/// Whether `bytes` (an answer's frames) hold a HEADERS frame with `:status 200` (static
/// index 25) and then DATA of `body`.
fn is_ok_with(bytes: &[u8], body: &[u8]) -> bool {
    let headers_len = usize::from(bytes[1]);
    let section = &bytes[2..2 + headers_len];
    let data = &bytes[2 + headers_len..];
    bytes[0] == 0x01
        && section[..3] == [0x00, 0x00, 0xc0 | 25]
        && data[0] == 0x00
        && usize::from(data[1]) == body.len()
        && &data[2..] == body
}

#[test]
fn a_connection_holding_its_share_of_the_budget_reads_no_more_until_it_may() {
    let mut pair = Pair::new(10);
    pair.share = 8 * 1024;
    let client = pair.h3_client(40_000);
    // 16 requests of 2,000-byte bodies, left unanswered (`/later`): 32 KB to hold.
    let mut frames = get("/later");
    frames.extend_from_slice(&[0x00, 0x47, 0xd0]);
    frames.extend_from_slice(&[b'x'; 2000]);
    for _ in 0..16 {
        pair.request(client, &frames);
    }
    pair.exchange();
    let held = pair.server().held();
    assert!(held < 2 * pair.share, "{held} bytes held");
    assert!(
        pair.app.later.len() < 16,
        "{} requests read",
        pair.app.later.len()
    );
    // Under its share again (the worker's budget freed), it reads the rest without a word
    // from the client, which flow control may have stopped.
    pair.share = usize::MAX;
    let at = pair.now + Duration::from_millis(1);
    pair.advance_to(at);
    assert_eq!(pair.app.later.len(), 16);
}

#[test]
fn a_request_not_all_in_within_the_request_timeout_is_reset() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    // Half a HEADERS frame, and nothing more.
    let conn = pair.client(client);
    let stream = conn.streams().open(quinn_proto::Dir::Bi).unwrap();
    let frames = get("/hello");
    conn.send_stream(stream).write(&frames[..5]).unwrap();
    let complete = pair.request(client, &frames);
    pair.exchange();
    assert_eq!(pair.response(client, stream), Ok((Vec::new(), false)));
    let at = pair.now + REQUEST_TIMEOUT + Duration::from_secs(2);
    pair.advance_to(at);
    let incomplete = h3::ErrorCode::RequestIncomplete.value();
    assert_eq!(pair.response(client, stream), Err(incomplete));
    let (bytes, ended) = pair.response(client, complete).unwrap();
    assert!(ended && is_ok_with(&bytes, b"hello"));
    assert!(!pair.client(client).is_closed());
}

#[test]
fn a_request_is_answered_on_its_stream() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    let stream = pair.request(client, &get("/hello"));
    pair.exchange();
    let (bytes, ended) = pair.response(client, stream).unwrap();
    assert!(ended);
    assert!(is_ok_with(&bytes, b"hello"), "{bytes:?}");
}

#[test]
fn sixty_four_requests_on_one_connection_are_all_answered() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    let streams: Vec<_> = (0..64)
        .map(|_| pair.request(client, &get("/hello")))
        .collect();
    pair.exchange();
    for stream in streams {
        let (bytes, ended) = pair.response(client, stream).unwrap();
        assert!(ended && is_ok_with(&bytes, b"hello"));
    }
}

#[test]
fn an_answer_given_later_reaches_its_stream() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    let stream = pair.request(client, &get("/later"));
    pair.exchange();
    assert_eq!(pair.response(client, stream), Ok((Vec::new(), false)));
    let ticket = pair.app.later.pop().unwrap();
    assert!(ticket.slot & QUIC_SLOT != 0 && pair.server().is_live(&ticket));
    let (date, now) = (HttpDate::new(), pair.now);
    pair.server()
        .answer(ticket, Answer::ok(ContentType::Plain, b"later"), &date, now);
    pair.exchange();
    let (bytes, ended) = pair.response(client, stream).unwrap();
    assert!(ended && is_ok_with(&bytes, b"later"));
}

#[test]
fn a_dynamic_table_reference_closes_the_connection_with_qpack_decompression_failed() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    // Required Insert Count 1: the section needs a table the server said it has not.
    let frames = [0x01, 0x03, 0x02, 0x00, 0x80];
    pair.request(client, &frames);
    pair.exchange();
    let conn = pair.client(client);
    assert!(conn.is_closed());
    let mut lost = None;
    while let Some(event) = conn.poll() {
        if let quinn_proto::Event::ConnectionLost { reason } = event {
            lost = Some(reason);
        }
    }
    match lost {
        Some(quinn_proto::ConnectionError::ApplicationClosed(close)) => {
            assert_eq!(close.error_code.into_inner(), 0x200)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn data_before_headers_resets_nothing_but_closes_with_frame_unexpected() {
    let mut pair = Pair::new(10);
    let client = pair.h3_client(40_000);
    pair.request(client, &[0x00, 0x02, b'h', b'i']);
    pair.exchange();
    assert!(pair.client(client).is_closed());
}
