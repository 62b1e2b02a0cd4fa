//! Broken and hostile clients over raw sockets: each is bounded in memory and time, closed
//! with the right code, and the other connections are served meanwhile.

use std::io::Write;
use std::time::Duration;

use tungstenite::Message;

use super::common::Server;
use super::{connect, masked, Raw};

/// Another client's echo works.
fn others_are_served(port: u16) {
    let mut socket = connect(port);
    socket.send(Message::text("still here")).unwrap();
    assert_eq!(socket.read().unwrap(), Message::text("still here"));
}

/// A frame announcing 2^62 bytes is refused from its header (1009), before any of it
/// arrives; one announcing 2^63 breaks the protocol (1002).
fn a_huge_announced_length_is_refused_at_once(binary: &str) {
    let server = Server::start(binary, &[]);
    for (len, code) in [(1u64 << 62, 1009), (1 << 63, 1002)] {
        let mut raw = Raw::upgraded(server.port);
        let mut header = vec![0x82, 0x80 | 127];
        header.extend_from_slice(&len.to_be_bytes());
        header.extend_from_slice(&[1, 2, 3, 4]);
        raw.send(&header);
        assert_eq!(raw.close_code(), code);
    }
    others_are_served(server.port);
}

/// Writes `frame` again and again, without reading, until the server stops taking them (a
/// write blocks for 2 s) or `most` bytes are written; returns how many were.
fn flood(raw: &mut Raw, frame: &[u8], most: usize) -> usize {
    let stream = raw.reader.get_mut();
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let batch = frame.repeat(64 * 1024 / frame.len());
    let mut written = 0;
    while written < most {
        match stream.write(&batch) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    written
}

/// Pings, or messages, sent without ever reading the answers: the server stops reading
/// once its output holds its high-water mark, so the flood stalls far short of what was
/// meant (what is in flight is the kernel's buffers, a few MiB), and the others are served.
fn a_client_that_never_reads_stops_being_read(binary: &str) {
    let server = Server::start(binary, &[]);
    let most = 256 * 1024 * 1024;
    for frame in [masked(0x89, &[7; 125]), masked(0x82, &[9; 4000])] {
        let mut raw = Raw::upgraded(server.port);
        let written = flood(&mut raw, &frame, most);
        assert!(
            written < most / 4,
            "{written} bytes taken from a client that never reads"
        );
        others_are_served(server.port);
    }
}

/// Continuation frames without end: the message passes the limit and is closed with 1009;
/// empty ones hold nothing and end with the idle timeout like any silent client.
fn endless_continuation_frames_end_at_the_limit(binary: &str) {
    let server = Server::start(binary, &["--max-message", "65536"]);
    let mut raw = Raw::upgraded(server.port);
    let mut frames = masked(0x01, b"start");
    for _ in 0..70 {
        frames.extend(masked(0x00, &[b'a'; 1000]));
    }
    raw.send(&frames);
    assert_eq!(raw.close_code(), 1009);
    others_are_served(server.port);
}

/// A client that sends a close and then neither reads nor closes: the server answers,
/// shuts down writing and closes after a short linger, not at the idle timeout.
fn a_never_finished_close_handshake_is_closed_by_the_server(binary: &str) {
    let server = Server::start(binary, &["--idle-timeout", "600000"]);
    let mut raw = Raw::upgraded(server.port);
    raw.send(&masked(0x88, &1000u16.to_be_bytes()));
    assert_eq!(raw.frame().unwrap(), (0x88, 1000u16.to_be_bytes().to_vec()));
    // The read timeout is 10 s; the linger 2 s.
    assert!(raw.is_closed(), "closed while the client stays silent");
}

/// An idle upgraded connection, and one stalled inside a frame, are closed at the idle
/// timeout.
fn idle_and_stalled_sessions_are_closed_at_the_idle_timeout(binary: &str) {
    let server = Server::start(binary, &["--idle-timeout", "1000"]);
    let mut idle = Raw::upgraded(server.port);
    let mut stalled = Raw::upgraded(server.port);
    stalled.send(&masked(0x81, b"half a frame")[..6]);
    assert!(idle.is_closed());
    assert!(stalled.is_closed());
}

test_both_binaries!(gnosis, gnosis_uring;
    a_huge_announced_length_is_refused_at_once,
    a_client_that_never_reads_stops_being_read,
    endless_continuation_frames_end_at_the_limit,
    a_never_finished_close_handshake_is_closed_by_the_server,
    idle_and_stalled_sessions_are_closed_at_the_idle_timeout,
);
