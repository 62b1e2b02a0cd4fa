//! HTTP/1.1 over TLS 1.3 on the TLS listener, against both binaries over real sockets, with
//! a rustls client that trusts exactly the test certificate (`common::tls`). Then the TLS
//! session alone, without sockets, and the start-up errors.

mod common;

use std::io::{self, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::gnosis::http::BufferPool;
use ::gnosis::transport::{load, test_pair, TlsSession};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use sha2::{Digest, Sha256};

use ::gnosis::transport::{certificate, client_config};
use common::tls::tls13;
use common::{free_port, read_response, HttpResponse, OtherPorts, Server};

fn cert() -> &'static str {
    test_pair().cert.to_str().unwrap()
}

fn key() -> &'static str {
    test_pair().key.to_str().unwrap()
}

/// A key of another pair: it does not match `cert()`.
fn other_key() -> &'static str {
    test_pair().other_key.to_str().unwrap()
}

type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// One HTTPS connection, its handshake done.
struct TlsClient {
    reader: BufReader<TlsStream>,
}

impl TlsClient {
    fn connect(port: u16, config: Arc<ClientConfig>) -> io::Result<TlsClient> {
        let socket = TcpStream::connect(("127.0.0.1", port))?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        let name = ServerName::try_from("localhost").unwrap();
        let mut session = ClientConnection::new(config, name).unwrap();
        let mut stream = StreamOwned::new(session, socket);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        session = stream.conn;
        Ok(TlsClient {
            reader: BufReader::new(StreamOwned::new(session, stream.sock)),
        })
    }

    fn session(&self) -> &ClientConnection {
        &self.reader.get_ref().conn
    }

    fn send(&mut self, raw: &[u8]) {
        let stream = self.reader.get_mut();
        stream.write_all(raw).unwrap();
        stream.flush().unwrap();
    }

    fn response(&mut self) -> HttpResponse {
        read_response(&mut self.reader).unwrap()
    }

    fn get(&mut self, target: &str) -> HttpResponse {
        self.send(common::get_request(target).as_bytes());
        self.response()
    }
}

/// A server with the test pair on a TLS port, and no database to find.
struct TlsServer {
    server: Server,
    tls_port: u16,
}

impl TlsServer {
    fn start(binary: &str, extra: &[&str]) -> TlsServer {
        let env = [
            ("TLS_CERT", cert().to_string()),
            ("TLS_KEY", key().to_string()),
            ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
        ];
        let server = Server::start_with_env(binary, extra, &env);
        let tls_port = server.tls_port;
        TlsServer { server, tls_port }
    }

    fn connect(&self) -> TlsClient {
        TlsClient::connect(self.tls_port, tls13(&[b"http/1.1"])).unwrap()
    }
}

