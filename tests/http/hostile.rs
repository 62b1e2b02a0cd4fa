//! Hostile and broken HTTP clients: each gets a clear answer or a clean close, the server
//! never goes down, and other clients carry on. `test_both_binaries!` runs it per binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{get_request, rss_kib, Client, Server};

/// Starts `binary` with no database to find: PGHOST names a socket directory that does not
/// exist, so that gnosis's connection attempts fail at once. (Without PG* variables it
/// would try tfb-database, which /etc/hosts may map to 127.0.0.1:5432, where another
/// PostgreSQL may be listening, and its connections would come and go in the counts.)
fn start(binary: &str) -> Server {
    let no_database = [("PGHOST", "/nonexistent-gnosis-test-database".to_string())];
    Server::start_with_env(binary, &[], &no_database)
}

/// Sends `raw` on a fresh connection and returns the status of the answer, asserting that the
/// connection is closed after it.
fn status_then_close(server: &Server, raw: &[u8]) -> u16 {
    let mut client = server.connect();
    // The server may close before taking every byte; what it answered still arrives.
    let _ = client.stream().try_clone().unwrap().write_all(raw);
    let response = client.response().unwrap();
    assert_eq!(response.header("connection"), Some("close"));
    assert!(client.is_closed_by_server(Duration::from_secs(3)));
    response.status
}

fn still_serving(server: &mut Server) {
    assert!(server.is_running(), "the server died");
    assert_eq!(server.connect().get("/plaintext").text(), "Hello, World!");
}

