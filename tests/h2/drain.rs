//! The graceful drain (issue #43, item 8), against both binaries over real sockets: on
//! SIGTERM the listeners close, every open connection is told in its protocol, what is in
//! flight is finished, and the process exits 0; a second signal exits at once. Each promise
//! is shown by an event (an answer, a GOAWAY, a close, a refused connect, the exit) within
//! a bound far above it, never by a stopwatch.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use crate::common::h2::*;
use crate::common::{self, Client, Server};
use crate::hostile::start_with_tls;

test_both_binaries!(gnosis, gnosis_uring;
    a_signal_drains_what_is_in_flight_and_exits_0,
    the_drain_ends_at_its_deadline,
    a_second_signal_exits_at_once,
);

/// Under load: HTTP/1.1 with an answer in the works (`/delay/2000`, behind one answered),
/// an idle keep-alive HTTP/1.1 connection, HTTP/2 streams in the works on h2c and over TLS,
/// an idle WebSocket. After SIGTERM: no new connection is taken, the idle ones close (the
/// WebSocket with 1001), every answer in the works arrives whole (HTTP/1.1's saying
/// `Connection: close`, HTTP/2's after GOAWAY NO_ERROR naming its stream), and the process
/// exits 0 long before its drain deadline (60 s: the drain ends when the work does).
fn a_signal_drains_what_is_in_flight_and_exits_0(binary: &str) {
    let mut server = start_with_tls(binary, &["--drain-timeout", "60000"]);
    let mut delayed = waiting_for(&server, "/delay/2000");
    let mut idle = server.connect();
    assert_eq!(idle.get("/plaintext").status, 200);
    let h2c = h2_in_flight(RawClient::h2c(server.h2c_port, &[]));
    let h2 = h2_in_flight(RawClient::tls(server.h2_tls_port, &[]));
    let mut ws = websocket(server.port);

    server.signal(libc::SIGTERM);

    // Idle connections are closed: the WebSocket after its close frame, 1001.
    let mut close = [0; 4];
    ws.read_exact(&mut close).unwrap();
    assert_eq!(close, [0x88, 2, 0x03, 0xe9], "a close frame of 1001");
    assert!(idle.is_closed_by_server(GENEROUS));
    refuses_new_connections(&server);
    // Every answer in the works arrives, then the connection closes.
    let answer = delayed.response().unwrap();
    assert_eq!((answer.status, answer.text()), (200, "2000"));
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(delayed.is_closed_by_server(GENEROUS));
    for (name, client) in [("h2c", h2c), ("h2", h2)] {
        let seen = finish(client);
        assert_eq!(seen.goaway, Some((3, NO_ERROR)), "{name}");
        assert_eq!(seen.status.as_deref(), Some("200"), "{name}");
        assert_eq!(seen.body, b"2000", "{name}");
    }
    let status = server.exit_status(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.log());
}

/// Past `--drain-timeout` the worker closes what is left and the process exits 0: an answer
/// due in 10 s never comes to a drain of 300 ms (the connection closes unanswered).
fn the_drain_ends_at_its_deadline(binary: &str) {
    let mut server = Server::start(binary, &["--drain-timeout", "300"]);
    let mut delayed = waiting_for(&server, "/delay/10000");
    server.signal(libc::SIGTERM);
    assert!(delayed.is_closed_by_server(GENEROUS), "closed unanswered");
    let status = server.exit_status(GENEROUS);
    assert_eq!(status.code(), Some(0), "{}", server.log());
}

/// A second signal during the drain (of 60 s, with an answer due in 10 s) exits at once,
/// with 128 + the signal's number, the answer never sent.
fn a_second_signal_exits_at_once(binary: &str) {
    let mut server = Server::start(binary, &["--drain-timeout", "60000"]);
    let mut delayed = waiting_for(&server, "/delay/10000");
    server.signal(libc::SIGTERM);
    // The drain has begun once the listeners are closed.
    refuses_new_connections(&server);
    server.signal(libc::SIGTERM);
    let status = server.exit_status(GENEROUS);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert_eq!(status.signal(), None);
    assert!(delayed.is_closed_by_server(GENEROUS), "closed unanswered");
}

/// An HTTP/1.1 connection waiting for the answer to `path`: sent in one write after a
/// `/plaintext`, whose answer shows the server has both.
fn waiting_for(server: &Server, path: &str) -> Client {
    let mut client = server.connect();
    let requests = common::get_request("/plaintext") + &common::get_request(path);
    client.send(requests.as_bytes());
    assert_eq!(client.response().unwrap().status, 200);
    client
}

/// `client` with stream 3 waiting for `/delay/2000`: sent in one write with stream 1's
/// `/plaintext`, whose answer shows the server has both.
fn h2_in_flight(mut client: RawClient) -> RawClient {
    let mut requests = get_on(1, "/plaintext");
    requests.extend(get_on(3, "/delay/2000"));
    client.send(&requests);
    assert_eq!(status(&client.until(1, HEADERS)), "200");
    client
}

/// What an HTTP/2 client saw until the server closed the connection.
struct Seen {
    goaway: Option<(u32, u32)>,
    status: Option<String>,
    body: Vec<u8>,
}

fn finish(mut client: RawClient) -> Seen {
    let deadline = Instant::now() + GENEROUS;
    let mut seen = Seen {
        goaway: None,
        status: None,
        body: Vec::new(),
    };
    while let Some(frame) = client.next(deadline) {
        match (frame.kind, frame.stream) {
            (GOAWAY, _) => seen.goaway = Some(frame.words()),
            (HEADERS, 3) => seen.status = Some(status(&frame)),
            (DATA, 3) => seen.body.extend_from_slice(&frame.payload),
            _ => {}
        }
    }
    seen
}

/// An upgraded WebSocket connection to `port`.
fn websocket(port: u16) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(GENEROUS)).unwrap();
    stream
        .write_all(
            b"GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
              Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 101"), "{line}");
    while line != "\r\n" {
        line.clear();
        reader.read_line(&mut line).unwrap();
    }
    reader
}

/// Once the server has let go of its listeners, no connection is taken on any port: the
/// connect is refused, or (io_uring: one its accept took before its cancel landed) the
/// connection is closed unanswered.
fn refuses_new_connections(server: &Server) {
    let ports = [
        server.port,
        server.h2c_port,
        server.tls_port,
        server.h2_tls_port,
    ];
    let deadline = Instant::now() + GENEROUS;
    while ports
        .iter()
        .any(|&port| common::listens_on(server.pid(), port))
    {
        assert!(Instant::now() < deadline, "still listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    for port in ports {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
            continue;
        };
        // The server may have closed it already: what it does not take is no matter.
        let _ = stream.write_all(common::get_request("/plaintext").as_bytes());
        stream.set_read_timeout(Some(GENEROUS)).unwrap();
        let mut client = Client::from_stream(stream);
        assert!(client.is_closed_by_server(GENEROUS), "port {port} answered");
    }
}
