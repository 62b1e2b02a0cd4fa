//! WebSocket on both binaries over real sockets: the handshake and the upgrade
//! (`handshake`), Autobahn's case groups that apply to an echo server driven by an
//! independent client, tungstenite (`conformance`), and broken and hostile clients over raw
//! sockets (`hostile`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod conformance;
mod handshake;
mod hostile;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tungstenite::{client, WebSocket};

pub const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// The request that upgrades `/ws`, with `extra` header lines.
pub fn upgrade_request(extra: &str) -> String {
    format!(
        "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// A tungstenite client on `/ws`, its handshake done.
pub fn connect(port: u16) -> WebSocket<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let url = format!("ws://127.0.0.1:{port}/ws");
    let (socket, response) = client(url, stream).unwrap();
    assert_eq!(response.status(), 101);
    socket
}

/// A client frame: `first` is FIN, RSV and the opcode; the payload is masked.
pub fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0xa1, 0x5c, 0x07, 0xe2];
    let mut frame = vec![first];
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | len as u8),
        len @ 126..=0xFFFF => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    frame
}

/// A raw client, for what a well-behaved library will not send.
pub struct Raw {
    pub reader: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream),
        }
    }

    /// Connects and sends `request`; returns the client and the response's head.
    pub fn request(port: u16, request: &[u8]) -> (Raw, String) {
        let mut raw = Raw::connect(port);
        raw.send(request);
        let head = raw.head();
        (raw, head)
    }

    /// Connects and upgrades.
    pub fn upgraded(port: u16) -> Raw {
        let (raw, head) = Raw::request(port, upgrade_request("").as_bytes());
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        raw
    }

    /// A response head, up to its empty line.
    pub fn head(&mut self) -> String {
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            if self.reader.read_line(&mut head).unwrap() == 0 {
                panic!("closed within a head: {head:?}");
            }
        }
        head
    }

    /// A response head and its body (framed by Content-Length).
    pub fn response(&mut self) -> (String, Vec<u8>) {
        let head = self.head();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .map_or(0, |length| length.parse().unwrap());
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).unwrap();
        (head, body)
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// One server frame: its first byte and its payload; server frames are never masked.
    pub fn frame(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let mut head = [0; 2];
        self.reader.read_exact(&mut head)?;
        assert_eq!(head[1] & 0x80, 0, "a server frame is not masked");
        let len = match head[1] & 0x7F {
            126 => {
                let mut len = [0; 2];
                self.reader.read_exact(&mut len)?;
                u16::from_be_bytes(len) as usize
            }
            127 => {
                let mut len = [0; 8];
                self.reader.read_exact(&mut len)?;
                u64::from_be_bytes(len) as usize
            }
            len => len as usize,
        };
        let mut payload = vec![0; len];
        self.reader.read_exact(&mut payload)?;
        Ok((head[0], payload))
    }

    /// Reads up to the server's close frame and returns its code; then the server must
    /// close the TCP connection (it lingers for our EOF: we shut down writing).
    pub fn close_code(&mut self) -> u16 {
        let code = loop {
            let (first, payload) = self.frame().expect("a close frame");
            if first == 0x88 {
                assert!(payload.len() >= 2, "a code");
                break u16::from_be_bytes([payload[0], payload[1]]);
            }
        };
        let _ = self.reader.get_ref().shutdown(std::net::Shutdown::Write);
        assert!(
            self.is_closed(),
            "the TCP connection closes after the close frame"
        );
        code
    }

    /// Whether the server closed (EOF or reset) within the read timeout, with nothing
    /// more sent.
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0; 1];
        match self.reader.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) => !matches!(
                error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }
}
