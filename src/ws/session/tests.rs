use super::*;
use std::time::Duration;

const LIMIT: usize = 1000;

/// A client's frame, masked.
fn client(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![first];
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | len as u8),
        len => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    let start = frame.len();
    frame.extend_from_slice(payload);
    frame::unmask(&mut frame[start..], mask);
    frame
}

/// A server's frame.
fn server(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write(&mut out, opcode, payload);
    out
}

fn close(code: u16) -> Vec<u8> {
    server(Opcode::Close, &code.to_be_bytes())
}

/// An echo session fed `chunks` one after another; returns all it sent and whether it is
/// finished.
fn echo(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
    let now = Instant::now();
    let mut buffers = BufferPool::default();
    let mut session = Session::new(0, Vec::new(), SendBuffer::default(), now);
    let mut sent = Vec::new();
    for chunk in chunks {
        session.input(&mut buffers).extend_from_slice(chunk);
        let on_message = |message: Message<'_>, out: &mut Vec<u8>| {
            frame::write(out, message.opcode, message.payload)
        };
        session.process(on_message, LIMIT, now, &mut buffers, usize::MAX);
        sent.extend_from_slice(session.unsent());
        session.mark_sent(session.unsent().len(), now);
        session.give_back_idle(&mut buffers);
    }
    (sent, session.is_finished())
}