fn body_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn chunked(path: &str, body: &[u8], piece: usize) -> Vec<u8> {
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(piece) {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

fn with_length(path: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

fn serves_json_pipelined_plaintext_and_delay(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    let mut client = server.connect();
    let json = client.get("/json");
    assert_eq!(json.status, 200);
    assert_eq!(json.header("content-type"), Some("application/json"));
    assert_eq!(json.text(), r#"{"message":"Hello, World!"}"#);

    client.send(common::get_request("/plaintext").repeat(16).as_bytes());
    for _ in 0..16 {
        assert_eq!(client.response().text(), "Hello, World!");
    }
    let started = Instant::now();
    assert_eq!(client.get("/delay/50").text(), "50");
    assert!(started.elapsed() >= Duration::from_millis(50));
    // The cleartext listener serves beside it.
    assert_eq!(server.server.connect().get("/json").status, 200);
}

/// WebSocket over the TLS listener: the upgrade and the echo go through the session as
/// plaintext does (the transport under the protocol).
fn upgrades_to_websocket_and_echoes(binary: &str) {
    use tungstenite::Message;
    let server = TlsServer::start(binary, &[]);
    let stream = server.connect().reader.into_inner();
    let (mut socket, response) = tungstenite::client("ws://localhost/ws", stream).unwrap();
    assert_eq!(response.status(), 101);
    for message in [
        Message::text("over TLS"),
        Message::binary(body_of(100_000)),
        Message::Ping(b"p".to_vec().into()),
    ] {
        socket.send(message.clone()).unwrap();
        let echo = match message {
            Message::Ping(payload) => Message::Pong(payload),
            message => message,
        };
        assert_eq!(socket.read().unwrap(), echo);
    }
    socket.close(None).unwrap();
    match socket.read() {
        Ok(Message::Close(Some(frame))) => assert_eq!(u16::from(frame.code), 1000),
        other => panic!("{other:?}"),
    }
}

/// 40 pipelined GETs of a 300 KiB file on one worker whose budget (100 KB) one answer
/// overruns: the connection is paused for the budget, and what it has written goes on being
/// sealed and sent, so every answer arrives, whole and in order.
fn pipelined_answers_past_the_budget_all_arrive(binary: &str) {
    let name = std::path::Path::new(binary).file_name().unwrap();
    let file = common::BigFile::new(&format!("tls-{}", name.to_str().unwrap()));
    let env = [
        ("TLS_CERT", cert().to_string()),
        ("TLS_KEY", key().to_string()),
        ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
        file.env(),
    ];
    let extra = ["--threads", "1", "--max-buffered", "100000"];
    let server = Server::start_with_env(binary, &extra, &env);
    let mut client = TlsClient::connect(server.tls_port, tls13(&[b"http/1.1"])).unwrap();
    client.send(common::get_request("/static/big.bin").repeat(40).as_bytes());
    let expected = std::fs::read(file.dir.join("big.bin")).unwrap();
    for answer in 0..40 {
        let response = client.response();
        assert_eq!(response.status, 200, "answer {answer}");
        assert!(response.body == expected, "answer {answer}");
    }
}

fn echoes_bodies_byte_for_byte(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    let mut client = server.connect();
    for len in [1, 10_240, 100_000] {
        let body = body_of(len);
        for raw in [with_length("/echo", &body), chunked("/echo", &body, 4096)] {
            client.send(&raw);
            let response = client.response();
            assert_eq!(response.status, 200, "{len} bytes");
            assert_eq!(
                response.header("content-type"),
                Some("application/octet-stream")
            );
            assert!(response.body == body, "{len} bytes echoed");
        }
    }
    client.send(&with_length("/echo", b""));
    let empty = client.response();
    assert_eq!((empty.status, empty.body.len()), (200, 0));
    // And on the cleartext listener.
    let mut plain = server.server.connect();
    plain.send(&chunked("/echo", &body_of(100_000), 10_000));
    assert!(plain.response().unwrap().body == body_of(100_000));
}

fn serves_the_configured_certificate_with_tls13_and_an_aead_suite(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    let client = server.connect();
    let session = client.session();
    let served = &session.peer_certificates().expect("a certificate")[0];
    assert_eq!(
        Sha256::digest(served.as_ref()),
        Sha256::digest(certificate().as_ref())
    );
    assert_eq!(
        session.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    let suite = session.negotiated_cipher_suite().unwrap().suite();
    assert!(
        matches!(
            suite,
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                | rustls::CipherSuite::TLS13_AES_256_GCM_SHA384
                | rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        ),
        "{suite:?}"
    );
}

fn a_tls12_client_is_refused(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    let tls12 = client_config(&[&rustls::version::TLS12], &[b"http/1.1"]);
    let refused = TlsClient::connect(server.tls_port, tls12);
    assert!(refused.is_err(), "a TLS 1.2 handshake must fail");
    assert_eq!(server.connect().get("/plaintext").status, 200);
}

fn alpn_names_only_what_the_client_offered(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    // What the client offers, and what the server must answer.
    type Case = (&'static [&'static [u8]], Option<&'static [u8]>);
    let cases: [Case; 4] = [
        (&[b"http/1.1"], Some(b"http/1.1")),
        (&[b"h2", b"http/1.1"], Some(b"http/1.1")),
        (&[b"h2"], None),
        (&[], None),
    ];
    for (offered, expected) in cases {
        let mut client = TlsClient::connect(server.tls_port, tls13(offered)).unwrap();
        assert_eq!(client.session().alpn_protocol(), expected, "{offered:?}");
        assert_eq!(client.get("/plaintext").status, 200);
    }
    // The h2 port answers h2 to a client that offers it, and as the other otherwise.
    let h2_port = server.server.h2_tls_port;
    let cases: [Case; 5] = [
        (&[b"h2", b"http/1.1"], Some(b"h2")),
        (&[b"http/1.1", b"h2"], Some(b"h2")),
        (&[b"h2"], Some(b"h2")),
        (&[b"http/1.1"], Some(b"http/1.1")),
        (&[], None),
    ];
    for (offered, expected) in cases {
        let mut client = TlsClient::connect(h2_port, tls13(offered)).unwrap();
        assert_eq!(client.session().alpn_protocol(), expected, "{offered:?}");
        if expected != Some(b"h2") {
            assert_eq!(client.get("/plaintext").status, 200);
        }
    }
}

fn a_clean_close_sends_close_notify(binary: &str) {
    let server = TlsServer::start(binary, &[]);
    let mut client = server.connect();
    client.send(b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_eq!(client.response().status, 200);
    // rustls reads 0 only after close_notify; a bare TCP close is UnexpectedEof.
    let mut rest = Vec::new();
    assert_eq!(client.reader.read_to_end(&mut rest).unwrap(), 0);
}

/// Connects to `port` and sends the first `len` bytes of a TLS 1.3 ClientHello.
fn partial_hello(port: u16, len: usize) -> TcpStream {
    let name = ServerName::try_from("localhost").unwrap();
    let mut session = ClientConnection::new(tls13(&[b"http/1.1"]), name).unwrap();
    let mut hello = Vec::new();
    session.write_tls(&mut hello).unwrap();
    let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket.write_all(&hello[..len.min(hello.len())]).unwrap();
    socket
}

/// True when the server closes `socket` within `timeout` (what it sends first is read).
fn closed_within(socket: &mut TcpStream, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        socket
            .set_read_timeout(Some(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            ))
            .unwrap();
        match socket.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

fn silent_and_stalled_handshakes_are_closed(binary: &str) {
    // The handshake deadline is the request timeout, or the idle timeout if shorter.
    let server = TlsServer::start(binary, &["--idle-timeout", "1000"]);
    let mut silent = TcpStream::connect(("127.0.0.1", server.tls_port)).unwrap();
    let mut stalled = partial_hello(server.tls_port, 40);
    let mut unfinished = partial_hello(server.tls_port, usize::MAX);
    for socket in [&mut silent, &mut stalled, &mut unfinished] {
        assert!(closed_within(socket, Duration::from_secs(4)));
    }
    assert_eq!(server.connect().get("/plaintext").status, 200);
}

fn garbage_is_closed_without_a_log_line(binary: &str) {
    let mut server = TlsServer::start(binary, &[]);
    std::thread::sleep(Duration::from_millis(200));
    let log_before = server.server.log().lines().count();
    let garbage: [&[u8]; 3] = [
        b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n",
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01],
        &body_of(64 * 1024),
    ];
    for bytes in garbage.iter().cycle().take(30) {
        let mut socket = TcpStream::connect(("127.0.0.1", server.tls_port)).unwrap();
        let _ = socket.write_all(bytes);
        assert!(closed_within(&mut socket, Duration::from_secs(12)));
    }
    assert!(server.server.is_running());
    assert_eq!(server.server.log().lines().count(), log_before);
    assert_eq!(server.connect().get("/plaintext").status, 200);
}

/// Many connections start handshakes and stall: the connection cap holds, a cleartext
/// connection keeps being served meanwhile, and once the handshakes' deadline has freed
/// their slots, new TLS clients are served.
fn the_cap_holds_under_a_handshake_flood(binary: &str) {
    let server = TlsServer::start(binary, &["--max-conns", "20", "--idle-timeout", "1000"]);
    let mut plain = server.server.connect();
    let mut established = server.connect();
    let flood: Vec<TcpStream> = (0..200)
        .map(|_| partial_hello(server.tls_port, usize::MAX))
        .collect();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        assert_eq!(plain.get("/plaintext").status, 200);
        assert_eq!(established.get("/plaintext").status, 200);
        // Two threads of 20, the waiting handshakes beyond them in the backlog (epoll) or
        // held unserved by io_uring: never served at once.
        assert!(server.server.held_descriptors() < 2 * 20 + 1100);
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let served = TlsClient::connect(server.tls_port, tls13(&[b"http/1.1"]))
            .map(|mut client| client.get("/plaintext").status);
        if served.is_ok_and(|status| status == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "TLS clients are served again");
        std::thread::sleep(Duration::from_millis(200));
    }
}

test_both_binaries!(gnosis, gnosis_uring;
    upgrades_to_websocket_and_echoes,
    serves_json_pipelined_plaintext_and_delay,
    echoes_bodies_byte_for_byte,
    serves_the_configured_certificate_with_tls13_and_an_aead_suite,
    a_tls12_client_is_refused,
    alpn_names_only_what_the_client_offered,
    a_clean_close_sends_close_notify,
    silent_and_stalled_handshakes_are_closed,
    garbage_is_closed_without_a_log_line,
    the_cap_holds_under_a_handshake_flood,
    pipelined_answers_past_the_budget_all_arrive,
);

// The session without sockets.

/// Moves the bytes each side has to send to the other until neither has any.
fn exchange(
    server: &mut TlsSession,
    client: &mut ClientConnection,
    buffers: &mut BufferPool,
) -> Vec<u8> {
    let mut plaintext = Vec::new();
    loop {
        let mut to_server = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut to_server).unwrap();
        }
        assert!(server.receive(&to_server, &mut plaintext));
        server.seal(&[], buffers);
        let to_client = server.unsent().to_vec();
        server.sent(to_client.len(), buffers);
        let mut from = &to_client[..];
        while !from.is_empty() {
            client.read_tls(&mut from).unwrap();
            client.process_new_packets().unwrap();
        }
        if to_server.is_empty() && to_client.is_empty() {
            return plaintext;
        }
    }
}

#[test]
fn a_session_decrypts_seals_only_once_its_output_is_sent_and_closes_with_close_notify() {
    let config = Arc::new(load(cert().as_ref(), key().as_ref()).unwrap());
    let mut buffers = BufferPool::default();
    let now = Instant::now();
    let mut server = TlsSession::new(config, false, now + Duration::from_secs(1));
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = ClientConnection::new(tls13(&[b"http/1.1"]), name).unwrap();
    assert!(!server.handshake_expired(now));
    assert!(server.handshake_expired(now + Duration::from_secs(2)));
    exchange(&mut server, &mut client, &mut buffers);
    assert!(!client.is_handshaking());
    assert!(!server.handshake_expired(now + Duration::from_secs(2)));
    assert_eq!(client.alpn_protocol(), Some(&b"http/1.1"[..]));

    client
        .writer()
        .write_all(b"GET / HTTP/1.1\r\n\r\n")
        .unwrap();
    assert_eq!(
        exchange(&mut server, &mut client, &mut buffers),
        b"GET / HTTP/1.1\r\n\r\n"
    );

    assert_eq!(server.seal(b"first", &mut buffers), 5);
    // Until the first is sent, nothing more is taken: it waits above, where it is counted.
    assert_eq!(server.seal(b"second", &mut buffers), 0);
    let mut to_client = server.unsent().to_vec();
    assert!(server.held() > to_client.len());
    server.sent(to_client.len(), &mut buffers);
    assert_eq!(server.seal(b"second", &mut buffers), 6);
    assert!(!server.is_closed());
    server.close(&mut buffers);
    to_client.extend_from_slice(server.unsent());
    server.sent(server.unsent().len(), &mut buffers);
    assert!(server.is_closed());
    let mut from = &to_client[..];
    while !from.is_empty() {
        client.read_tls(&mut from).unwrap();
    }
    let state = client.process_new_packets().unwrap();
    assert!(state.peer_has_closed());
    let mut received = Vec::new();
    client.reader().read_to_end(&mut received).unwrap();
    assert_eq!(received, b"firstsecond");
}

#[test]
fn garbage_fails_a_session_with_an_alert_and_no_more_input() {
    let config = Arc::new(load(cert().as_ref(), key().as_ref()).unwrap());
    let mut buffers = BufferPool::default();
    let mut server = TlsSession::new(config, false, Instant::now());
    let mut plaintext = Vec::new();
    assert!(!server.receive(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &mut plaintext));
    assert!(plaintext.is_empty());
    assert_eq!(server.seal(b"dropped", &mut buffers), 7);
    server.close(&mut buffers);
    // The alert: one record of type 21.
    assert_eq!(server.unsent().first(), Some(&21));
    let unsent = server.unsent().len();
    server.sent(unsent, &mut buffers);
    assert!(server.is_closed());
    assert!(!server.receive(b"more", &mut plaintext));
}

// Start-up: the certificate and key.

/// Runs `binary` with `TLS_CERT` and `TLS_KEY` until it exits (or 10 s), and returns its
/// status and what it wrote to stderr.
fn start_with_pair(binary: &str, cert: &str, key: &str) -> (Option<i32>, String) {
    let mut child = Command::new(binary)
        .args(["--port", &free_port().to_string()])
        .args(OtherPorts::free().args())
        .env("TLS_CERT", cert)
        .env("TLS_KEY", key)
        .env("PGHOST", "/nonexistent-gnosis-test-database")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn a_bad_certificate_or_key_stops_the_start_naming_the_file(binary: &str) {
    let garbage = std::env::temp_dir().join(format!("gnosis-garbage-{}.crt", std::process::id()));
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let garbage = garbage.to_str().unwrap();
    let cases = [
        (cert(), "/nonexistent/server.key", "/nonexistent/server.key"),
        (garbage, key(), garbage),
        (cert(), other_key(), other_key()),
    ];
    for (cert, key, named) in cases {
        let (status, log) = start_with_pair(binary, cert, key);
        assert_eq!(status, Some(2), "{cert} {key}: {log}");
        assert!(log.contains(named), "{named} named in {log:?}");
    }
}

fn without_a_certificate_the_tls_listener_stays_off(binary: &str) {
    let env = [
        ("TLS_CERT", "/nonexistent/server.crt".to_string()),
        ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
    ];
    let server = Server::start_with_env(binary, &[], &env);
    assert_eq!(server.connect().get("/plaintext").status, 200);
    let log = server.log();
    assert_eq!(log.matches("no TLS listener").count(), 1, "{log}");
}

test_both_binaries!(startup, startup_uring;
    a_bad_certificate_or_key_stops_the_start_naming_the_file,
    without_a_certificate_the_tls_listener_stays_off,
);
