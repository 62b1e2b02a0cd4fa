//! HTTP/2 spoken frame by frame, as a hostile or unusual client would (issue #43): a raw
//! client, the frames it writes, and an uploader that sends request bodies within the
//! windows the server gives.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const NO_ERROR: u32 = 0x0;
pub const REFUSED_STREAM: u32 = 0x7;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// Far above every deadline these tests set or wait for (1 s, and the request timeout of
/// 10 s): only a server that never ends the connection reaches it.
pub const GENEROUS: Duration = Duration::from_secs(40);

pub trait Socket: Read + Write + Send {}
impl<T: Read + Write + Send> Socket for T {}

pub struct Frame {
    pub kind: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// A GOAWAY's last stream and error code, an RST_STREAM's code in the second place.
    pub fn words(&self) -> (u32, u32) {
        let word = |at: usize| {
            let bytes = self.payload.get(at..at + 4).unwrap_or(&[0; 4]);
            u32::from_be_bytes(bytes.try_into().unwrap()) & 0x7fff_ffff
        };
        match self.kind {
            RST_STREAM => (self.stream, word(0)),
            _ => (word(0), word(4)),
        }
    }
}

/// What ended a connection, as the client saw it.
#[derive(Debug, PartialEq)]
pub enum End {
    /// The server closed it (EOF or reset); the GOAWAY it sent first, if it sent one, as
    /// (last stream, error code).
    Closed { goaway: Option<(u32, u32)> },
    /// The stream was reset, with this code.
    Reset(u32, u32),
}

/// What one wait for the server gave.
enum Polled {
    Frame(Frame),
    Closed,
    /// Nothing whole within the wait.
    Quiet,
}

/// A client speaking HTTP/2 frame by frame, its preface and SETTINGS sent.
pub struct RawClient {
    socket: Box<dyn Socket>,
    input: Vec<u8>,
}

impl RawClient {
    pub fn h2c(port: u16, settings: &[(u16, u32)]) -> RawClient {
        RawClient::start(Box::new(connect(port)), settings)
    }

    /// Over TLS, ALPN `h2`.
    pub fn tls(port: u16, settings: &[(u16, u32)]) -> RawClient {
        let config = super::tls::tls13(&[b"h2"]);
        let name = ServerName::try_from("localhost").unwrap();
        let session = ClientConnection::new(config, name).unwrap();
        let stream = StreamOwned::new(session, connect(port));
        RawClient::start(Box::new(stream), settings)
    }

    pub fn start(socket: Box<dyn Socket>, settings: &[(u16, u32)]) -> RawClient {
        let mut client = RawClient {
            socket,
            input: Vec::new(),
        };
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        preface.extend(frame(SETTINGS, 0, 0, &payload));
        client.send(&preface);
        client
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.socket.write_all(bytes).unwrap();
        self.socket.flush().unwrap();
    }

    /// The next frame, or `None` once the server closed the connection. Panics past
    /// `deadline`.
    pub fn next(&mut self, deadline: Instant) -> Option<Frame> {
        loop {
            match self.poll(deadline) {
                Polled::Frame(frame) => return Some(frame),
                Polled::Closed => return None,
                Polled::Quiet => {}
            }
        }
    }