#[test]
fn messages_are_echoed_with_their_opcode_in_order_however_the_bytes_are_cut() {
    let stream = [
        client(0x81, b"hello"),
        client(0x82, &[0, 1, 2, 255]),
        client(0x89, b"ping"),
        client(0x01, "κό".as_bytes()),
        client(0x8A, b"unsolicited pong"),
        client(0x00, &"σμε".as_bytes()[..3]),
        client(0x89, b""),
        client(0x80, &"σμε".as_bytes()[3..]),
        client(0x82, &[7; 300]),
        client(0x88, &[0x03, 0xE8, b'b', b'y', b'e']),
    ]
    .concat();
    let expected = [
        server(Opcode::Text, b"hello"),
        server(Opcode::Binary, &[0, 1, 2, 255]),
        server(Opcode::Pong, b"ping"),
        server(Opcode::Pong, b""),
        server(Opcode::Text, "κόσμε".as_bytes()),
        server(Opcode::Binary, &[7; 300]),
        close(1000),
    ]
    .concat();
    assert_eq!(echo(&[&stream]), (expected.clone(), true));
    for cut in 0..stream.len() {
        let (head, tail) = stream.split_at(cut);
        assert_eq!(echo(&[head, tail]).0, expected, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(echo(&bytes).0, expected);
}

/// Each broken stream: what is echoed before it, then the close code it gets; nothing after.
#[test]
fn protocol_errors_close_with_their_code_and_nothing_after_is_read() {
    let hello = client(0x81, b"hi");
    let cases: [(Vec<u8>, u16); 14] = [
        (client(0xC1, b"rsv1"), 1002),
        (client(0x83, b"opcode 3"), 1002),
        (client(0x8B, b"opcode 11"), 1002),
        (vec![0x81, 0x02, b'n', b'o'], 1002),
        (client(0x80, b"nothing to continue"), 1002),
        ([client(0x01, b"a"), client(0x81, b"b")].concat(), 1002),
        (client(0x09, b"fragmented ping"), 1002),
        (client(0x88, &[0x03]), 1002),
        (client(0x88, &1005u16.to_be_bytes()), 1002),
        (client(0x88, &[0x03, 0xE8, 0xFF]), 1007),
        (client(0x81, b"\xCE\xBA\xFF"), 1007),
        ([client(0x01, b"\xCE"), client(0x80, b"")].concat(), 1007),
        (client(0x82, &[0; LIMIT + 1]), 1009),
        (
            [client(0x02, &[0; 600]), client(0x80, &[0; 401])].concat(),
            1009,
        ),
    ];
    for (broken, code) in cases {
        let stream = [&hello[..], &broken, &hello].concat();
        let expected = [server(Opcode::Text, b"hi"), close(code)].concat();
        assert_eq!(echo(&[&stream]), (expected, true), "{broken:x?}");
    }
    // A close with any code a peer may send is answered with that code.
    for code in [1001, 1003, 3000, 4999] {
        let stream = client(0x88, &u16::to_be_bytes(code));
        assert_eq!(echo(&[&stream]), (close(code), true));
    }
    assert_eq!(echo(&[&client(0x88, b"")]), (close(1000), true));
}

#[test]
fn a_client_that_does_not_read_stops_being_read_and_holds_bounded_buffers() {
    let now = Instant::now();
    let mut buffers = BufferPool::default();
    let mut session = Session::new(0, Vec::new(), SendBuffer::default(), now);
    let frame = client(0x82, &[9; 900]);
    let on_message = |message: Message<'_>, out: &mut Vec<u8>| {
        frame::write(out, message.opcode, message.payload)
    };
    let mut fed = 0;
    while session.wants_input() {
        session
            .input(&mut buffers)
            .extend_from_slice(&frame.repeat(10));
        session.process(on_message, LIMIT, now, &mut buffers, usize::MAX);
        fed += 1;
        assert!(fed < 1000, "never stopped reading");
    }
    let unsent = session.unsent().len();
    assert!(
        (OUTPUT_HIGH_WATER..OUTPUT_HIGH_WATER + 1000).contains(&unsent),
        "{unsent}"
    );
    // The output's capacity doubled once past the mark; the input holds the last read.
    let bound = 2 * OUTPUT_HIGH_WATER + 10 * frame.len();
    assert!(session.held() <= bound, "{}", session.held());
    // Frames that arrive anyway (io_uring's receive before its cancel) wait unanswered.
    session.input(&mut buffers).extend_from_slice(&frame);
    session.process(on_message, LIMIT, now, &mut buffers, usize::MAX);
    assert!(session.has_backlog() && session.unsent().len() == unsent);
    // Not read for the send timeout: timed out; drained, it reads again.
    let limits = crate::http::TIMEOUTS;
    assert!(session.timed_out(now + limits.send + Duration::from_secs(1), &limits));
    session.mark_sent(unsent, now);
    assert!(session.has_backlog(), "drained: advance it again");
    session.process(on_message, LIMIT, now, &mut buffers, usize::MAX);
    assert!(session.wants_input());
    assert_eq!(session.unsent(), server(Opcode::Binary, &[9; 900]));
    session.mark_sent(session.unsent().len(), now);
    assert!(!session.has_backlog(), "nothing waits");
}

#[test]
fn an_idle_session_holds_no_buffer_and_times_out() {
    let now = Instant::now();
    let (sent, finished) = echo(&[&client(0x81, b"x")]);
    assert!(!finished && !sent.is_empty());
    let mut buffers = BufferPool::default();
    let mut output = SendBuffer::default();
    output
        .lend(&mut buffers)
        .extend_from_slice(b"HTTP/1.1 101 ...");
    let mut session = Session::new(0, Vec::new(), output, now);
    session.mark_sent(16, now);
    session.give_back_idle(&mut buffers);
    assert_eq!(session.held(), 0);
    let limits = crate::http::TIMEOUTS;
    assert!(!session.timed_out(now + limits.idle / 2, &limits));
    assert!(session.timed_out(now + limits.idle + Duration::from_secs(1), &limits));
}

#[test]
fn the_peer_leaving_without_a_close_finishes_the_session() {
    let now = Instant::now();
    let mut buffers = BufferPool::default();
    let mut session = Session::new(
        0,
        client(0x81, b"last").to_vec(),
        SendBuffer::default(),
        now,
    );
    session.peer_closed();
    let on_message = |message: Message<'_>, out: &mut Vec<u8>| {
        frame::write(out, message.opcode, message.payload)
    };
    session.process(on_message, LIMIT, now, &mut buffers, usize::MAX);
    // What arrived whole is still answered; then it is done, with no close frame.
    assert_eq!(session.unsent(), server(Opcode::Text, b"last"));
    session.mark_sent(session.unsent().len(), now);
    assert!(session.is_finished());
}