fn bad_framing_and_bad_bytes_get_4xx_and_close(binary: &str) {
    let mut server = start(binary);
    let cases: [(&[u8], u16); 17] = [
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 \t\r\nhello\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\r\nhello\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r;x\r\nhello\r\n0\r\n\r\n", 400),
        (b"GET /json HTTP/1.1\r\nHost: p\r\nHost: q\r\n\r\n", 400),
        (b"GET /json HTTP/1.1\r\nHost: p q\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"G@T /json HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /js\0on HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /json HTTP/1.1\r\nHost: a\0b\r\n\r\n", 400),
        (b"GET /json HTTP/1.1\r\nHost: a\r\nContent-Length: 12abc\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello!\r\n0\r\n\r\n", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n", 413),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
        (b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413),
    ];
    for (raw, expected) in cases {
        assert_eq!(
            status_then_close(&server, raw),
            expected,
            "{}",
            String::from_utf8_lossy(raw)
        );
    }
    still_serving(&mut server);
}

fn oversized_request_lines_and_heads(binary: &str) {
    let mut server = start(binary);
    let long_target = format!(
        "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    assert_eq!(status_then_close(&server, long_target.as_bytes()), 414);
    let many_headers: String = (0..2000).map(|i| format!("X-{i}: {i}\r\n")).collect();
    let raw = format!("GET /json HTTP/1.1\r\nHost: a\r\n{many_headers}\r\n");
    assert_eq!(status_then_close(&server, raw.as_bytes()), 431);
    still_serving(&mut server);
}

fn unknown_methods_are_405_and_keep_the_connection(binary: &str) {
    let server = start(binary);
    let mut client = server.connect();
    for method in ["BREW", "DELETE", "OPTIONS", "PUT"] {
        client.send(format!("{method} /json HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
        assert_eq!(client.response().unwrap().status, 405, "{method}");
    }
    assert_eq!(client.get("/json").status, 200);
}

fn bare_lf_line_ends_are_understood(binary: &str) {
    let server = start(binary);
    let mut client = server.connect();
    client.send(b"GET /plaintext HTTP/1.1\nHost: a\n\n");
    assert_eq!(client.response().unwrap().text(), "Hello, World!");
}

fn a_slow_client_is_cut_off_and_others_are_not_affected(binary: &str) {
    let mut server = start(binary);
    let mut slow = server.connect();
    slow.send(b"GET /json HTTP/1.1\r\nHost: a\r\n");
    let mut bystander = server.connect();
    let started = Instant::now();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(15) {
        // One more byte of a header that never ends, twice a second.
        if slow.stream().write_all(b"X").is_err()
            || slow.is_closed_by_server(Duration::from_millis(500))
        {
            closed = true;
            break;
        }
        assert_eq!(bystander.get("/json").status, 200);
    }
    assert!(closed, "a request that never completes was not cut off");
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "cut off too early"
    );
    still_serving(&mut server);
}

fn a_client_that_does_not_read_is_not_buffered_without_bound(binary: &str) {
    let mut server = start(binary);
    let rss_before = rss_kib(server.pid());
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let batch = get_request("/plaintext").repeat(256);
    let mut sent = 0usize;
    // Write until the server stops taking requests: both sockets' buffers fill up.
    while sent < 512 * 1024 * 1024 {
        match stream.write(batch.as_bytes()) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(
        sent < 512 * 1024 * 1024,
        "the server read everything without the client reading"
    );
    let grown = rss_kib(server.pid()).saturating_sub(rss_before);
    assert!(
        grown < 64 * 1024,
        "the server grew by {grown} KiB for one client"
    );
    still_serving(&mut server);
    // The client can still read what it was owed, in order.
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = [0u8; 17];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200 OK\r\n");
}

fn many_clients_vanishing_mid_request_leave_nothing_behind(binary: &str) {
    let mut server = start(binary);
    // Server::start returns once a listener accepts, and the listeners are bound before the
    // worker threads make their epoll instances or rings: count once the server is all up.
    let fds_before =
        server.settled_descriptors(Duration::from_millis(500), Duration::from_secs(10));
    for i in 0..300 {
        let mut client = Client::connect(server.port);
        match i % 3 {
            0 => client.send(b"GET /json HTTP/1.1\r\nHo"),
            1 => client.send(get_request("/plaintext").repeat(50).as_bytes()),
            _ => {}
        }
        // Dropped: closed with or without unread responses.
    }
    // Each of these connections ends at once on the client's FIN or reset. The server's
    // bound for any connection that is done is its lingering close: 2 s for the peer's EOF,
    // checked by the sweep every second. Three times that, for a loaded machine.
    let vanished = Instant::now();
    let within = Duration::from_secs(9);
    while server.held_descriptors() > fds_before {
        assert!(
            vanished.elapsed() < within,
            "descriptors leaked: {} before, {} still open {within:?} after the clients \
             vanished:\n{}",
            fds_before,
            server.held_descriptors(),
            server.describe_descriptors()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    still_serving(&mut server);
}

/// Four clients in parallel alternate, each on a new connection, a request the server answers
/// with an error and a close (a malformed `Content-Length`: 400) and a plain GET. Every GET is
/// answered: a closing connection's last operations never reach the connection that takes
/// its slot or its socket's number next.
fn fresh_connections_after_error_closes_are_all_answered(binary: &str) {
    let server = start(binary);
    let port = server.port;
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let bad = b"GET /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n";
                let (mut errors_lost, mut gets_lost) = (0, 0);
                for _ in 0..300 {
                    let mut closing = Client::connect(port);
                    closing.send(bad);
                    match closing.response() {
                        Ok(response) => assert_eq!(response.status, 400),
                        Err(_) => errors_lost += 1,
                    }
                    drop(closing);
                    match Client::connect(port).try_get("/plaintext") {
                        Ok(response) => assert_eq!(response.text(), "Hello, World!"),
                        Err(_) => gets_lost += 1,
                    }
                }
                (errors_lost, gets_lost)
            })
        })
        .collect();
    let lost = clients
        .into_iter()
        .map(|client| client.join().unwrap())
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    assert_eq!(
        lost,
        (0, 0),
        "(400s, GETs) of 1,200 each whose connection closed with no answer"
    );
}

/// `POST /baseline11?a=1&b=2` with a body of `len` bytes: blanks, then `7` (the sum is 10
/// only if every byte arrived and was taken).
fn padded_body(len: usize) -> Vec<u8> {
    let mut body = vec![b' '; len - 1];
    body.push(b'7');
    body
}

/// Writes `pieces` with a pause between them, as a real network delivers them.
fn send_spaced(client: &mut Client, pieces: impl IntoIterator<Item = Vec<u8>>) {
    for piece in pieces {
        client.send(&piece);
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// Bodies of 64 KiB, 100 KB and the body limit, sent in spaced pieces with a length or
/// chunked, are answered (io_uring stopped receiving at 64 KiB of input and never did).
fn bodies_arriving_in_spaced_pieces_are_answered(binary: &str) {
    let limit = 1024 * 1024;
    let no_database = [("PGHOST", "/nonexistent-gnosis-test-database".to_string())];
    let limit_arg = limit.to_string();
    let mut server = Server::start_with_env(binary, &["--max-body", &limit_arg], &no_database);
    let mut client = server.connect();
    for (len, piece) in [(65536, 4096), (100_000, 8192), (limit, 16384)] {
        let body = padded_body(len);
        let head = format!(
            "POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: {len}\r\n\r\n"
        );
        client.send(head.as_bytes());
        send_spaced(&mut client, body.chunks(piece).map(<[u8]>::to_vec));
        let response = client.response().unwrap();
        assert_eq!(
            (response.status, response.text()),
            (200, "10"),
            "{len} bytes in {piece}-byte pieces"
        );

        client.send(
            b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let chunks = body
            .chunks(piece)
            .map(|chunk| [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat());
        send_spaced(&mut client, chunks.chain([b"0\r\n\r\n".to_vec()]));
        let response = client.response().unwrap();
        assert_eq!(
            (response.status, response.text()),
            (200, "10"),
            "{len} bytes chunked by {piece}"
        );
    }
    still_serving(&mut server);
}

/// Tiny chunks with long extensions: what a connection makes the server hold stays within
/// the body limit plus a constant (the framing past 16 KiB is 413), on 20 connections at
/// once that each send 2 MB of it for a few dozen bytes of body.
fn chunk_extensions_cannot_make_a_body_cost_more_than_its_limit(binary: &str) {
    let mut server = start(binary);
    let rss_before = rss_kib(server.pid());
    let mut extension = b";x=".to_vec();
    extension.resize(1000, b'e');
    let chunk = [&b"1"[..], &extension, b"\r\na\r\n"].concat();
    let flood = chunk.repeat(2 * 1024 * 1024 / chunk.len());
    let mut clients: Vec<Client> = (0..20).map(|_| server.connect()).collect();
    for client in &mut clients {
        let mut stream = client.stream().try_clone().unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let _ = stream.write_all(
            b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        // The server stops taking it once the framing passes the limit.
        let _ = stream.write_all(&flood);
    }
    let grown = rss_kib(server.pid()).saturating_sub(rss_before);
    for client in &mut clients {
        let response = client.response().unwrap();
        assert_eq!(response.status, 413);
        assert!(client.is_closed_by_server(Duration::from_secs(5)));
    }
    assert!(
        grown < 12 * 1024,
        "the server grew by {grown} KiB for 20 clients"
    );
    still_serving(&mut server);
}

/// `close` wins over `keep-alive` in the same header or in two, in HTTP/1.1 and 1.0:
/// answered, then closed.
fn connection_close_wins_over_keep_alive(binary: &str) {
    let server = start(binary);
    for version in ["1.1", "1.0"] {
        for connection in [
            "close, keep-alive",
            "keep-alive, close",
            "close\r\nConnection: keep-alive",
        ] {
            let mut client = server.connect();
            client.send(
                format!(
                    "GET /plaintext HTTP/{version}\r\nHost: a\r\nConnection: {connection}\r\n\r\n"
                )
                .as_bytes(),
            );
            let response = client.response().unwrap();
            assert_eq!(response.status, 200);
            assert_ne!(response.header("connection"), Some("keep-alive"));
            assert!(
                client.is_closed_by_server(Duration::from_secs(3)),
                "HTTP/{version} {connection}"
            );
        }
    }
}

/// With `--max-conns 20` on two threads, a burst of 300 connections is served 40 at a time:
/// the others wait unanswered (epoll: in the backlog; io_uring: accepted before its accept's
/// cancel landed, held unserved), and are served as the first ones close.
fn the_connection_cap_holds_under_a_burst(binary: &str) {
    let no_database = [("PGHOST", "/nonexistent-gnosis-test-database".to_string())];
    let server = Server::start_with_env(
        binary,
        &["--threads", "2", "--max-conns", "20"],
        &no_database,
    );
    crate::common::raise_open_files_limit(1024);
    let mut clients: Vec<Client> = (0..300).map(|_| server.connect()).collect();
    for client in &mut clients {
        client.send(get_request("/plaintext").as_bytes());
    }
    // Who is answered within a second and a half: at most the cap.
    let answered = |clients: &mut Vec<Client>| -> Vec<usize> {
        let deadline = Instant::now() + Duration::from_millis(1500);
        let mut answered = Vec::new();
        for (index, client) in clients.iter_mut().enumerate() {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            client.stream().set_read_timeout(Some(left)).unwrap();
            if client.response().is_ok() {
                answered.push(index);
            }
        }
        answered
    };
    let first = answered(&mut clients);
    assert!(
        !first.is_empty() && first.len() <= 40,
        "{} of a burst of 300 served at a cap of 2 x 20",
        first.len()
    );
    // The first ones leave: others are served in their place, still within the cap.
    for index in first.into_iter().rev() {
        drop(clients.remove(index));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let second = answered(&mut clients);
    assert!(
        !second.is_empty() && second.len() <= 40,
        "{} served after the first left",
        second.len()
    );
}

test_both_binaries! {
    gnosis, gnosis_uring;
    bad_framing_and_bad_bytes_get_4xx_and_close,
    oversized_request_lines_and_heads,
    unknown_methods_are_405_and_keep_the_connection,
    bare_lf_line_ends_are_understood,
    a_slow_client_is_cut_off_and_others_are_not_affected,
    a_client_that_does_not_read_is_not_buffered_without_bound,
    many_clients_vanishing_mid_request_leave_nothing_behind,
    fresh_connections_after_error_closes_are_all_answered,
    bodies_arriving_in_spaced_pieces_are_answered,
    chunk_extensions_cannot_make_a_body_cost_more_than_its_limit,
    connection_close_wins_over_keep_alive,
    the_connection_cap_holds_under_a_burst,
}