    /// The next frame, the close, or nothing within one read's wait (100 ms). Panics past
    /// `deadline`.
    fn poll(&mut self, deadline: Instant) -> Polled {
        if self.input.len() >= 9 {
            let len = u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]]);
            let end = 9 + len as usize;
            if self.input.len() >= end {
                let head: Vec<u8> = self.input.drain(..end).collect();
                let stream = u32::from_be_bytes(head[5..9].try_into().unwrap());
                return Polled::Frame(Frame {
                    kind: head[3],
                    stream: stream & 0x7fff_ffff,
                    payload: head[9..].to_vec(),
                });
            }
        }
        assert!(Instant::now() < deadline, "the server never ended it");
        let mut buf = [0; 16 * 1024];
        match self.socket.read(&mut buf) {
            Ok(0) => Polled::Closed,
            Ok(n) => {
                self.input.extend_from_slice(&buf[..n]);
                Polled::Quiet
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Polled::Quiet
            }
            Err(_) => Polled::Closed,
        }
    }

    /// Reads until the server closes the connection or resets `stream`, sending `every`
    /// (if any) each half second meanwhile; answers its PINGs' ACKs with nothing.
    pub fn until_ended(&mut self, stream: u32, every: Option<&dyn Fn() -> Vec<u8>>) -> End {
        let deadline = Instant::now() + GENEROUS;
        let mut goaway = None;
        let mut next_send = Instant::now();
        loop {
            if let Some(make) = every {
                if Instant::now() >= next_send && goaway.is_none() {
                    // The server may close first: what it does not take is no matter.
                    let _ = self.socket.write_all(&make());
                    let _ = self.socket.flush();
                    next_send += Duration::from_millis(500);
                }
            }
            // Not `next`, which would wait for a frame that the server may send only once
            // `every` is sent again.
            let frame = match self.poll(deadline) {
                Polled::Frame(frame) => frame,
                Polled::Closed => return End::Closed { goaway },
                Polled::Quiet => continue,
            };
            match frame.kind {
                GOAWAY => goaway = Some(frame.words()),
                RST_STREAM if frame.stream == stream => {
                    let (stream, code) = frame.words();
                    return End::Reset(stream, code);
                }
                _ => {}
            }
        }
    }

    /// The frames up to the first on `stream` of `kind`.
    pub fn until(&mut self, stream: u32, kind: u8) -> Frame {
        let deadline = Instant::now() + GENEROUS;
        loop {
            let frame = self.next(deadline).expect("the connection ended early");
            if (frame.stream, frame.kind) == (stream, kind) {
                return frame;
            }
        }
    }
}

/// A socket to the server whose reads wait 100 ms at most, for the client to look at its
/// deadline and its clock between them.
pub fn connect(port: u16) -> TcpStream {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    tcp
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    bytes.extend_from_slice(&[kind, flags]);
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A header block of literal fields, never indexed (RFC 7541, 6.2.3), names and values
/// under 127 bytes.
pub fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x10);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

pub fn get(path: &str) -> Vec<u8> {
    get_on(1, path)
}

/// A GET of `path` on `stream`.
pub fn get_on(stream: u32, path: &str) -> Vec<u8> {
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", path),
    ];
    frame(HEADERS, END_HEADERS | END_STREAM, stream, &block(&fields))
}

pub fn ping() -> Vec<u8> {
    frame(PING, 0, 0, &[7; 8])
}

/// The `:status` of an answer's HEADERS.
pub fn status(headers: &Frame) -> String {
    let mut decoder = loona_hpack::Decoder::new();
    let fields = decoder.decode(&headers.payload).unwrap();
    let (_, value) = fields
        .into_iter()
        .find(|(name, _)| name == b":status")
        .unwrap();
    String::from_utf8(value).unwrap()
}

/// What the server made of one upload.
pub struct Upload {
    pub stream: u32,
    /// Body bytes still to send, and whether they are all of it (the last ends the
    /// stream).
    left: usize,
    whole: bool,
    /// What the server lets the client send on the stream.
    window: i64,
    /// The answer's `:status`, its DATA bytes, and whether they ended the stream.
    pub status: Option<String>,
    pub received: usize,
    pub answered: bool,
    /// The code of the server's RST_STREAM.
    pub reset: Option<u32>,
}

/// `POST /echo` bodies sent on one h2c connection round-robin, in DATA of at most 16 KiB,
/// within the windows the server gives; the client's own windows are opened wide at once,
/// so that no answer waits for them.
pub struct Uploads {
    socket: TcpStream,
    input: Vec<u8>,
    /// What the server lets the client send on the connection, and its initial stream
    /// window.
    window: i64,
    initial_window: i64,
    pub uploads: Vec<Upload>,
    /// The server's GOAWAY, or its close.
    pub ended: bool,
    sent: usize,
}

