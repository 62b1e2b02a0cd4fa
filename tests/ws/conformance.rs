//! Autobahn's case groups that apply to an echo server (its numbering in brackets), driven
//! by tungstenite, an independent client, where it can send the case; the protocol
//! violations it refuses to send go over a raw socket.

use std::net::TcpStream;

use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::CloseFrame;
use tungstenite::{Message, WebSocket};

use super::common::Server;
use super::{connect, masked, Raw};

fn echo(socket: &mut WebSocket<TcpStream>, message: Message) {
    socket.send(message.clone()).unwrap();
    assert_eq!(socket.read().unwrap(), message);
}

fn binary(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 255) as u8).collect()
}

/// The close handshake from the client's side: the server answers with `code`, then
/// closes the connection.
fn closes_with(socket: &mut WebSocket<TcpStream>, code: u16) {
    loop {
        match socket.read() {
            Ok(Message::Close(Some(frame))) => {
                assert_eq!(u16::from(frame.code), code);
                break;
            }
            Ok(Message::Close(None)) => panic!("a close without a code"),
            Ok(_) => {}
            Err(error) => panic!("no close frame: {error}"),
        }
    }
    // tungstenite ends once the server has closed the TCP connection.
    match socket.read() {
        Err(tungstenite::Error::ConnectionClosed) => {}
        Err(error) => panic!("{error}"),
        Ok(message) => panic!("after the close: {message:?}"),
    }
}

/// [1] Framing: text and binary messages of every length encoding, echoed with their
/// opcode; [2] pings answered with their payload, unsolicited pongs ignored.
fn framing_and_pings(binary_path: &str) {
    let server = Server::start(binary_path, &[]);
    let mut socket = connect(server.port);
    for len in [0, 1, 125, 126, 127, 128, 65_535, 65_536, 500_000] {
        let text: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        echo(&mut socket, Message::text(text));
        echo(&mut socket, Message::binary(binary(len)));
    }
    for payload in [&b""[..], b"ping", &[0xfe; 125]] {
        socket.send(Message::Ping(payload.to_vec().into())).unwrap();
        assert_eq!(
            socket.read().unwrap(),
            Message::Pong(payload.to_vec().into())
        );
    }
    socket
        .send(Message::Pong(b"unsolicited".to_vec().into()))
        .unwrap();
    for n in 0..10u8 {
        socket.send(Message::Ping(vec![n].into())).unwrap();
    }
    for n in 0..10u8 {
        assert_eq!(socket.read().unwrap(), Message::Pong(vec![n].into()));
    }
    echo(&mut socket, Message::text("after the pings"));
    // A burst, echoed in order.
    for n in 0..100 {
        socket.write(Message::text(format!("burst {n}"))).unwrap();
    }
    socket.flush().unwrap();
    for n in 0..100 {
        assert_eq!(socket.read().unwrap(), Message::text(format!("burst {n}")));
    }
    socket.close(None).unwrap();
    closes_with(&mut socket, 1000);
}

/// [5] Fragmentation: messages in fragments, with pings between them, reassembled and
/// echoed whole; [6] UTF-8 split anywhere across fragments.
fn fragmentation_and_utf8(binary_path: &str) {
    let server = Server::start(binary_path, &[]);
    let mut socket = connect(server.port);
    let text = "Hello-µ@ßöäüàá-UTF-8!! κόσμε 𝄞 €";
    let bytes = text.as_bytes();
    for cut in 0..bytes.len() {
        let (a, b) = bytes.split_at(cut);
        let frames = [
            Frame::message(a.to_vec(), OpCode::Data(Data::Text), false),
            Frame::ping(b"between".to_vec()),
            Frame::message(b.to_vec(), OpCode::Data(Data::Continue), true),
        ];
        for frame in frames {
            socket.write(Message::Frame(frame)).unwrap();
        }
        socket.flush().unwrap();
        assert_eq!(
            socket.read().unwrap(),
            Message::Pong(b"between".to_vec().into())
        );
        assert_eq!(socket.read().unwrap(), Message::text(text), "cut at {cut}");
    }
    // A binary message in 100 fragments, some empty.
    let data = binary(10_000);
    let mut pieces = data.chunks(100).peekable();
    let mut first = true;
    while let Some(piece) = pieces.next() {
        let opcode = match first {
            true => OpCode::Data(Data::Binary),
            false => OpCode::Data(Data::Continue),
        };
        first = false;
        let empty = Frame::message(Vec::new(), OpCode::Data(Data::Continue), false);
        let frame = Frame::message(piece.to_vec(), opcode, pieces.peek().is_none());
        socket.write(Message::Frame(frame)).unwrap();
        if pieces.peek().is_some() {
            socket.write(Message::Frame(empty)).unwrap();
        }
    }
    socket.flush().unwrap();
    assert_eq!(socket.read().unwrap(), Message::binary(data));
    socket.close(None).unwrap();
    closes_with(&mut socket, 1000);
}

