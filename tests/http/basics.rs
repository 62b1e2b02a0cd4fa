//! The HTTP behaviour every server binary shares, over real TCP against the real binary.
//! `test_both_binaries!` (tests/common) runs the whole suite once per binary.

use std::io::{ErrorKind, Read, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::{assert_general_headers, get_request, Client, Server};

fn json_follows_the_spec(binary: &str) {
    let server = Server::start(binary, &[]);
    let response = server.connect().get("/json");
    assert_eq!(response.status, 200);
    assert_general_headers(&response, "application/json");
    assert_eq!(response.text(), r#"{"message":"Hello, World!"}"#);
}

fn plaintext_follows_the_spec(binary: &str) {
    let server = Server::start(binary, &[]);
    let response = server.connect().get("/plaintext");
    assert_eq!(response.status, 200);
    assert_general_headers(&response, "text/plain");
    assert_eq!(response.text(), "Hello, World!");
}

fn sixteen_pipelined_requests_are_answered_in_order(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let targets: Vec<&str> = (0..16)
        .map(|i| match i % 3 {
            0 => "/plaintext",
            1 => "/json",
            _ => "/missing",
        })
        .collect();
    let batch: String = targets.iter().map(|t| get_request(t)).collect();
    client.send(batch.as_bytes());
    for target in targets {
        let response = client.response().unwrap();
        let expected = match target {
            "/plaintext" => (200, "Hello, World!"),
            "/json" => (200, r#"{"message":"Hello, World!"}"#),
            _ => (404, "Not Found"),
        };
        assert_eq!(
            (response.status, response.text()),
            expected,
            "answer to {target}"
        );
    }
}

fn many_pipelined_batches_on_many_connections(binary: &str) {
    let server = Server::start(binary, &[]);
    let batch = get_request("/plaintext").repeat(16);
    let mut clients: Vec<Client> = (0..64).map(|_| server.connect()).collect();
    for _round in 0..20 {
        for client in &mut clients {
            client.send(batch.as_bytes());
        }
        for client in &mut clients {
            for _ in 0..16 {
                assert_eq!(client.response().unwrap().text(), "Hello, World!");
            }
        }
    }
}

fn a_request_split_across_writes_is_reassembled(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let request = get_request("/json");
    for chunk in request.as_bytes().chunks(7) {
        client.send(chunk);
        client.stream().flush().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(client.response().unwrap().status, 200);
    // The connection stays usable afterwards.
    assert_eq!(client.get("/plaintext").text(), "Hello, World!");
}

fn date_changes_within_a_second_and_a_bit(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let first = client.get("/plaintext").header("date").unwrap().to_string();
    std::thread::sleep(Duration::from_millis(1100));
    let second = client.get("/plaintext").header("date").unwrap().to_string();
    assert_ne!(first, second);
}

fn unknown_paths_are_404_and_other_methods_405(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let response = client.get("/nothing-here");
    assert_eq!(response.status, 404);
    assert_general_headers(&response, "text/plain");

    client.send(b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    let response = client.response().unwrap();
    assert_eq!(response.status, 405);
    assert_general_headers(&response, "text/plain");
    assert_eq!(response.header("allow"), Some("GET, HEAD"));
    // The body was consumed, not taken for a request: the connection goes on.
    assert_eq!(client.get("/json").status, 200);

    client.send(b"HEAD /plaintext HTTP/1.1\r\nHost: a\r\n\r\n");
    client.send(get_request("/json").as_bytes());
    // HEAD: the headers of the GET, no body; our reader must not take the next response's
    // bytes for it, so read the raw head and then the next response.
    let head = client.raw_head();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.contains("Content-Length: 13\r\n"));
}

fn garbage_gets_400_and_close_while_others_carry_on(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut bystander = server.connect();
    assert_eq!(bystander.get("/json").status, 200);

    let mut attacker = server.connect();
    attacker.send(b"\x16\x03\x01\x02\x00garbage that is not HTTP\r\n\r\n");
    let response = attacker.response().unwrap();
    assert_eq!(response.status, 400);
    assert_eq!(response.header("connection"), Some("close"));
    assert_general_headers(&response, "text/plain");
    assert!(attacker.is_closed_by_server(Duration::from_secs(3)));

    assert_eq!(bystander.get("/json").status, 200);
}

fn a_valid_request_before_garbage_is_answered_first(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    client.send(
        format!(
            "{}GET / HTTP/1.1\r\nHost: a\r\nBad\x00Header\r\n\r\n",
            get_request("/json")
        )
        .as_bytes(),
    );
    assert_eq!(client.response().unwrap().status, 200);
    assert_eq!(client.response().unwrap().status, 400);
    assert!(client.is_closed_by_server(Duration::from_secs(3)));
}

fn oversized_headers_get_431_and_close(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let request = format!(
        "GET /json HTTP/1.1\r\nHost: a\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    // The server may close before taking every byte; what it answered still arrives.
    let _ = client
        .stream()
        .try_clone()
        .unwrap()
        .write_all(request.as_bytes());
    let response = client.response().unwrap();
    assert_eq!(response.status, 431);
    assert!(client.is_closed_by_server(Duration::from_secs(3)));
}

fn connection_close_and_http10_are_honoured(binary: &str) {
    let server = Server::start(binary, &[]);

    let mut client = server.connect();
    client.send(b"GET /json HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let response = client.response().unwrap();
    assert_eq!(
        (response.status, response.header("connection")),
        (200, Some("close"))
    );
    assert!(client.is_closed_by_server(Duration::from_secs(3)));

    let mut client = server.connect();
    client.send(b"GET /plaintext HTTP/1.0\r\n\r\n");
    assert_eq!(client.response().unwrap().text(), "Hello, World!");
    assert!(client.is_closed_by_server(Duration::from_secs(3)));

    let mut client = server.connect();
    client.send(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let response = client.response().unwrap();
    assert_eq!(response.header("connection"), Some("keep-alive"));
    client.send(b"GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(client.response().unwrap().status, 200);
}

fn a_half_closed_client_still_gets_its_answers(binary: &str) {
    let server = Server::start(binary, &[]);
    let client = server.connect();
    let mut stream = client.stream();
    stream
        .write_all(get_request("/plaintext").repeat(3).as_bytes())
        .unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut everything = String::new();
    stream.read_to_string(&mut everything).unwrap();
    assert_eq!(everything.matches("Hello, World!").count(), 3);
}

/// A client that asks for the close is closed at once, not after a linger for its EOF
/// (RFC 9112 9.6: it may send nothing more): a byte it sends after our FIN is answered
/// with a reset, where a lingering server would read and drop it for 2 s.
fn a_client_that_asks_to_close_is_closed_at_once(binary: &str) {
    let server = Server::start(binary, &[]);
    let client = server.connect();
    let mut stream = client.stream();
    stream
        .write_all(b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.ends_with("Hello, World!"), "{answer}");
    let reset_by = Instant::now() + Duration::from_secs(1);
    let reset = loop {
        if let Err(err) = stream.write_all(b"x") {
            break err;
        }
        assert!(Instant::now() < reset_by, "the server lingered");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        matches!(
            reset.kind(),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ),
        "{reset}"
    );
}

/// Requests pipelined after the one that asks for the close are dropped, and the server
/// lingers rather than close with them unread, which would reset the connection under the
/// answer the client has not read yet.
fn requests_after_a_close_request_do_not_reset_its_answer(binary: &str) {
    let server = Server::start(binary, &[]);
    let client = server.connect();
    let mut stream = client.stream();
    let mut requests = b"GET /plaintext HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_vec();
    // More than one read takes: some is still in the kernel when the answer is out.
    requests.extend_from_slice(get_request("/json").repeat(20_000).as_bytes());
    let mut writer = stream.try_clone().unwrap();
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(&requests);
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    // Read only once the server has had time to close: a reset would drop the answer.
    std::thread::sleep(Duration::from_millis(300));
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.ends_with("Hello, World!"), "{answer}");
    writing.join().unwrap();
}

fn a_thousand_concurrent_keep_alive_connections(binary: &str) {
    let server = Server::start(binary, &[]);
    let mut clients: Vec<Client> = (0..1000).map(|_| server.connect()).collect();
    for round in 0..2 {
        for client in &mut clients {
            client.send(get_request("/json").as_bytes());
        }
        for (i, client) in clients.iter_mut().enumerate() {
            let response = client
                .response()
                .unwrap_or_else(|err| panic!("connection {i}, round {round}: {err}"));
            assert_eq!(response.status, 200);
        }
    }
}

/// A client that writes many pipelined requests before reading any answer: the server
/// stops reading while its unsent output is large, resumes when the client reads, and
/// every answer arrives, in order.
fn a_client_that_reads_late_gets_every_answer(binary: &str) {
    const REQUESTS: usize = 100_000;
    let server = Server::start(binary, &[]);
    let mut client = server.connect();
    let targets = ["/plaintext", "/json"];
    let batch: String = (0..REQUESTS).map(|i| get_request(targets[i % 2])).collect();
    let mut writer = client.stream().try_clone().unwrap();
    let writing = std::thread::spawn(move || writer.write_all(batch.as_bytes()));
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..REQUESTS {
        let response = client
            .response()
            .unwrap_or_else(|err| panic!("response {i}: {err}"));
        let expected = match i % 2 {
            0 => "Hello, World!",
            _ => r#"{"message":"Hello, World!"}"#,
        };
        assert_eq!(
            (response.status, response.text()),
            (200, expected),
            "response {i}"
        );
    }
    writing.join().unwrap().unwrap();
}

/// One huge test at a time: two would need more descriptors than the test process may
/// have, and more ports than the loopback's ephemeral range.
static HUGE_TESTS: Mutex<()> = Mutex::new(());

/// TFB's highest plaintext level: 16,384 connections, each sending 16 pipelined requests
/// in one write, all at once, twice. The second time the server is stopped while the
/// requests arrive, so that it finds all of them waiting at once when it resumes (for
/// gnosis-uring: more receives than it has buffers).
fn sixteen_thousand_connections_with_pipelined_plaintext(binary: &str) {
    const CONNECTIONS: usize = 16_384;
    let _one_at_a_time = HUGE_TESTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Ours, plus room for the tests running beside this one.
    crate::common::raise_open_files_limit(CONNECTIONS as u64 + 3_000);
    // A connection answered early in a round idles until the next while 16,383 others are
    // served: on a loaded machine that may pass the default minute.
    let server = Server::start(binary, &["--idle-timeout", "600000"]);
    assert_eq!(server.connect().get("/plaintext").status, 200);
    let rss_before = crate::common::rss_kib(server.pid());
    let started = Instant::now();
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| server.connect()).collect();
    let batch = get_request("/plaintext").repeat(16);
    for round in 0..2 {
        let stalled = round == 1;
        if stalled {
            server.signal(libc::SIGSTOP);
        }
        for client in &mut clients {
            client.send(batch.as_bytes());
        }
        if stalled {
            server.signal(libc::SIGCONT);
        }
        for (i, client) in clients.iter_mut().enumerate() {
            for n in 0..16 {
                let response = client.response().unwrap_or_else(|err| {
                    panic!("connection {i}, round {round}, response {n}: {err}")
                });
                assert_eq!((response.status, response.text()), (200, "Hello, World!"));
            }
        }
        if round == 0 {
            let per_connection =
                (crate::common::rss_kib(server.pid()) - rss_before) * 1024 / CONNECTIONS as u64;
            eprintln!("{binary}: {per_connection} bytes of RSS per connection");
            // Idle connections hold no buffers: about 0.2 KiB for gnosis (its slot) and
            // 0.7 KiB for gnosis-uring (mostly its receive buffers and spare buffers, a few
            // MiB a thread, whatever the connections). The bound leaves room for the bigger
            // batches of a loaded machine; buffers kept per connection would cost 8 KiB.
            assert!(
                per_connection <= 4 * 1024,
                "{per_connection} bytes per connection"
            );
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "took {:?}",
        started.elapsed()
    );
    // The server closes first, so that the TIME_WAIT states stay on its port rather than
    // on 16,384 of the ephemeral ports the next test needs.
    drop(server);
}

fn a_taken_port_is_a_clear_error(binary: &str) {
    let server = Server::start(binary, &[]);
    let output = std::process::Command::new(binary)
        .args(["--port", &server.port.to_string()])
        .args(crate::common::OtherPorts::free().args())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("in use"), "stderr: {stderr}");
}

/// `--idle-timeout`: a keep-alive connection that sends nothing that long is closed (found by
/// the once-a-second sweep), one that keeps asking is not.
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(binary: &str) {
    let server = Server::start(binary, &["--idle-timeout", "500"]);
    let mut idle = server.connect();
    assert_eq!(idle.get("/plaintext").status, 200);
    let mut busy = server.connect();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert_eq!(busy.get("/plaintext").status, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(idle.is_closed_by_server(Duration::from_secs(5)));
    assert_eq!(busy.get("/plaintext").status, 200);
}

/// A connection waiting for an answer the server owes it (`/delay`) is not idle: with a
/// 1 s idle timeout, a 2.5 s delay is answered, and the connection closes once idle after it.
fn the_idle_timeout_spares_a_connection_owed_an_answer(binary: &str) {
    let server = Server::start(binary, &["--idle-timeout", "1000"]);
    let mut client = server.connect();
    let response = client.get("/delay/2500");
    assert_eq!((response.status, response.text()), (200, "2500"));
    assert!(client.is_closed_by_server(Duration::from_secs(5)));
}

fn help_and_bad_arguments(binary: &str) {
    let help = std::process::Command::new(binary)
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--port"));
    let bad = std::process::Command::new(binary)
        .args(["--threads", "none"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--threads"));
}

/// An answer larger than the output's high-water mark stops the connection's reading while it
/// is sent; once it is all sent the connection reads again, with nothing queued behind it to
/// wake it (epoll kept watching the socket for neither reading nor writing: the next request
/// waited for the idle timeout).
fn a_connection_reads_again_after_an_answer_over_the_high_water_mark(binary: &str) {
    let server = Server::start(binary, &["--max-body", "2000000"]);
    let mut client = server.connect();
    let body: Vec<u8> = (0..600_000).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    client.send(&[head.as_bytes(), &body].concat());
    let echoed = client.response().unwrap();
    assert_eq!((echoed.status, echoed.body.len()), (200, body.len()));
    assert!(echoed.body == body, "the body echoed byte for byte");
    let next = client.get("/plaintext");
    assert_eq!((next.status, next.text()), (200, "Hello, World!"));
}

test_both_binaries! {
    gnosis, gnosis_uring;
    json_follows_the_spec,
    a_client_that_asks_to_close_is_closed_at_once,
    requests_after_a_close_request_do_not_reset_its_answer,
    a_connection_reads_again_after_an_answer_over_the_high_water_mark,
    an_idle_keep_alive_connection_is_closed_after_the_idle_timeout,
    the_idle_timeout_spares_a_connection_owed_an_answer,
    plaintext_follows_the_spec,
    sixteen_pipelined_requests_are_answered_in_order,
    many_pipelined_batches_on_many_connections,
    a_request_split_across_writes_is_reassembled,
    date_changes_within_a_second_and_a_bit,
    unknown_paths_are_404_and_other_methods_405,
    garbage_gets_400_and_close_while_others_carry_on,
    a_valid_request_before_garbage_is_answered_first,
    oversized_headers_get_431_and_close,
    connection_close_and_http10_are_honoured,
    a_half_closed_client_still_gets_its_answers,
    a_thousand_concurrent_keep_alive_connections,
    a_client_that_reads_late_gets_every_answer,
    sixteen_thousand_connections_with_pipelined_plaintext,
    a_taken_port_is_a_clear_error,
    help_and_bad_arguments,
}