impl Uploads {
    /// Opens the connection and one stream per entry of `lengths`, each a POST saying
    /// `content-length` and sending `sent` of it.
    pub fn start(port: u16, lengths: &[(usize, usize)]) -> Uploads {
        let socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
        socket.set_nonblocking(true).unwrap();
        let mut uploads = Uploads {
            socket,
            input: Vec::new(),
            window: 65_535,
            initial_window: 65_535,
            uploads: Vec::new(),
            ended: false,
            sent: 0,
        };
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let wide = 0x7fff_ffff_u32;
        let mut settings = SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
        settings.extend_from_slice(&wide.to_be_bytes());
        out.extend(frame(SETTINGS, 0, 0, &settings));
        out.extend(frame(WINDOW_UPDATE, 0, 0, &(wide - 65_535).to_be_bytes()));
        for (n, (length, sent)) in lengths.iter().enumerate() {
            let stream = 2 * n as u32 + 1;
            let whole = sent == length;
            let length = length.to_string();
            let fields = [
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "localhost"),
                (":path", "/echo"),
                ("content-length", length.as_str()),
            ];
            out.extend(frame(HEADERS, END_HEADERS, stream, &block(&fields)));
            uploads.uploads.push(Upload {
                stream,
                left: *sent,
                whole,
                window: 65_535,
                status: None,
                received: 0,
                answered: false,
                reset: None,
            });
        }
        uploads.write(&out);
        uploads
    }

    /// Reads what the server sent and sends what its windows allow; returns whether
    /// anything moved either way.
    pub fn pump(&mut self) -> bool {
        let mut moved = self.read();
        let mut out = Vec::new();
        for upload in &mut self.uploads {
            if upload.reset.is_some() || upload.answered {
                continue;
            }
            let len = upload
                .left
                .min(16 * 1024)
                .min(self.window.max(0) as usize)
                .min(upload.window.max(0) as usize);
            if len == 0 {
                continue;
            }
            upload.left -= len;
            upload.window -= len as i64;
            self.window -= len as i64;
            self.sent += len;
            // The last byte of a body that is sent whole ends its stream.
            let end = match upload.left == 0 && upload.whole {
                true => END_STREAM,
                false => 0,
            };
            out.extend(frame(DATA, end, upload.stream, &vec![b'x'; len]));
        }
        moved |= !out.is_empty();
        self.write(&out);
        moved
    }

    /// Reads every whole frame the server sent, and acts on it.
    fn read(&mut self) -> bool {
        let mut buf = [0; 64 * 1024];
        let mut moved = false;
        loop {
            match self.socket.read(&mut buf) {
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => self.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.ended = true;
                    break;
                }
            }
        }
        while self.input.len() >= 9 {
            let len = u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]]);
            let end = 9 + len as usize;
            if self.input.len() < end {
                break;
            }
            let head: Vec<u8> = self.input.drain(..end).collect();
            let stream = u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff;
            let frame = Frame {
                kind: head[3],
                stream,
                payload: head[9..].to_vec(),
            };
            moved = true;
            self.on_frame(&frame, head[4]);
        }
        moved
    }

    fn on_frame(&mut self, frame: &Frame, flags: u8) {
        let word = |at: usize| {
            let bytes: [u8; 4] = frame.payload[at..at + 4].try_into().unwrap();
            u32::from_be_bytes(bytes) & 0x7fff_ffff
        };
        if frame.kind == SETTINGS && flags & 0x1 == 0 {
            for entry in frame.payload.chunks(6) {
                if u16::from_be_bytes([entry[0], entry[1]]) == SETTINGS_INITIAL_WINDOW_SIZE {
                    let value = u32::from_be_bytes(entry[2..6].try_into().unwrap()) as i64;
                    for upload in &mut self.uploads {
                        upload.window += value - self.initial_window;
                    }
                    self.initial_window = value;
                }
            }
            self.write(&frame_ack());
            return;
        }
        if frame.kind == GOAWAY {
            self.ended = true;
        }
        if frame.kind == WINDOW_UPDATE && frame.stream == 0 {
            self.window += word(0) as i64;
        }
        let Some(upload) = self.uploads.iter_mut().find(|u| u.stream == frame.stream) else {
            return;
        };
        match frame.kind {
            WINDOW_UPDATE => upload.window += word(0) as i64,
            HEADERS => upload.status = Some(status(frame)),
            DATA => {
                upload.received += frame.payload.len();
                upload.answered |= flags & END_STREAM != 0;
            }
            RST_STREAM => upload.reset = Some(word(0)),
            _ => {}
        }
    }

    fn write(&mut self, mut bytes: &[u8]) {
        let deadline = Instant::now() + GENEROUS;
        while !bytes.is_empty() && !self.ended {
            match self.socket.write(bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "the server stopped reading");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => self.ended = true,
            }
        }
    }

    /// The body bytes sent on every stream.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Whether every upload was answered whole or reset, or the connection ended.
    pub fn settled(&self) -> bool {
        self.ended || self.uploads.iter().all(|u| u.answered || u.reset.is_some())
    }
}

fn frame_ack() -> Vec<u8> {
    frame(SETTINGS, 0x1, 0, &[])
}
