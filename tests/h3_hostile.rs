//! HTTP/3 against hostile clients, over real sockets on both binaries: raw datagrams (garbage,
//! an unknown version, packets for no connection), aioquic pushed past the server's stream
//! limits and into HTTP/3's errors (`tests/h3/hostile.py`), a flood of handshakes never
//! completed; the memory an idle connection holds (`tests/h3/idle_memory.py`); and a second
//! real client, ngtcp2's gtlsclient (GnuTLS), beside aioquic.

#[macro_use]
#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Handshakes under way per worker past which the server asks for a Retry (RETRY_ABOVE in
/// src/quic/endpoint.rs); the tests' servers have 2 workers.
const RETRY_ABOVE: u64 = 64;
const WORKERS: u64 = 2;

fn tests_h3(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/h3")
        .join(file)
}

fn name(binary: &str) -> &str {
    Path::new(binary).file_name().unwrap().to_str().unwrap()
}

/// What `python3 tests/h3/<script> args` printed last (a JSON line), once it exited 0.
fn python(server: &common::Server, script: &str, args: &[&str]) -> Value {
    let output = Command::new("python3")
        .arg(tests_h3(script))
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} {args:?} failed: {stdout}\n{}\nserver: {}",
        String::from_utf8_lossy(&output.stderr),
        server.log()
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|err| panic!("{err}: {stdout}"))
}

/// `hostile.py COMMAND PORT args`'s report.
fn hostile(server: &common::Server, command: &str, args: &[&str]) -> Value {
    let port = server.h3_port.to_string();
    let mut all = vec![command, &port];
    all.extend_from_slice(args);
    python(server, "hostile.py", &all)
}

/// The server still serves: a new connection's request is answered; and it never panicked.
fn still_serves(server: &common::Server) {
    let got = hostile(server, "request", &[]);
    assert_eq!(got["answer"]["status"], "200", "{got}");
    assert_eq!(got["answer"]["body"], "42", "{got}");
    assert_no_panic(server);
}

fn assert_no_panic(server: &common::Server) {
    let log = server.log();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}