/// [7] The close handshake: every code a peer may send comes back, with a reason; then the
/// TCP connection closes. Nothing after a close is answered.
fn close_handshake(binary_path: &str) {
    let server = Server::start(binary_path, &[]);
    for code in [
        1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
    ] {
        let mut socket = connect(server.port);
        echo(&mut socket, Message::text("before"));
        let frame = CloseFrame {
            code: code.into(),
            reason: "a reason".into(),
        };
        socket.close(Some(frame)).unwrap();
        closes_with(&mut socket, code);
    }
    // An empty close is answered 1000; a message after a close gets no echo.
    let mut raw = Raw::upgraded(server.port);
    raw.send(&[masked(0x88, b""), masked(0x81, b"after")].concat());
    assert_eq!(raw.close_code(), 1000);
}

/// What breaks the protocol, each after a good message (echoed) on its own connection:
/// the close code, and the connection closed. [3] reserved bits, [4] reserved opcodes,
/// [5] fragmentation errors, [6] invalid UTF-8 (whole, fragmented, in a close reason),
/// [7] bad close payloads, unmasked frames, long or fragmented control frames.
fn protocol_errors_close_with_their_code(binary_path: &str) {
    let server = Server::start(binary_path, &[]);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("RSV1", masked(0xC1, b"x"), 1002),
        ("RSV2", masked(0xA1, b"x"), 1002),
        ("RSV3 on a ping", masked(0x99, b"x"), 1002),
        ("opcode 3", masked(0x83, b""), 1002),
        ("opcode 7", masked(0x87, b""), 1002),
        ("opcode 11", masked(0x8B, b""), 1002),
        ("opcode 15", masked(0x8F, b""), 1002),
        ("unmasked", vec![0x81, 0x01, b'x'], 1002),
        ("continuation first", masked(0x80, b"x"), 1002),
        (
            "text inside text",
            [masked(0x01, b"a"), masked(0x81, b"b")].concat(),
            1002,
        ),
        ("fragmented ping", masked(0x09, b"x"), 1002),
        ("126-byte ping", masked(0x89, &[0; 126]), 1002),
        ("close of one byte", masked(0x88, &[3]), 1002),
        ("close 1005", masked(0x88, &1005u16.to_be_bytes()), 1002),
        ("close 1006", masked(0x88, &1006u16.to_be_bytes()), 1002),
        ("close 999", masked(0x88, &999u16.to_be_bytes()), 1002),
        ("close 2000", masked(0x88, &2000u16.to_be_bytes()), 1002),
        ("close 5000", masked(0x88, &5000u16.to_be_bytes()), 1002),
        (
            "a surrogate in text",
            masked(0x81, b"\xce\xba\xed\xa0\x80"),
            1007,
        ),
        (
            "invalid text in fragments",
            [masked(0x01, b"\xf4\x90"), masked(0x80, b"\x80\x80")].concat(),
            1007,
        ),
        (
            "text ending mid-character",
            [masked(0x01, b"\xe2\x82"), masked(0x80, b"")].concat(),
            1007,
        ),
        ("invalid close reason", masked(0x88, b"\x03\xe8\xff"), 1007),
    ];
    for (case, frames, code) in cases {
        let mut raw = Raw::upgraded(server.port);
        raw.send(&masked(0x82, b"good"));
        assert_eq!(raw.frame().unwrap(), (0x82, b"good".to_vec()), "{case}");
        raw.send(&frames);
        assert_eq!(raw.close_code(), code, "{case}");
    }
}

/// [9]-like limits: a message of exactly `--max-message` bytes is echoed, one byte more
/// (in one frame, or in fragments) closes with 1009.
fn the_message_limit(binary_path: &str) {
    let server = Server::start(binary_path, &["--max-message", "4096"]);
    let mut socket = connect(server.port);
    echo(&mut socket, Message::binary(binary(4096)));
    socket.send(Message::binary(binary(4097))).unwrap();
    closes_with(&mut socket, 1009);

    let mut socket = connect(server.port);
    let first = Frame::message(binary(1024), OpCode::Data(Data::Binary), false);
    socket.write(Message::Frame(first)).unwrap();
    for _ in 0..3 {
        let frame = Frame::message(binary(1024), OpCode::Data(Data::Continue), false);
        socket.write(Message::Frame(frame)).unwrap();
    }
    let last = Frame::message(binary(1), OpCode::Data(Data::Continue), true);
    socket.write(Message::Frame(last)).unwrap();
    socket.flush().unwrap();
    closes_with(&mut socket, 1009);
}

test_both_binaries!(gnosis, gnosis_uring;
    framing_and_pings,
    fragmentation_and_utf8,
    close_handshake,
    protocol_errors_close_with_their_code,
    the_message_limit,
);