/// Random bytes, Initials cut short or with a broken payload, short headers too short for an
/// ID or for a reset, long headers of the wrong type or with a 21-byte ID, a Version
/// Negotiation or a Retry sent to the server: no answer to any, and the server serves on.
fn garbage_is_dropped_without_an_answer(binary: &str) {
    let files = common::BigFile::new(&format!("h3-garbage-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = hostile(&server, "garbage", &[]);
    assert!(got["sent"].as_u64().unwrap() >= 60, "{got}");
    assert_eq!(got["answers"], serde_json::json!([]), "{got}");
    still_serves(&server);
}

/// An Initial of an unknown version in a datagram of 1,200 bytes gets a Version
/// Negotiation packet (version 0, the client's IDs swapped, version 1 listed); one of 1,199
/// bytes gets nothing (RFC 9000 5.2.2: a server answering smaller ones would amplify).
fn an_unknown_version_gets_version_negotiation(binary: &str) {
    let files = common::BigFile::new(&format!("h3-version-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = hostile(&server, "version", &[]);
    assert_eq!(got["short_answers"], 0, "{got}");
    assert_eq!(got["answers"], 1, "{got}");
    assert_eq!(got["version"], 0, "{got}");
    assert_ne!(
        got["first"].as_u64().unwrap() & 0x80,
        0,
        "a long header: {got}"
    );
    assert_eq!(got["dcid"], got["sent_scid"], "{got}");
    assert_eq!(got["scid"], got["sent_dcid"], "{got}");
    assert_eq!(got["rest_len"].as_u64().unwrap() % 4, 0, "{got}");
    let versions = got["versions"].as_array().unwrap();
    assert!(versions.contains(&Value::from(1)), "{got}");
    assert!(!versions.contains(&Value::from(0x1a2a3a4b)), "{got}");
    still_serves(&server);
}

/// A stateless reset's shape (RFC 9000 10.3): a short header (bits 01), shorter than its
/// trigger, at least 21 bytes; its token the trigger's ID's.
fn assert_reset(answer: &Value, trigger: u64, token: &Value) {
    let length = answer["length"].as_u64().expect("a reset");
    assert!((21..trigger).contains(&length), "{answer}");
    assert_eq!(answer["first"].as_u64().unwrap() & 0xc0, 0x40, "{answer}");
    assert_eq!(&answer["token"], token, "{answer}");
}

/// Short-header packets for connection IDs of no connection get stateless resets, as
/// quinn-proto sends them: for the IDs of a connection that is gone, with the very tokens
/// the client learned for them while it was open (so it would know the reset); for made-up
/// IDs naming either worker, the same token for the same ID; never for a trigger of 21 bytes
/// or less (a reset would not be smaller), one byte shorter up to 42, never larger; and not
/// one per trigger of a burst (quinn-proto sends at most one per 20 ms).
fn a_packet_for_no_connection_gets_a_stateless_reset(binary: &str) {
    let files = common::BigFile::new(&format!("h3-reset-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = hostile(&server, "reset", &[]);
    assert!(got["learned"].as_u64().unwrap() >= 2, "{got}");
    for gone in got["gone"].as_array().unwrap() {
        assert_reset(&gone["answer"], 100, &gone["learned_token"]);
    }
    let made_up = got["made_up"].as_array().unwrap();
    assert_eq!(made_up.len() as u64, WORKERS, "{got}");
    for worker in made_up {
        let answers = worker["answers"].as_array().unwrap();
        for answer in answers {
            assert_reset(answer, 100, &answers[0]["token"]);
        }
    }
    let first_token = |worker: usize| &made_up[worker]["answers"][0]["token"];
    assert_ne!(first_token(0), first_token(1), "{got}");
    let sizes = &got["sizes"];
    let token = &sizes["22"]["token"];
    assert!(sizes["21"].is_null(), "{got}");
    assert_eq!(sizes["22"]["length"], 21, "{got}");
    assert_eq!(sizes["42"]["length"], 41, "{got}");
    for trigger in [22, 42, 43, 100, 1200] {
        assert_reset(&sizes[trigger.to_string().as_str()], trigger, token);
    }
    // The burst's triggers reach the server within its `ms`: at most one reset per 20 ms of
    // its clock, plus the wake-ups it straddles.
    let burst = &got["burst"];
    let answers = burst["answers"].as_u64().unwrap();
    let bound = 2 + (burst["ms"].as_f64().unwrap() / 20.0) as u64;
    assert!(answers >= 1 && answers <= bound, "{got}");
    still_serves(&server);
}

/// The limits the server advertises (100 request streams, 8 unidirectional ones), and a
/// well-behaved client at them: 150 requests answered after a second each, 100 sent at once
/// and 50 held until the server grants more streams; 300 unidirectional streams of a
/// reserved type, each ended, 5 at a time, then a request answered; the connection stays
/// open.
fn a_client_at_the_stream_limit_gets_every_answer(binary: &str) {
    let files = common::BigFile::new(&format!("h3-streams-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = hostile(&server, "streams", &["many"]);
    assert_eq!(got["limits"]["bidi"], 100, "{got}");
    assert_eq!(got["limits"]["uni"], 8, "{got}");
    assert_eq!(got["sent_at_once"], 100, "{got}");
    assert_eq!(got["held"], 50, "{got}");
    assert_eq!(got["ok"], 150, "{got}");
    assert!(got["closed"].is_null(), "{got}");
    let uni = hostile(&server, "streams", &["uni-many"]);
    assert_eq!(uni["opened"], 303, "{uni}");
    assert_eq!(uni["held"], 0, "{uni}");
    assert_eq!(uni["answer"]["status"], "200", "{uni}");
    assert!(uni["closed"].is_null(), "{uni}");
    assert_no_panic(&server);
}

/// A client that opens one request stream or one unidirectional stream more than the server
/// allows is closed with STREAM_LIMIT_ERROR (0x04); one with all 8 unidirectional streams
/// (its 3 and 5 of reserved types, which the server ignores) is served.
fn a_stream_past_the_limit_closes_with_stream_limit_error(binary: &str) {
    let files = common::BigFile::new(&format!("h3-limit-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let bidi = hostile(&server, "streams", &["bidi"]);
    assert_eq!(bidi["opened"], 101, "{bidi}");
    assert_eq!(bidi["closed"]["error_code"], 0x4, "{bidi}");
    let uni = hostile(&server, "streams", &["uni"]);
    assert_eq!(uni["opened"], 9, "{uni}");
    assert_eq!(uni["closed"]["error_code"], 0x4, "{uni}");
    let within = hostile(&server, "streams", &["uni-within"]);
    assert_eq!(within["opened"], 8, "{within}");
    assert_eq!(within["answer"]["status"], "200", "{within}");
    assert!(within["closed"].is_null(), "{within}");
    still_serves(&server);
}

/// HTTP/3's errors as a client sees them: DATA before HEADERS closes the connection with
/// H3_FRAME_UNEXPECTED (0x105); a request without `:path`, or with an uppercase field name,
/// resets its stream with H3_MESSAGE_ERROR (0x10e) and the connection serves on (the same
/// request with the name in lowercase is answered); a reference to QPACK's dynamic table,
/// which the server never allowed, closes with QPACK_DECOMPRESSION_FAILED (0x200); the
/// client's control stream reset, or the server's stopped, closes with
/// H3_CLOSED_CRITICAL_STREAM (0x104: the server once took it for a request stream's reset,
/// and served on); a client's STOP_SENDING on a request is answered with a reset
/// (H3_REQUEST_CANCELLED, 0x10c) and the connection serves on.
fn http3_errors_reach_the_client(binary: &str) {
    let files = common::BigFile::new(&format!("h3-errors-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let error = |case: &str| hostile(&server, "error", &[case]);
    let data_first = error("data-first");
    assert_eq!(data_first["closed"]["error_code"], 0x105, "{data_first}");
    for case in ["no-path", "uppercase"] {
        let got = error(case);
        assert_eq!(got["stream"]["reset"], 0x10e, "{case}: {got}");
        assert!(got["closed"].is_null(), "{case}: {got}");
        assert_eq!(got["after"]["body"], "42", "{case}: {got}");
        assert!(got["closed_after"].is_null(), "{case}: {got}");
    }
    let lowercase = error("lowercase");
    assert_eq!(lowercase["stream"]["status"], "200", "{lowercase}");
    assert_eq!(lowercase["stream"]["body"], "2", "{lowercase}");
    let dynamic = error("dynamic-qpack");
    assert_eq!(dynamic["closed"]["error_code"], 0x200, "{dynamic}");
    for case in ["reset-control", "stop-control"] {
        let got = error(case);
        assert_eq!(got["closed"]["error_code"], 0x104, "{case}: {got}");
    }
    // The server answers the client's STOP_SENDING with RESET_STREAM, and reads no more of
    // the stream (what came after was once read as a new request: H3_FRAME_UNEXPECTED).
    let stopped = error("stop-then-body");
    assert_eq!(stopped["stream"]["reset"], 0x10c, "{stopped}");
    assert_eq!(stopped["after"]["body"], "42", "{stopped}");
    assert!(stopped["closed_after"].is_null(), "{stopped}");
    still_serves(&server);
}

/// A request whose body is past `--max-body`, sent at once: answered 413 before the body's
/// end, and the rest of the body is no new request: the connection serves on. (The server
/// stops the stream; it once read what followed the answer as a new stream's bytes, a DATA
/// frame first, and closed the connection with H3_FRAME_UNEXPECTED.)
fn a_body_too_large_is_answered_413_and_the_connection_serves_on(binary: &str) {
    let files = common::BigFile::new(&format!("h3-too-large-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &["--max-body", "1000"]);
    let got = hostile(&server, "error", &["too-large"]);
    assert_eq!(got["stream"]["status"], "413", "{got}");
    assert_eq!(got["after"]["body"], "42", "{got}");
    assert!(got["closed_after"].is_null(), "{got}");
    still_serves(&server);
}

/// Requests the client cancels (RFC 9114 4.1.2: the stream reset and stopped) give their
/// streams back: twice 100 requests answered after 5 s, each cancelled once sent, then one
/// answered at once. (The server once left its side of a cancelled stream open, so that
/// the client never got another stream: the second 100 waited for ever.)
fn cancelled_requests_give_their_streams_back(binary: &str) {
    let files = common::BigFile::new(&format!("h3-cancel-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = hostile(&server, "streams", &["cancel-many"]);
    assert_eq!(got["rounds_sent"], serde_json::json!([true, true]), "{got}");
    assert_eq!(got["cancelled"], 200, "{got}");
    assert_eq!(got["answer"]["body"], "2", "{got}");
    assert!(got["closed"].is_null(), "{got}");
    still_serves(&server);
}

/// 2,000 client Initials from 100 source ports, never completed: each is answered, at most
/// 64 of each worker's with a handshake and the others with a Retry (stateless); the
/// server's memory grows by little; a new client is then asked for a Retry too and served
/// at once.
/// The idle timeout is long, so that the handshakes stay under way through the test.
fn unfinished_handshakes_leave_the_server_serving(binary: &str) {
    let files = common::BigFile::new(&format!("h3-flood-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &["--idle-timeout", "600000"]);
    // The worker's first allocations (TLS, buffers) before the measure.
    let _ = hostile(&server, "error", &["lowercase"]);
    let before = common::rss_kib(server.pid());
    let got = hostile(&server, "flood", &["2000"]);
    let after = common::rss_kib(server.pid());
    eprintln!(
        "{}: 2000 unfinished handshakes: VmRSS {before} KiB -> {after} KiB (+{} KiB); {got}",
        name(binary),
        after.saturating_sub(before)
    );
    // Each answered once; at most 64 handshakes per worker, whatever the workers' sharing
    // of new clients (spread.rs: its Retries send a client to the other worker) made of it.
    assert_eq!(got["answered"], 2000, "{got}");
    assert_eq!(got["both"], 0, "{got}");
    let handshakes = got["handshake"].as_u64().unwrap();
    assert!(handshakes <= RETRY_ABOVE * WORKERS, "{got}");
    assert_eq!(got["retry"].as_u64().unwrap(), 2000 - handshakes, "{got}");
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "{before} KiB -> {after} KiB"
    );
    let request = hostile(&server, "request", &[]);
    assert_eq!(request["answer"]["body"], "42", "{request}");
    assert_eq!(request["retried"], 1, "{request}");
    assert_no_panic(&server);
}

/// Idle connections, each after one request, hold well under 64 KiB each (measured near
/// 30 KiB; Caddy holds about 73).
fn an_idle_connection_holds_under_64_kib(binary: &str) {
    let files = common::BigFile::new(&format!("h3-idle-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &["--idle-timeout", "600000"]);
    let (pid, port) = (server.pid().to_string(), server.h3_port.to_string());
    let args = ["--connections", "400", "--pid", &pid, "--port", &port];
    let got = python(&server, "idle_memory.py", &args);
    eprintln!("{}: {got}", name(binary));
    let per = got["kib_per_connection"].as_f64().unwrap();
    assert!(per < 64.0, "{got}");
    assert_no_panic(&server);
}

/// ngtcp2's example client over GnuTLS (Debian's ngtcp2-client), a QUIC and HTTP/3 stack
/// sharing nothing with aioquic or gnosis: a route's answer and a 300 KiB file, both whole.
fn gtlsclient_gets_answers(binary: &str) {
    let found = Command::new("gtlsclient")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        found.is_ok(),
        "gtlsclient is needed: apt-get install ngtcp2-client (scripts/test.sh installs it)"
    );
    let files = common::BigFile::new(&format!("h3-gtls-{}", name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let download = files.dir.join("download");
    std::fs::create_dir_all(&download).unwrap();
    let port = server.h3_port.to_string();
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let mut client = Command::new("gtlsclient")
        .args([
            "--exit-on-all-streams-close",
            "--no-quic-dump",
            "--no-http-dump",
            &format!("--download={}", download.display()),
            "127.0.0.1",
            &port,
            &url("/baseline2?a=40&b=2"),
            &url("/static/big.bin"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gtlsclient runs");
    let stderr = client.stderr.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = client.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = client.kill();
            break client.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = reader.join().unwrap();
    let http: Vec<&str> = log.lines().filter(|l| l.starts_with("http:")).collect();
    let context = format!("{status}\n{}\nserver: {}", http.join("\n"), server.log());
    assert!(status.success(), "{context}");
    for stream in ["0x0", "0x4"] {
        let line = format!("http: stream {stream} [:status: 200]");
        assert!(http.contains(&line.as_str()), "no {line}: {context}");
    }
    let sum = std::fs::read(download.join("baseline2?a=40&b=2")).expect("the sum saved");
    assert_eq!(sum, b"42", "{context}");
    let file = std::fs::read(download.join("big.bin")).expect("the file saved");
    let expected: Vec<u8> = (0..common::BigFile::LEN).map(|i| (i % 251) as u8).collect();
    assert!(file == expected, "{} bytes: {context}", file.len());
    assert_no_panic(&server);
}

test_both_binaries!(
    gnosis,
    gnosis_uring;
    garbage_is_dropped_without_an_answer,
    an_unknown_version_gets_version_negotiation,
    a_packet_for_no_connection_gets_a_stateless_reset,
    a_client_at_the_stream_limit_gets_every_answer,
    a_stream_past_the_limit_closes_with_stream_limit_error,
    http3_errors_reach_the_client,
    a_body_too_large_is_answered_413_and_the_connection_serves_on,
    cancelled_requests_give_their_streams_back,
    unfinished_handshakes_leave_the_server_serving,
    an_idle_connection_holds_under_64_kib,
    gtlsclient_gets_answers,
);
