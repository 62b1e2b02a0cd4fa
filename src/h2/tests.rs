//! The frame codec, HPACK (RFC 7541 Appendix C), each rule of the connection's state
//! machine, and the hostile clients, each against a `Connection` fed bytes as a client
//! would send them.

use std::time::{Duration, Instant};

use super::frame::{self, ErrorCode, Frame, H2Error, Head, HEAD_LEN};
use super::hpack::{self, hex, BlockError, Decoder};
use proptest::prelude::*;

use super::{Connection, Limits, PREFACE};
use crate::http::{
    AcceptEncoding, AltSvc, Answer, Body, BufferPool, Coding, ContentType, Encoding, Expiry,
    FieldLines, HttpDate, Method, Pipe, Status, Timeouts, Wire,
};

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// A frame as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Received {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Received {
    fn code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }
}

fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    frame::write_head(&mut bytes, payload.len(), kind, flags, stream);
    bytes.extend_from_slice(payload);
    bytes
}

/// A client of one `Connection`: it encodes its header blocks and decodes the answers'.
struct Client {
    connection: Connection,
    date: HttpDate,
    buffers: BufferPool,
    encoder: loona_hpack::Encoder<'static>,
    decoder: loona_hpack::Decoder<'static>,
}

impl Client {
    /// A connection past the prefaces: both SETTINGS exchanged and acknowledged.
    fn new(limits: Limits) -> Self {
        Self::with_settings(limits, &[])
    }

    fn with_settings(limits: Limits, settings: &[(u16, u32)]) -> Self {
        let mut client = Self::raw(limits);
        let mut bytes = PREFACE.to_vec();
        frame::write_settings(&mut bytes, settings);
        bytes.extend(raw(SETTINGS, ACK, 0, &[]));
        client.send(&bytes);
        let frames = client.read();
        assert_eq!(frames[0].kind, SETTINGS);
        assert_eq!((frames[1].kind, frames[1].flags), (SETTINGS, ACK));
        client
    }

    fn raw(limits: Limits) -> Self {
        Client {
            connection: Connection::new(limits, Instant::now()),
            date: HttpDate::new(),
            buffers: BufferPool::default(),
            encoder: loona_hpack::Encoder::new(),
            decoder: loona_hpack::Decoder::new(),
        }
    }

    /// Sends bytes as the server core delivers them: into the input, then processed.
    fn send(&mut self, bytes: &[u8]) {
        if self.connection.wants_input() {
            let input = self.connection.input(&mut self.buffers);
            input.extend_from_slice(bytes);
        }
        self.process();
    }

    /// Processes as the server does: one pass, then the passes it is owed.
    fn process(&mut self) {
        let now = Instant::now();
        self.connection
            .process(&self.date, now, &mut self.buffers, usize::MAX);
        while self.connection.has_input_waiting() {
            self.connection
                .process(&self.date, now, &mut self.buffers, usize::MAX);
        }
        self.connection.give_back_idle(&mut self.buffers);
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        self.encoder.encode(
            fields
                .iter()
                .map(|(name, value)| (name.as_bytes(), value.as_bytes())),
        )
    }

    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let block = self.block(fields);
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        raw(HEADERS, flags, stream, &block)
    }

    fn get(&mut self, stream: u32, path: &str) -> Vec<u8> {
        let fields = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "a"),
        ];
        self.headers(stream, &fields, true)
    }

    /// Reads every frame the server has written, as sent.
    fn read(&mut self) -> Vec<Received> {
        let bytes = self.connection.unsent().to_vec();
        self.connection.mark_sent(bytes.len(), Instant::now());
        if self.connection.has_backlog() {
            self.process();
        }
        self.connection.give_back_idle(&mut self.buffers);
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some(head) = Head::read(&bytes[at..]) {
            let payload = bytes[at + HEAD_LEN..at + HEAD_LEN + head.len].to_vec();
            frames.push(Received {
                kind: head.kind,
                flags: head.flags,
                stream: head.stream,
                payload,
            });
            at += HEAD_LEN + head.len;
        }
        assert_eq!(at, bytes.len(), "a partial frame");
        frames
    }

    /// Decodes a header block the server sent.
    fn fields(&mut self, block: &[u8]) -> Vec<(String, String)> {
        let fields = self.decoder.decode(block).expect("a valid block");
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        fields
            .into_iter()
            .map(|(name, value)| (text(name), text(value)))
            .collect()
    }

    /// Answers `stream` with `body` later, as the core does: then it advances the
    /// connection.
    fn answer(&mut self, stream: u32, body: &[u8]) {
        let answer = Answer::ok(ContentType::Plain, body);
        let (date, buffers) = (&self.date, &mut self.buffers);
        self.connection.for_event(|connection| {
            connection.answer(stream, &answer, date, Instant::now(), buffers)
        });
        self.process();
    }

    /// Sends `GET /` on stream 1, takes it and answers it with `body`: what the windows hold
    /// back waits in the connection.
    fn get_answered(&mut self, body: &[u8]) {
        let request = self.get(1, "/");
        self.send(&request);
        self.connection.take_request().unwrap();
        self.answer(1, body);
    }

    /// More of the piped body answering `stream` is in: the core notes it, then advances
    /// the connection.
    fn moved(&mut self, stream: u32) {
        self.connection.moved(stream);
        self.process();
    }

    /// Takes the next request and answers it with its path as the body.
    fn answer_next(&mut self) -> u32 {
        let taken = self.connection.take_request().expect("a request");
        let (stream, path) = (taken.stream, taken.request().path.to_string());
        self.answer(stream, path.as_bytes());
        stream
    }

    /// The error the last frame sent says: GOAWAY's or RST_STREAM's.
    fn error(&mut self) -> (u8, u32, u32) {
        let frames = self.read();
        let last = frames.last().expect("a frame");
        assert!(matches!(last.kind, GOAWAY | RST_STREAM), "{frames:?}");
        let stream = if last.kind == GOAWAY {
            u32::from_be_bytes(last.payload[..4].try_into().unwrap())
        } else {
            last.stream
        };
        (last.kind, stream, last.code())
    }
}

fn goaway(code: ErrorCode) -> (u8, u32) {
    (GOAWAY, code as u32)
}

/// The kind and code of the error, without the stream.
fn kind_code(error: (u8, u32, u32)) -> (u8, u32) {
    (error.0, error.2)
}

// The frame codec.

#[test]
fn frame_heads_are_read_as_written_and_the_reserved_bit_is_ignored() {
    let mut bytes = Vec::new();
    frame::write_head(&mut bytes, 0x12345, HEADERS, 0x25, 7);
    bytes[5] |= 0x80;
    let head = Head::read(&bytes).unwrap();
    assert_eq!(
        (head.len, head.kind, head.flags, head.stream),
        (0x12345, 1, 0x25, 7)
    );
    assert_eq!(Head::read(&bytes[..8]), None);
}

fn parse(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame<'_>, H2Error> {
    let head = Head {
        len: payload.len(),
        kind,
        flags,
        stream,
    };
    frame::parse(&head, payload)
}

#[test]
fn padding_is_removed_and_checked() {
    assert_eq!(
        parse(DATA, PADDED | END_STREAM, 1, b"\x02abcXX"),
        Ok(Frame::Data {
            stream: 1,
            data: b"abc",
            end_stream: true,
            flow_len: 6
        })
    );
    let protocol = Err(H2Error::Connection(ErrorCode::Protocol));
    assert_eq!(parse(DATA, PADDED, 1, b"\x03ab"), protocol);
    assert_eq!(parse(HEADERS, PADDED, 1, b"\x05ab"), protocol);
    // Padding and a priority: the block lies between them.
    let payload = b"\x01\x00\x00\x00\x03\x10blockP";
    match parse(HEADERS, PADDED | 0x20 | END_HEADERS, 1, payload) {
        Ok(Frame::Headers {
            block, priority, ..
        }) => {
            assert_eq!(block, b"block");
            assert_eq!(priority.unwrap().depends_on, 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_frame_type_checks_its_stream_and_size() {
    let connection = |code| Err(H2Error::Connection(code));
    assert_eq!(parse(DATA, 0, 0, b"x"), connection(ErrorCode::Protocol));
    assert_eq!(parse(HEADERS, 0, 0, b""), connection(ErrorCode::Protocol));
    assert_eq!(
        parse(PRIORITY, 0, 0, &[0; 5]),
        connection(ErrorCode::Protocol)
    );
    assert_eq!(
        parse(PRIORITY, 0, 3, &[0; 4]),
        Err(H2Error::Stream(3, ErrorCode::FrameSize))
    );
    assert_eq!(
        parse(RST_STREAM, 0, 1, &[0; 3]),
        connection(ErrorCode::FrameSize)
    );
    assert_eq!(
        parse(RST_STREAM, 0, 0, &[0; 4]),
        connection(ErrorCode::Protocol)
    );
    assert_eq!(parse(SETTINGS, 0, 1, &[]), connection(ErrorCode::Protocol));
    assert_eq!(
        parse(SETTINGS, 0, 0, &[0; 5]),
        connection(ErrorCode::FrameSize)
    );
    assert_eq!(
        parse(SETTINGS, ACK, 0, &[0; 6]),
        connection(ErrorCode::FrameSize)
    );
    assert_eq!(parse(5, 0, 1, &[0; 4]), connection(ErrorCode::Protocol));
    assert_eq!(parse(PING, 0, 0, &[0; 7]), connection(ErrorCode::FrameSize));
    assert_eq!(parse(PING, 0, 1, &[0; 8]), connection(ErrorCode::Protocol));
    assert_eq!(
        parse(GOAWAY, 0, 1, &[0; 8]),
        connection(ErrorCode::Protocol)
    );
    assert_eq!(
        parse(GOAWAY, 0, 0, &[0; 7]),
        connection(ErrorCode::FrameSize)
    );
    assert_eq!(
        parse(WINDOW_UPDATE, 0, 0, &[0; 5]),
        connection(ErrorCode::FrameSize)
    );
    assert_eq!(
        parse(CONTINUATION, 0, 0, b""),
        connection(ErrorCode::Protocol)
    );
    assert_eq!(parse(0xfa, 0xff, 0, b"anything"), Ok(Frame::Unknown));
    assert_eq!(
        parse(WINDOW_UPDATE, 0, 5, &[0x80, 0, 1, 0]),
        Ok(Frame::WindowUpdate {
            stream: 5,
            increment: 256
        })
    );
    let settings = [0, 4, 0, 0, 1, 0, 0, 5, 0, 0, 0x40, 0];
    let Ok(Frame::Settings {
        ack: false,
        entries,
    }) = parse(SETTINGS, 0, 0, &settings)
    else {
        panic!("settings");
    };
    let read: Vec<_> = frame::settings(entries).collect();
    assert_eq!(read, [(4, 256), (5, 16_384)]);
}

#[test]
fn a_header_block_encoded_in_place_is_framed_as_one_written_whole() {
    for (len, max_frame) in [(0, 10), (10, 10), (25, 10), (25, 16_384)] {
        let mut whole = b"before".to_vec();
        frame::write_headers(&mut whole, 3, &vec![7; len], false, max_frame);
        let mut in_place = b"before".to_vec();
        frame::write_encoded_headers(&mut in_place, 3, false, max_frame, |out| {
            out.extend(std::iter::repeat_n(7, len))
        });
        assert_eq!(in_place, whole, "{len} bytes, frames of {max_frame}");
    }
}

#[test]
fn a_header_block_larger_than_a_frame_goes_on_in_continuation_frames() {
    let mut out = Vec::new();
    frame::write_headers(&mut out, 3, &[7; 25], true, 10);
    let heads: Vec<_> = [0, 19, 38]
        .iter()
        .map(|&at| Head::read(&out[at..]).unwrap())
        .collect();
    assert_eq!(out.len(), 3 * HEAD_LEN + 25);
    assert_eq!(
        heads
            .iter()
            .map(|head| (head.kind, head.flags, head.len))
            .collect::<Vec<_>>(),
        [
            (HEADERS, END_STREAM),
            (CONTINUATION, 0),
            (CONTINUATION, END_HEADERS)
        ]
        .iter()
        .zip([10, 10, 5])
        .map(|(&(kind, flags), len)| (kind, flags, len))
        .collect::<Vec<_>>()
    );
}

// HPACK.

/// RFC 7541 Appendix C.3 (literals) and C.4 (Huffman-coded): three requests on one
/// connection, each later one using the dynamic table the earlier ones filled.
#[test]
fn rfc7541_appendix_c_requests_decode() {
    let plain = [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ];
    let huffman = [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ];
    let expected = [("http", "/"), ("http", "/"), ("https", "/index.html")];
    for blocks in [plain, huffman] {
        let mut decoder = Decoder::new();
        for (block, (scheme, path)) in blocks.iter().zip(expected) {
            let head = decoder.request(&hex(block), 4096, false).unwrap();
            assert_eq!(head.method(), Method::Get);
            assert_eq!((head.scheme(), head.path()), (scheme, path));
            assert_eq!(head.authority(), "www.example.com");
        }
    }
}

#[test]
fn broken_hpack_is_a_compression_error() {
    // Index 0, an index past both tables, a Huffman string padded with a zero bit, a
    // table size update past SETTINGS_HEADER_TABLE_SIZE, and one ending the block.
    for block in ["80", "ff00", "8286 8441 81 00", "3fe21f 82", "82 20"] {
        assert_eq!(
            Decoder::new().request(&hex(block), 4096, false).err(),
            Some(BlockError::Compression),
            "{block}"
        );
    }
}

fn check_request(fields: &[(&str, &str)]) -> Result<(), BlockError> {
    let block = loona_hpack::Encoder::new().encode(
        fields
            .iter()
            .map(|(name, value)| (name.as_bytes(), value.as_bytes())),
    );
    Decoder::new().request(&block, 4096, false).map(|_| ())
}

#[test]
fn malformed_requests_are_refused() {
    let base = [(":method", "GET"), (":scheme", "http"), (":path", "/")];
    assert_eq!(check_request(&base), Ok(()));
    let malformed: &[&[(&str, &str)]] = &[
        &[(":method", "GET"), (":scheme", "http")],
        &[(":method", "GET"), (":path", "/")],
        &[(":scheme", "http"), (":path", "/")],
        &[(":method", "GET"), (":scheme", "http"), (":path", "")],
        &[
            (":method", "GET"),
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":status", "200"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            ("a", "b"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("Upper", "x"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("connection", "x"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("te", "gzip"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("a", " b"),
        ],
        &[(":method", "GET"), (":scheme", "http"), (":path", "/a b")],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("content-length", "x"),
        ],
        // CONNECT has :authority, and neither :scheme nor :path (RFC 9113, 8.5).
        &[(":method", "CONNECT")],
        &[
            (":method", "CONNECT"),
            (":authority", "a:443"),
            (":path", "/"),
        ],
        &[
            (":method", "CONNECT"),
            (":authority", "a:443"),
            (":scheme", "http"),
        ],
    ];
    assert_eq!(
        check_request(&[(":method", "CONNECT"), (":authority", "a:443")]),
        Ok(())
    );
    for fields in malformed {
        assert_eq!(
            check_request(fields),
            Err(BlockError::Malformed),
            "{fields:?}"
        );
    }
    let te = [base.as_slice(), &[("te", "trailers")]].concat();
    assert_eq!(check_request(&te), Ok(()));
}

/// A block that adds one large field to the dynamic table and then names it again and
/// again: a few hundred bytes that decode to far more than the limit.
fn hpack_bomb() -> Vec<u8> {
    let mut block = hex("8286 84");
    block.extend_from_slice(&[0x40, 1, b'x', 0x7f, 0xa1, 0x1e]); // a value of 4,000 bytes
    block.extend(std::iter::repeat_n(b'y', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, 500));
    block
}

#[test]
fn an_hpack_bomb_is_too_large_and_costs_its_decoding_only() {
    let bomb = hpack_bomb();
    assert!(bomb.len() < 5000);
    assert_eq!(
        Decoder::new().request(&bomb, 16 * 1024, false).err(),
        Some(BlockError::TooLarge)
    );
}

#[test]
fn answers_are_encoded_without_the_dynamic_table() {
    let date = HttpDate::new();
    let mut decoder = loona_hpack::Decoder::new();
    for (status, length) in [
        (Status::Ok, 0),
        (Status::PayloadTooLarge, 5),
        (Status::HeaderTooLarge, 100_000),
    ] {
        let mut block = Vec::new();
        let answer = Answer::new(status, ContentType::Plain, b"");
        hpack::encode_answer(&mut block, &answer, Some(length), &date, None);
        let fields = decoder.decode(&block).unwrap();
        let names: Vec<_> = fields.iter().map(|(name, _)| name.as_slice()).collect();
        assert_eq!(
            names,
            [
                &b":status"[..],
                b"content-type",
                b"content-length",
                b"date",
                b"server"
            ]
        );
        assert_eq!(fields[0].1, status.code().to_string().as_bytes());
        assert_eq!(fields[2].1, length.to_string().as_bytes());
        assert_eq!(fields[3].1, date.as_bytes());
    }
    // A static file's coding: content-encoding and vary after content-type.
    let mut block = Vec::new();
    let encoding = Encoding {
        coding: Some(Coding::Br),
        vary: true,
    };
    let mut answer = Answer::ok(ContentType::Css, b"");
    answer.encoding = encoding;
    hpack::encode_answer(&mut block, &answer, Some(9), &date, Some(AltSvc::h3(8443)));
    let fields = decoder.decode(&block).unwrap();
    assert_eq!(
        fields.last().unwrap(),
        &(b"alt-svc".to_vec(), b"h3=\":8443\"; ma=86400".to_vec())
    );
    assert_eq!(
        fields[1..4],
        [
            (b"content-type".to_vec(), b"text/css".to_vec()),
            (b"content-encoding".to_vec(), b"br".to_vec()),
            (b"vary".to_vec(), b"accept-encoding".to_vec()),
        ]
    );
    let mut block = Vec::new();
    hpack::encode_fields(&mut block, [(&b"grpc-status"[..], &b"0"[..])].iter());
    assert_eq!(
        decoder.decode(&block).unwrap(),
        [(b"grpc-status".to_vec(), b"0".to_vec())]
    );
}

// The connection: prefaces and settings.

#[test]
fn the_server_speaks_first_and_acknowledges_the_client_settings() {
    let mut client = Client::raw(Limits::default());
    let frames = client.read();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].kind, frames[0].flags, frames[0].stream),
        (SETTINGS, 0, 0)
    );
    let settings: Vec<_> = frame::settings(&frames[0].payload).collect();
    assert!(settings.contains(&(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 128)));
    assert!(settings.contains(&(frame::SETTINGS_ENABLE_PUSH, 0)));
    // The preface may come a byte at a time.
    for byte in PREFACE {
        client.send(&[*byte]);
    }
    client.send(&raw(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10]));
    let frames = client.read();
    assert_eq!((frames[0].kind, frames[0].flags), (SETTINGS, ACK));
}

#[test]
fn a_wrong_preface_or_a_first_frame_other_than_settings_ends_the_connection() {
    let mut client = Client::raw(Limits::default());
    client.read();
    client.send(b"GET / HTTP/1.1\r\n");
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));
    assert!(client.connection.is_finished());
    assert!(!client.connection.wants_input());

    let mut client = Client::raw(Limits::default());
    let mut bytes = PREFACE.to_vec();
    bytes.extend(raw(PING, 0, 0, &[0; 8]));
    client.send(&bytes);
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));
}

#[test]
fn bad_settings_are_connection_errors() {
    let cases: [(u16, u32, ErrorCode); 4] = [
        (frame::SETTINGS_ENABLE_PUSH, 2, ErrorCode::Protocol),
        (
            frame::SETTINGS_INITIAL_WINDOW_SIZE,
            1 << 31,
            ErrorCode::FlowControl,
        ),
        (frame::SETTINGS_MAX_FRAME_SIZE, 16_383, ErrorCode::Protocol),
        (frame::SETTINGS_MAX_FRAME_SIZE, 1 << 24, ErrorCode::Protocol),
    ];
    for (id, value, code) in cases {
        let mut client = Client::new(Limits::default());
        let mut settings = Vec::new();
        frame::write_settings(&mut settings, &[(id, value)]);
        client.send(&settings);
        assert_eq!(kind_code(client.error()), goaway(code), "{id} {value}");
    }
}

#[test]
fn ping_is_answered_with_its_payload_and_an_ack_is_not() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(PING, 0, 0, b"12345678"));
    client.send(&raw(PING, ACK, 0, b"87654321"));
    assert_eq!(
        client.read(),
        [Received {
            kind: PING,
            flags: ACK,
            stream: 0,
            payload: b"12345678".to_vec()
        }]
    );
}

// Requests and answers.

#[test]
fn a_request_is_handed_out_and_answered_with_headers_and_data() {
    let mut client = Client::new(Limits::default());
    let request = client.get(1, "/json?a=1");
    client.send(&request);
    let taken = client.connection.take_request().unwrap();
    let request = taken.request();
    assert_eq!(
        (taken.stream, request.method, request.path, request.query()),
        (1, Method::Get, "/json", "a=1")
    );
    assert!(client.connection.take_request().is_none());
    client.answer(1, b"{}");
    let frames = client.read();
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[0].kind, frames[0].flags), (HEADERS, END_HEADERS));
    let fields = client.fields(&frames[0].payload.clone());
    assert_eq!(fields[0], (":status".into(), "200".into()));
    assert!(fields.contains(&("content-length".into(), "2".into())));
    assert_eq!((frames[1].kind, frames[1].flags), (DATA, END_STREAM));
    assert_eq!(frames[1].payload, b"{}");
    // The stream is closed: a second answer goes nowhere.
    client.answer(1, b"again");
    assert!(client.read().is_empty());
    assert!(!client.connection.is_finished());
}

#[test]
fn head_gets_the_length_without_the_body_and_trailers_end_the_stream() {
    let mut client = Client::new(Limits::default());
    let fields = [(":method", "HEAD"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(1, &fields, true);
    client.send(&request);
    let stream = client.answer_next();
    let frames = client.read();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].flags, END_HEADERS | END_STREAM);
    let fields = client.fields(&frames[0].payload.clone());
    assert!(
        fields.contains(&("content-length".into(), "1".into())),
        "{stream}"
    );

    let request = client.get(3, "/grpc");
    client.send(&request);
    client.connection.take_request().unwrap();
    let answer = Answer::ok(ContentType::Grpc, b"message")
        .with_trailers([Some((b"grpc-status", b"0")), None]);
    let (date, buffers) = (&client.date, &mut client.buffers);
    client
        .connection
        .answer(3, &answer, date, Instant::now(), buffers);
    let frames = client.read();
    let kinds: Vec<_> = frames.iter().map(|f| (f.kind, f.flags)).collect();
    assert_eq!(
        kinds,
        [
            (HEADERS, END_HEADERS),
            (DATA, 0),
            (HEADERS, END_HEADERS | END_STREAM)
        ]
    );
    let trailers = client.fields(&frames[2].payload.clone());
    assert_eq!(trailers, [("grpc-status".to_string(), "0".to_string())]);
}

#[test]
fn headers_with_continuation_and_a_body_in_padded_data_frames() {
    let mut client = Client::new(Limits::default());
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/echo"),
        ("content-type", "text/plain"),
        ("content-length", "11"),
    ];
    let block = client.block(&fields);
    let (first, rest) = block.split_at(5);
    let mut bytes = raw(HEADERS, 0, 1, first);
    bytes.extend(raw(CONTINUATION, 0, 1, &rest[..3]));
    bytes.extend(raw(CONTINUATION, END_HEADERS, 1, &rest[3..]));
    bytes.extend(raw(DATA, PADDED, 1, b"\x03hello PPP"));
    // Frames split anywhere across reads.
    for chunk in bytes.chunks(7) {
        client.send(chunk);
    }
    assert!(client.connection.take_request().is_none());
    client.send(&raw(DATA, END_STREAM, 1, b"world"));
    let taken = client.connection.take_request().unwrap();
    let request = taken.request();
    assert_eq!(
        (request.method, request.body),
        (Method::Post, &b"hello world"[..])
    );
    assert_eq!(request.fields.content_type, Some(&b"text/plain"[..]));
    assert_eq!(request.fields.grpc_encoding, None);

    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/benchmark.BenchmarkService/GetSum"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-encoding", "gzip"),
    ];
    let request = client.headers(3, &fields, true);
    client.send(&request);
    let taken = client.connection.take_request().unwrap();
    let fields = taken.request().fields;
    assert_eq!(fields.content_type, Some(&b"application/grpc"[..]));
    assert_eq!(fields.grpc_encoding, Some(&b"gzip"[..]));
    assert_eq!(fields.accept_encoding, AcceptEncoding::default());

    // accept-encoding read as one list however many fields it takes, as HTTP/1.1 reads it.
    let get = |accepts: &[&'static str]| {
        let mut fields = vec![
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/static/a.css"),
        ];
        fields.extend(accepts.iter().map(|value| ("accept-encoding", *value)));
        fields
    };
    let request = client.headers(5, &get(&["br;q=1, gzip;q=0.8"]), true);
    client.send(&request);
    let taken = client.connection.take_request().unwrap();
    let tried = |accepts: AcceptEncoding| accepts.preferred().collect::<Vec<_>>();
    let accepts = taken.request().fields.accept_encoding;
    assert_eq!(tried(accepts), [Coding::Br, Coding::Gzip]);
    let request = client.headers(7, &get(&["gzip;q=0.9", "br;q=0.5"]), true);
    client.send(&request);
    let taken = client.connection.take_request().unwrap();
    let accepts = taken.request().fields.accept_encoding;
    assert_eq!(tried(accepts), [Coding::Gzip, Coding::Br]);
}

#[test]
fn a_body_unlike_its_content_length_is_a_stream_error() {
    let mut client = Client::new(Limits::default());
    for (stream, body) in [(1, &b"abc"[..]), (3, b"abcdef")] {
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/"),
            ("content-length", "5"),
        ];
        let request = client.headers(stream, &fields, false);
        client.send(&request);
        client.send(&raw(DATA, END_STREAM, stream, body));
        assert_eq!(
            client.error(),
            (RST_STREAM, stream, ErrorCode::Protocol as u32)
        );
    }
    // The connection carries on.
    let request = client.get(5, "/");
    client.send(&request);
    assert_eq!(client.answer_next(), 5);
}

#[test]
fn the_answers_of_many_streams_go_out_in_one_buffer() {
    let mut client = Client::new(Limits::default());
    let mut bytes = Vec::new();
    for stream in [1, 3, 5] {
        bytes.extend(client.get(stream, "/x"));
    }
    client.send(&bytes);
    let streams: Vec<_> = (0..3).map(|_| client.answer_next()).collect();
    assert_eq!(streams, [1, 3, 5]);
    let frames = client.read();
    let data: Vec<_> = frames
        .iter()
        .filter(|f| f.kind == DATA)
        .map(|f| f.stream)
        .collect();
    assert_eq!(data, [1, 3, 5]);
}

#[test]
fn priority_is_ignored_unless_a_stream_depends_on_itself() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(PRIORITY, 0, 9, &[0, 0, 0, 1, 16]));
    assert!(client.read().is_empty());
    client.send(&raw(PRIORITY, 0, 9, &[0, 0, 0, 9, 16]));
    assert_eq!(client.error(), (RST_STREAM, 9, ErrorCode::Protocol as u32));
    let block = client.block(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]);
    let mut payload = vec![0, 0, 0, 11, 16];
    payload.extend(block);
    client.send(&raw(HEADERS, END_HEADERS | END_STREAM | 0x20, 11, &payload));
    assert_eq!(client.error(), (RST_STREAM, 11, ErrorCode::Protocol as u32));
}

#[test]
fn unknown_frames_are_ignored_but_not_inside_a_header_block() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(0xbb, 0, 0, b"extension"));
    assert!(client.read().is_empty());
    let block = client.block(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]);
    client.send(&raw(HEADERS, END_STREAM, 1, &block));
    client.send(&raw(0xbb, 0, 0, b"extension"));
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));
}

// Stream states and their errors.

#[test]
fn frames_on_idle_streams_are_connection_errors() {
    for bytes in [
        raw(DATA, 0, 1, b"x"),
        raw(RST_STREAM, 0, 1, &[0; 4]),
        raw(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1]),
        raw(CONTINUATION, END_HEADERS, 1, b""),
    ] {
        let mut client = Client::new(Limits::default());
        client.send(&bytes);
        assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));
    }
}

#[test]
fn stream_identifiers_must_be_odd_and_increasing() {
    let mut client = Client::new(Limits::default());
    let request = client.get(2, "/");
    client.send(&request);
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));

    let mut client = Client::new(Limits::default());
    let mut bytes = client.get(5, "/");
    bytes.extend(client.get(3, "/"));
    client.send(&bytes);
    assert_eq!(client.error(), (GOAWAY, 5, ErrorCode::Protocol as u32));
}

#[test]
fn frames_on_half_closed_and_closed_streams() {
    let mut client = Client::new(Limits::default());
    let request = client.get(1, "/");
    client.send(&request);
    // Half-closed (remote): the request is all in.
    client.send(&raw(DATA, 0, 1, b"x"));
    assert_eq!(
        client.error(),
        (RST_STREAM, 1, ErrorCode::StreamClosed as u32)
    );
    // Reset by the server: DATA still in flight is ignored.
    client.send(&raw(DATA, 0, 1, b"x"));
    assert!(client.read().is_empty());

    let request = client.get(3, "/");
    client.send(&request);
    client.answer_next();
    client.read();
    // Closed after both ends were done.
    client.send(&raw(DATA, 0, 3, b"x"));
    assert_eq!(
        client.error(),
        (RST_STREAM, 3, ErrorCode::StreamClosed as u32)
    );
    let request = client.get(5, "/");
    client.send(&request);
    client.answer_next();
    client.read();
    let request = client.get(5, "/");
    client.send(&request);
    assert_eq!(client.error(), (GOAWAY, 5, ErrorCode::StreamClosed as u32));
}

#[test]
fn a_client_reset_drops_the_answer() {
    let mut client = Client::new(Limits::default());
    let request = client.get(1, "/");
    client.send(&request);
    client.connection.take_request().unwrap();
    client.send(&raw(RST_STREAM, 0, 1, &[0, 0, 0, 8]));
    client.answer(1, b"late");
    assert!(client.read().is_empty());
}

#[test]
fn trailers_must_end_the_stream_and_carry_no_pseudo_header() {
    let mut client = Client::new(Limits::default());
    let fields = [(":method", "POST"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(1, &fields, false);
    client.send(&request);
    let trailers = client.headers(1, &[("x", "y")], false);
    client.send(&trailers);
    assert_eq!(client.error(), (RST_STREAM, 1, ErrorCode::Protocol as u32));

    let request = client.headers(3, &fields, false);
    client.send(&request);
    let trailers = client.headers(3, &[(":path", "/")], true);
    client.send(&trailers);
    assert_eq!(client.error(), (RST_STREAM, 3, ErrorCode::Protocol as u32));

    let request = client.headers(5, &fields, false);
    client.send(&request);
    client.send(&raw(DATA, 0, 5, b"body"));
    let trailers = client.headers(5, &[("x", "y")], true);
    client.send(&trailers);
    assert_eq!(client.connection.take_request().unwrap().body, b"body");
}

// Flow control.

#[test]
fn answers_beyond_the_window_wait_for_window_updates() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.get_answered(&[b'a'; 25]);
    let frames = client.read();
    assert_eq!(frames.len(), 2);
    assert_eq!((frames[1].kind, frames[1].payload.len()), (DATA, 10));
    let waiting = client.connection.held();
    client.send(&raw(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 10]));
    let frames = client.read();
    assert_eq!((frames[0].flags, frames[0].payload.len()), (0, 10));
    // A larger initial window opens every stream's.
    let mut settings = Vec::new();
    frame::write_settings(&mut settings, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 100)]);
    client.send(&settings);
    let frames = client.read();
    assert_eq!(
        (frames[0].kind, frames[0].flags, frames[0].payload.len()),
        (DATA, END_STREAM, 5)
    );
    assert!(client.connection.held() < waiting);
}

#[test]
fn answers_held_by_a_window_that_never_opens_time_out() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.get_answered(&[b'a'; 25]);
    let frames = client.read();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].kind, HEADERS);
    let limits = crate::http::TIMEOUTS;
    let late = |client: &Client, after: Duration| {
        client.connection.timed_out(Instant::now() + after, &limits)
    };
    assert!(!late(&client, limits.send / 2));
    assert!(late(&client, limits.send + Duration::from_secs(1)));
    // A window that opens is progress: the clock starts again from the DATA it let go.
    client.send(&raw(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 10]));
    assert_eq!(client.read()[0].payload.len(), 10);
    assert!(!late(&client, limits.send / 2));
    assert!(late(&client, limits.send + Duration::from_secs(1)));
    // Once all of it is written nothing waits, and only the idle timeout is left.
    client.send(&raw(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 15]));
    assert_eq!(client.read()[0].flags, END_STREAM);
    assert!(!late(&client, limits.send + Duration::from_secs(1)));
    // The connection's own window (65,535 by default) holds answers back the same way.
    let mut client = Client::new(Limits::default());
    client.get_answered(&vec![b'b'; 70_000]);
    client.read();
    assert!(late(&client, limits.send + Duration::from_secs(1)));
}

#[test]
fn the_connection_window_is_shared_and_frames_keep_to_the_peer_frame_size() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    let mut bytes = client.get(1, "/");
    bytes.extend(client.get(3, "/"));
    client.send(&bytes);
    let body = vec![b'b'; 40_000];
    for stream in [1, 3] {
        client.connection.take_request().unwrap();
        client.answer(stream, &body);
    }
    let frames = client.read();
    let data: Vec<_> = frames.iter().filter(|f| f.kind == DATA).collect();
    assert!(data.iter().all(|f| f.payload.len() <= 16_384));
    let sent: usize = data.iter().map(|f| f.payload.len()).sum();
    assert_eq!(sent, 65_535);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0, 1, 0, 0]));
    let frames = client.read();
    let sent: usize = frames.iter().map(|f| f.payload.len()).sum();
    assert_eq!(sent, 80_000 - 65_535);
    assert_eq!(frames.last().unwrap().flags, END_STREAM);
}

#[test]
fn a_pass_reads_a_bounded_amount_of_input_and_owes_the_rest_a_pass() {
    use super::connection::INPUT_PER_PASS;
    let mut client = Client::new(Limits::default());
    // A megabyte of frames that write nothing, in the input at once as io_uring hands it.
    let update = raw(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
    let flood = update.repeat((1 << 20) / update.len());
    client
        .connection
        .input(&mut client.buffers)
        .extend_from_slice(&flood);
    let now = Instant::now();
    let mut passes = 0;
    loop {
        let before = client.connection.buffered_input();
        let (date, buffers) = (&client.date, &mut client.buffers);
        client.connection.process(date, now, buffers, usize::MAX);
        passes += 1;
        let read = before - client.connection.buffered_input();
        // A pass ends in the frame that reaches the bound, read whole.
        assert!(
            read < INPUT_PER_PASS + update.len(),
            "{read} bytes in a pass"
        );
        if !client.connection.has_input_waiting() {
            break;
        }
        assert!(read > 0, "owed a pass that reads nothing");
    }
    assert_eq!(client.connection.buffered_input(), 0);
    assert!(
        passes >= flood.len() / (INPUT_PER_PASS + update.len()),
        "{passes}"
    );
    // A frame still arriving is not owed a pass: it waits for its bytes.
    let ping = raw(PING, 0, 0, &[7; 8]);
    client.send(&ping[..12]);
    assert!(!client.connection.has_input_waiting());
    client.send(&ping[12..]);
    assert_eq!(client.read()[0].payload, [7; 8]);
}

#[test]
fn connection_window_updates_free_only_what_their_window_held() {
    // Two answers held by their streams' windows (zero): however much connection window
    // comes, nothing goes; each stream's own update lets its answer go.
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    let requests = [client.get(1, "/"), client.get(3, "/")].concat();
    client.send(&requests);
    for stream in [1, 3] {
        client.connection.take_request().unwrap();
        client.answer(stream, &[b'c'; 20]);
    }
    assert!(client.read().iter().all(|f| f.kind == HEADERS));
    let update = raw(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
    client.send(&update.repeat(1000));
    assert_eq!(client.read(), []);
    client.send(&raw(WINDOW_UPDATE, 0, 3, &[0, 0, 0, 20]));
    let frames = client.read();
    assert_eq!(frames.len(), 1);
    assert_eq!((frames[0].stream, frames[0].flags), (3, END_STREAM));
    // Answers held by the connection's window go once it opens again.
    let mut client = Client::new(Limits::default());
    let requests = [client.get(1, "/"), client.get(3, "/")].concat();
    client.send(&requests);
    for stream in [1, 3] {
        client.connection.take_request().unwrap();
        client.answer(stream, &[b'd'; 40_000]);
    }
    let sent: usize = client.read().iter().map(|f| f.payload.len()).sum();
    assert!(sent >= 65_535);
    client.send(&update);
    let frames = client.read();
    assert_eq!((frames.len(), frames[0].payload.len()), (1, 1));
    client.send(&update.repeat(20));
    let sent: usize = client.read().iter().map(|f| f.payload.len()).sum();
    assert_eq!(sent, 20);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0, 1, 0, 0]));
    let frames = client.read();
    let data = frames.iter().filter(|f| f.kind == DATA);
    assert_eq!(
        data.map(|f| f.payload.len()).sum::<usize>(),
        80_000 - 65_556
    );
    assert_eq!(frames.last().unwrap().flags, END_STREAM);
}

#[test]
fn window_errors() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]));
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::Protocol));

    let mut client = Client::new(Limits::default());
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0x7f, 0xff, 0xff, 0xff]));
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::FlowControl));

    let mut client = Client::new(Limits::default());
    let fields = [(":method", "POST"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(1, &fields, false);
    client.send(&request);
    client.send(&raw(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 0]));
    assert_eq!(client.error(), (RST_STREAM, 1, ErrorCode::Protocol as u32));
    let request = client.headers(3, &fields, false);
    client.send(&request);
    client.send(&raw(WINDOW_UPDATE, 0, 3, &[0x7f, 0xff, 0xff, 0xff]));
    assert_eq!(
        client.error(),
        (RST_STREAM, 3, ErrorCode::FlowControl as u32)
    );
}

#[test]
fn data_beyond_the_server_window_is_a_flow_control_error() {
    let limits = Limits {
        initial_window: 16_384,
        ..Limits::default()
    };
    let mut client = Client::new(limits);
    let fields = [(":method", "POST"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(1, &fields, false);
    client.send(&request);
    client.send(&raw(DATA, 0, 1, &[0; 16_384]));
    // The server gives the window back as the body comes, once half of it is used.
    let frames = client.read();
    assert!(frames
        .iter()
        .any(|f| f.kind == WINDOW_UPDATE && f.stream == 1));
    client.send(&raw(DATA, 0, 1, &[0; 8000]));
    assert!(client.read().iter().all(|f| f.stream != 1));
    client.send(&raw(DATA, 0, 1, &[0; 8385]));
    assert_eq!(
        client.error(),
        (RST_STREAM, 1, ErrorCode::FlowControl as u32)
    );
}

#[test]
fn a_frame_over_the_max_frame_size_is_a_frame_size_error() {
    let mut client = Client::new(Limits::default());
    let request = client.headers(
        1,
        &[(":method", "POST"), (":scheme", "http"), (":path", "/")],
        false,
    );
    client.send(&request);
    client.send(&raw(DATA, 0, 1, &[0; 16_385]));
    assert_eq!(kind_code(client.error()), goaway(ErrorCode::FrameSize));
}

#[test]
fn an_idle_connection_holds_little_after_a_large_answer() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0, 0x10, 0, 0]));
    client.get_answered(&[b'a'; 200_000]);
    assert!(client.connection.held() > 200_000);
    while !client.read().is_empty() {}
    // Its client indexed no field: nothing at all.
    assert_eq!(client.connection.held(), 0);
}

#[test]
fn an_idle_connection_holds_only_the_fields_its_client_indexed() {
    let mut client = Client::new(Limits::default());
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "a"),
        // Not in the static table: the encoder indexes it.
        ("x-client", "gnosis-test"),
    ];
    let request = client.headers(1, &fields, true);
    client.send(&request);
    client.answer_next();
    client.read();
    let held = client.connection.held();
    assert!(held > 0 && held <= 512, "{held}");
    // The same again: the table does not grow.
    let request = client.headers(3, &fields, true);
    client.send(&request);
    client.answer_next();
    client.read();
    assert_eq!(client.connection.held(), held);
}

/// A request not all in within the request timeout is reset, whatever frames without any
/// of it came meanwhile; a header block left open ends the connection; the idle timeout
/// ends it with GOAWAY NO_ERROR and the last stream taken; a deadline after the GOAWAY
/// closes it.
#[test]
fn passed_deadlines_are_told_by_reset_or_goaway_before_the_close() {
    let limits = crate::http::TIMEOUTS;
    let later = |seconds| Instant::now() + Duration::from_secs(seconds);
    let mut client = Client::new(Limits::default());
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/"),
        ("content-length", "100"),
    ];
    let mut bytes = client.headers(1, &fields, false);
    bytes.extend(raw(DATA, 0, 1, &[b'x'; 10]));
    client.send(&bytes);
    client.read();
    let ping = raw(PING, 0, 0, &[0; 8]);
    client.send(&ping);
    client.read();
    assert_eq!(client.connection.expire(later(9), &limits), Expiry::Met);
    assert_eq!(client.connection.expire(later(11), &limits), Expiry::Told);
    assert_eq!(client.error(), (RST_STREAM, 1, ErrorCode::Protocol as u32));
    assert_eq!(client.connection.expire(later(11), &limits), Expiry::Met);
    assert_eq!(client.connection.expire(later(61), &limits), Expiry::Told);
    assert_eq!(client.error(), (GOAWAY, 1, ErrorCode::NoError as u32));
    assert!(client.connection.is_finished());
    assert_eq!(client.connection.expire(later(61), &limits), Expiry::Close);
    // A header block that never ends, however many empty CONTINUATIONs come.
    let mut client = Client::new(Limits::default());
    let block = client.block(&[(":method", "GET")]);
    client.send(&raw(HEADERS, 0, 1, &block));
    client.send(&raw(CONTINUATION, 0, 1, &[]));
    client.read();
    assert_eq!(client.connection.expire(later(9), &limits), Expiry::Met);
    assert_eq!(client.connection.expire(later(11), &limits), Expiry::Told);
    assert_eq!(client.error(), (GOAWAY, 0, ErrorCode::Protocol as u32));
}

#[test]
fn timeouts_count_what_the_server_owes_and_a_peer_that_left_ends_once_answered() {
    let limits = Timeouts {
        request: Duration::from_secs(10),
        idle: Duration::from_secs(60),
        send: Duration::from_secs(30),
    };
    let mut client = Client::new(Limits::default());
    let later = |seconds| Instant::now() + Duration::from_secs(seconds);
    assert!(!client.connection.timed_out(later(0), &limits));
    assert!(client.connection.timed_out(later(61), &limits));
    let request = client.get(1, "/");
    client.send(&request);
    client.connection.take_request().unwrap();
    // An answer is owed: not idle, however long it takes.
    assert!(!client.connection.timed_out(later(61), &limits));
    client.answer(1, b"x");
    assert!(client.connection.timed_out(later(31), &limits));
    client.read();
    assert!(!client.connection.timed_out(later(31), &limits));

    let request = client.get(3, "/");
    client.send(&request);
    client.connection.peer_closed();
    assert!(!client.connection.wants_input());
    assert!(!client.connection.is_finished());
    client.answer_next();
    assert!(!client.connection.is_finished());
    client.read();
    assert!(client.connection.is_finished());
    client.connection.give_back_all(&mut client.buffers);
    assert!(client.connection.held() < 16 * 1024);
}

// Ending.

#[test]
fn a_graceful_goaway_answers_the_open_streams_and_no_new_one() {
    let mut client = Client::new(Limits::default());
    let request = client.get(1, "/");
    client.send(&request);
    client.connection.shutdown();
    assert_eq!(client.error(), (GOAWAY, 1, ErrorCode::NoError as u32));
    let fields = [(":method", "POST"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(3, &fields, false);
    client.send(&request);
    client.send(&raw(DATA, END_STREAM, 3, b"ignored"));
    assert!(client.read().is_empty());
    assert!(!client.connection.is_finished());
    assert_eq!(client.answer_next(), 1);
    assert!(client.connection.take_request().is_none());
    client.read();
    assert!(client.connection.is_finished());
}

#[test]
fn a_connection_error_says_the_last_stream_and_ends_once_sent() {
    let mut client = Client::new(Limits::default());
    let request = client.get(7, "/");
    client.send(&request);
    client.send(&raw(DATA, 0, 0, b"x"));
    assert!(!client.connection.is_finished());
    assert_eq!(client.error(), (GOAWAY, 7, ErrorCode::Protocol as u32));
    assert!(client.connection.is_finished());
    assert!(client.connection.take_request().is_none());
}

// Hostile clients.

#[test]
fn rapid_reset_ends_the_connection_with_enhance_your_calm() {
    let mut client = Client::new(Limits::default());
    let mut stream = 1;
    let mut ended = false;
    for _ in 0..1000 {
        let mut bytes = client.get(stream, "/");
        bytes.extend(raw(RST_STREAM, 0, stream, &[0, 0, 0, 8]));
        client.send(&bytes);
        stream += 2;
        if client.connection.is_finished() || !client.connection.wants_input() {
            ended = true;
            break;
        }
        client.read();
    }
    assert!(ended);
    assert!(stream < 2 * 250);
    assert_eq!(
        kind_code(client.error()),
        goaway(ErrorCode::EnhanceYourCalm)
    );
}

#[test]
fn streams_answered_earn_back_resets() {
    let mut client = Client::new(Limits::default());
    let mut stream = 1;
    for _ in 0..300 {
        let mut bytes = client.get(stream, "/");
        bytes.extend(client.get(stream + 2, "/"));
        bytes.extend(raw(RST_STREAM, 0, stream + 2, &[0, 0, 0, 8]));
        client.send(&bytes);
        assert_eq!(client.answer_next(), stream);
        client.read();
        stream += 4;
    }
    assert!(!client.connection.is_finished());
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(HEADERS, 0, 1, &hex("8286 84")));
    let mut frames = 0;
    while client.connection.wants_input() && frames < 1000 {
        client.send(&raw(CONTINUATION, 0, 1, &[0x40; 1024]));
        frames += 1;
    }
    assert!(frames <= 33, "{frames}");
    assert!(client.connection.held() < 64 * 1024);
    assert_eq!(
        kind_code(client.error()),
        goaway(ErrorCode::EnhanceYourCalm)
    );
}

#[test]
fn a_ping_or_settings_flood_unread_ends_the_connection_and_read_does_not() {
    let mut client = Client::new(Limits::default());
    for _ in 0..5 {
        for _ in 0..900 {
            client.send(&raw(PING, 0, 0, &[1; 8]));
        }
        client.read();
    }
    assert!(!client.connection.is_finished());
    let mut settings = Vec::new();
    frame::write_settings(&mut settings, &[]);
    for _ in 0..1001 {
        client.send(&settings);
    }
    assert_eq!(
        kind_code(client.error()),
        goaway(ErrorCode::EnhanceYourCalm)
    );
}

#[test]
fn an_hpack_bomb_or_a_head_too_large_is_answered_431() {
    let mut client = Client::new(Limits::default());
    client.send(&raw(HEADERS, END_HEADERS | END_STREAM, 1, &hpack_bomb()));
    let frames = client.read();
    let fields = client.fields(&frames[0].payload.clone());
    assert_eq!(fields[0].1, "431");
    assert_eq!(frames.last().unwrap().flags, END_STREAM);
    // The decoder kept its table: the next request on the connection is served.
    let request = client.get(3, "/");
    client.send(&request);
    assert_eq!(client.answer_next(), 3);
}

#[test]
fn streams_past_the_limit_are_refused() {
    let limits = Limits {
        max_concurrent_streams: 2,
        ..Limits::default()
    };
    let mut client = Client::new(limits);
    let mut bytes = Vec::new();
    for stream in [1, 3, 5] {
        bytes.extend(client.get(stream, "/"));
    }
    client.send(&bytes);
    assert_eq!(
        client.error(),
        (RST_STREAM, 5, ErrorCode::RefusedStream as u32)
    );
    client.answer_next();
    let request = client.get(7, "/");
    client.send(&request);
    assert!(client.read().iter().all(|f| f.kind != RST_STREAM));
}

#[test]
fn a_body_over_the_limit_is_answered_413_and_the_rest_refused() {
    let limits = Limits {
        max_body: 100,
        ..Limits::default()
    };
    let mut client = Client::new(limits);
    let fields = [(":method", "POST"), (":scheme", "http"), (":path", "/")];
    let request = client.headers(1, &fields, false);
    client.send(&request);
    client.send(&raw(DATA, 0, 1, &[0; 60]));
    client.send(&raw(DATA, 0, 1, &[0; 60]));
    let frames = client.read();
    let fields = client.fields(&frames[0].payload.clone());
    assert_eq!(fields[0].1, "413");
    let last = frames.last().unwrap();
    assert_eq!(
        (last.kind, last.code()),
        (RST_STREAM, ErrorCode::NoError as u32)
    );
    // What was in flight is dropped.
    client.send(&raw(DATA, END_STREAM, 1, &[0; 60]));
    assert!(client.read().iter().all(|f| f.kind == WINDOW_UPDATE));
    assert!(client.connection.take_request().is_none());
}

#[test]
fn the_output_stops_at_its_share_of_a_budget_the_worker_has_spent() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, (1 << 31) - 1)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0x7f, 0xfe, 0xff, 0xff]));
    let requests = [client.get(1, "/"), client.get(3, "/")].concat();
    let input = client.connection.input(&mut client.buffers);
    input.extend_from_slice(&requests);
    // The worker is over its budget: this connection's share is 16 KiB.
    let share = 16 * 1024;
    let now = Instant::now();
    let (date, buffers) = (&client.date, &mut client.buffers);
    client.connection.process(date, now, buffers, share);
    let body = vec![b'z'; 100_000];
    let stream = client.connection.take_request().unwrap().stream;
    let answer = Answer::ok(ContentType::Plain, &body);
    let (date, buffers) = (&client.date, &mut client.buffers);
    client
        .connection
        .answer(stream, &answer, date, now, buffers);
    let held = client.connection.unsent().len();
    // The DATA frame's head comes on top of the room its payload fills.
    assert!(
        held <= share + HEAD_LEN,
        "{held} bytes for a share of {share}"
    );
    assert!(
        client.connection.take_request().is_none(),
        "the next waits for room"
    );
    // Within the budget again, at the next pass: the rest of the answer goes, and the next
    // request is taken.
    let (mut data, mut next) = (0, None);
    for _ in 0..10 {
        let frames = client.read();
        let first = frames
            .iter()
            .filter(|f| f.kind == DATA && f.stream == stream);
        data += first.map(|f| f.payload.len()).sum::<usize>();
        if let Some(request) = client.connection.take_request() {
            next = Some(request.stream);
        }
    }
    assert_eq!((data, next), (body.len(), Some(3)));
}

#[test]
fn an_answer_past_the_high_water_mark_goes_on_once_the_output_drains() {
    // With nothing else waiting (no input, no request), the rest of a large answer is the
    // backlog: without it a backend left the stream unfinished (io_uring over TLS, static
    // files at 32 streams a connection).
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, (1 << 31) - 1)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0x7f, 0xfe, 0xff, 0xff]));
    let request = client.get(1, "/");
    client.send(&request);
    let stream = client.connection.take_request().unwrap().stream;
    let body = vec![b'z'; 700_000];
    client.answer(stream, &body);
    let first = client.connection.unsent().len();
    assert!(
        first < body.len(),
        "the output stops at its high-water mark"
    );
    client.connection.mark_sent(first, Instant::now());
    assert!(
        client.connection.has_backlog(),
        "the rest of the answer waits"
    );
    let mut data = 0;
    let mut reads = 0;
    while data < body.len() && reads < 100 {
        data += client
            .read()
            .iter()
            .filter(|f| f.kind == DATA)
            .map(|f| f.payload.len())
            .sum::<usize>();
        reads += 1;
    }
    assert!(data + first >= body.len(), "{data} + {first}");
    assert!(!client.connection.has_backlog(), "all sent: nothing waits");
}

#[test]
fn a_client_that_never_reads_is_not_read_either_and_its_connection_stays_bounded() {
    let settings = [(frame::SETTINGS_INITIAL_WINDOW_SIZE, (1 << 31) - 1)];
    let mut client = Client::with_settings(Limits::default(), &settings);
    client.send(&raw(WINDOW_UPDATE, 0, 0, &[0x7f, 0xfe, 0xff, 0xff]));
    let body = vec![b'z'; 100_000];
    for stream in (1..20).step_by(2) {
        let request = client.get(stream, "/");
        client.send(&request);
    }
    let answer_all = |client: &mut Client| {
        while let Some(request) = client.connection.take_request() {
            let stream = request.stream;
            client.answer(stream, &body);
        }
    };
    answer_all(&mut client);
    // Answers are made until the output is over its high-water mark: the rest of the
    // requests wait to be taken, and all is counted.
    assert!(client.connection.unsent().len() < 256 * 1024 + 16 * 1024);
    let held = client.connection.held();
    assert!(
        held > 256 * 1024 && held < 4 * body.len() + 256 * 1024,
        "{held}"
    );
    assert!(client.connection.has_backlog());
    // Nothing more is read: what comes waits, up to a frame, and then none is taken.
    let mut pings = 0;
    while client.connection.wants_input() && pings < 10_000 {
        client.send(&raw(PING, 0, 0, &[1; 8]));
        pings += 1;
    }
    assert!(!client.connection.wants_input());
    assert!(pings < 1000, "{pings}");
    // Once the client reads, the answers go, the waiting requests are answered and the
    // waiting frames read.
    let (mut data, mut acks, mut reads) = (0, 0, 0);
    while (data < 10 * body.len() || acks < pings) && reads < 100 {
        for frame in client.read() {
            data += if frame.kind == DATA {
                frame.payload.len()
            } else {
                0
            };
            acks += usize::from(frame.kind == PING);
        }
        answer_all(&mut client);
        reads += 1;
    }
    assert_eq!((data, acks), (10 * body.len(), pings));
    assert!(client.connection.wants_input());
}

// Whatever comes.

/// A frame of any type, flags and small stream, its payload made of a few pieces that
/// often look like a frame's fields (a length, a stream, a header block), or any bytes.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    let payload = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        Just(hex("8286 84 41 01 61")),
        Just(hex("8287 85")),
        Just(vec![0, 0, 0, 1]),
        Just(vec![0, 4, 0, 0, 0, 1]),
        Just(vec![0x7f, 0xff, 0xff, 0xff]),
    ];
    (0..11u8, any::<u8>(), 0..8u32, payload)
        .prop_map(|(kind, flags, stream, payload)| raw(kind, flags, stream, &payload))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// No sequence of frames makes the connection panic, nor hold more than its bounds,
    /// and whatever it writes is whole frames.
    #[test]
    fn any_frames_never_panic_and_stay_bounded(
        frames in proptest::collection::vec(any_frame(), 1..40),
        answer in any::<bool>(),
    ) {
        let mut client = Client::new(Limits::default());
        for frame in frames {
            client.send(&frame);
            if answer {
                while let Some(request) = client.connection.take_request() {
                    let stream = request.stream;
                    client.answer(stream, &[b'x'; 100]);
                }
            }
            prop_assert!(client.connection.held() < 64 * 1024);
            client.read();
        }
    }

    /// Nor do any bytes after the preface, in any pieces.
    #[test]
    fn any_bytes_never_panic(
        pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..8),
    ) {
        let mut client = Client::new(Limits::default());
        for piece in pieces {
            client.send(&piece);
            client.read();
        }
    }
}

/// Every HTTP/2 connection, idle or not, is boxed in its slot (132 bytes more before its list
/// of recently closed streams took one word a stream; 16 of it the window's stall clock, 8
/// the output's high-water mark lowered to the budget's share, 16 the request clock of a
/// header block not yet ended, 16 what the answers waiting for window hold and its bound; 8
/// the streams' deque's head; 8 the HTTP/3 port its answers name).
#[test]
fn a_connection_is_small_to_keep() {
    // 24 bytes of it for the frames an event writes while the kernel may be sending from
    // the output (`Output::aside`).
    let size = std::mem::size_of::<Connection>();
    assert!(size <= 608, "{size} bytes");
}

/// An upstream's fields as its response reader hands them over: names as it wrote them,
/// connection-specific fields and its Content-Length among them.
const UPSTREAM: &[u8] = b"Content-Type: application/json\r\nLocation: /items/7\r\n\
    Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\
    Connection: keep-alive\r\nTransfer-Encoding: chunked\r\nETag: \"x\"\r\n";

/// Every field of `block`, as our decoder reads it.
fn our_reading(block: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
    Decoder::new()
        .decode(block, |name, value| fields.push((text(name), text(value))))
        .unwrap();
    fields
}

fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    let owned = |(name, value): &(&str, &str)| (name.to_string(), value.to_string());
    fields.iter().map(owned).collect()
}

#[test]
fn a_forwarded_answer_is_encoded_with_its_fields_lowercased_and_its_own_length() {
    let date = HttpDate::new();
    let date_text = std::str::from_utf8(date.as_bytes()).unwrap();
    let answer = Answer::forwarded(
        Status::from_code(201),
        FieldLines::new(UPSTREAM, 0),
        Body::Bytes(b"{}"),
    );
    let mut block = Vec::new();
    hpack::encode_answer(
        &mut block,
        &answer,
        answer.content_length(false),
        &date,
        None,
    );
    let expected = owned(&[
        (":status", "201"),
        ("content-type", "application/json"),
        ("location", "/items/7"),
        ("set-cookie", "a=1; Path=/"),
        ("set-cookie", "b=2"),
        ("etag", "\"x\""),
        ("content-length", "2"),
        ("date", date_text),
        ("server", "gnosis"),
    ]);
    assert_eq!(our_reading(&block), expected);
    // The upstream's Date and Server stand for ours.
    let fields = b"Date: Tue, 01 Jan 2030 00:00:00 GMT\r\nServer: upstream\r\nVary: Origin\r\n";
    let answer = Answer::forwarded(Status::Ok, FieldLines::new(fields, 0), Body::Bytes(b""));
    let mut block = Vec::new();
    hpack::encode_answer(
        &mut block,
        &answer,
        answer.content_length(false),
        &date,
        None,
    );
    let expected = owned(&[
        (":status", "200"),
        ("date", "Tue, 01 Jan 2030 00:00:00 GMT"),
        ("server", "upstream"),
        ("vary", "Origin"),
        ("content-length", "0"),
    ]);
    assert_eq!(our_reading(&block), expected);
}

#[test]
fn a_forwarded_answer_to_head_or_a_304_says_the_upstreams_length_and_ends_the_stream() {
    let mut client = Client::new(Limits::default());
    let fields = [(":method", "HEAD"), (":scheme", "http"), (":path", "/a")];
    for (stream, method, code) in [(1, "HEAD", 200), (3, "GET", 304), (5, "HEAD", 204)] {
        let fields = [(":method", method), fields[1], fields[2]];
        let request = client.headers(stream, &fields, true);
        client.send(&request);
        client.connection.take_request().unwrap();
        let upstream = b"ETag: \"x\"\r\nContent-Length: 1234\r\n";
        let answer = Answer::forwarded(
            Status::from_code(code),
            FieldLines::new(upstream, 0),
            Body::Bytes(b""),
        );
        let (date, buffers) = (&client.date, &mut client.buffers);
        client
            .connection
            .answer(stream, &answer, date, Instant::now(), buffers);
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{code}");
        assert_eq!(frames[0].flags, END_HEADERS | END_STREAM);
        let fields = our_reading(&frames[0].payload);
        assert_eq!(fields[0], (":status".into(), code.to_string()));
        let lengths: Vec<_> = fields
            .iter()
            .filter(|(name, _)| name == "content-length")
            .collect();
        match code {
            204 => assert!(lengths.is_empty(), "{fields:?}"),
            _ => assert_eq!(lengths, [&("content-length".into(), "1234".into())]),
        }
    }
}

#[test]
fn a_request_carries_its_method_target_authority_and_fields_when_the_connection_keeps_them() {
    let fields = [
        (":method", "PATCH"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/items/7?x=1"),
        ("cookie", "a=1"),
        ("cookie", "b=2"),
        ("content-type", "application/json"),
        ("x-trace", "abc"),
    ];
    for keep_fields in [false, true] {
        let mut client = Client::new(Limits {
            keep_fields,
            ..Limits::default()
        });
        let request = client.headers(1, &fields, true);
        client.send(&request);
        let taken = client.connection.take_request().unwrap();
        let request = taken.request();
        assert_eq!(request.method_bytes, b"PATCH");
        assert_eq!(request.target, "/items/7?x=1");
        assert_eq!((request.path, request.query()), ("/items/7", "x=1"));
        assert_eq!(request.authority, b"example.com");
        assert_eq!(request.fields.content_type, Some(&b"application/json"[..]));
        let lines: Vec<_> = request.field_lines.iter().collect();
        match keep_fields {
            false => assert!(lines.is_empty(), "{lines:?}"),
            true => assert_eq!(
                lines,
                [
                    (&b"cookie"[..], &b"a=1"[..]),
                    (b"cookie", b"b=2"),
                    (b"content-type", b"application/json"),
                    (b"x-trace", b"abc"),
                ]
            ),
        }
    }
}

#[test]
fn without_authority_the_host_field_is_the_authority() {
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        ("host", "example.com:8080"),
    ];
    let block = loona_hpack::Encoder::new().encode(
        fields
            .iter()
            .map(|(name, value)| (name.as_bytes(), value.as_bytes())),
    );
    let head = Decoder::new().request(&block, 4096, true).unwrap();
    let request = head.request(b"");
    assert_eq!(request.authority, b"example.com:8080");
    assert!(request
        .field_lines
        .iter()
        .eq([(&b"host"[..], &b"example.com:8080"[..])]));
    let head = Decoder::new().request(&block, 4096, false).unwrap();
    assert_eq!(head.request(b"").authority, b"example.com:8080");
    assert!(head.request(b"").field_lines.is_empty());
}

/// `GET /` on stream 1, answered with a piped body (an upstream's, arriving).
fn piped_answer(client: &mut Client) -> Pipe {
    let request = client.get(1, "/");
    client.send(&request);
    client.connection.take_request().unwrap();
    let pipe = Pipe::default();
    let fields = FieldLines::new(b"Content-Type: text/plain\r\n", 0);
    let answer = Answer::forwarded(Status::Ok, fields, Body::Piped(pipe.clone()));
    let (date, buffers) = (&client.date, &mut client.buffers);
    client
        .connection
        .answer(1, &answer, date, Instant::now(), buffers);
    pipe
}

#[test]
fn a_piped_body_goes_in_data_frames_as_it_comes_and_ends_the_stream_at_its_end() {
    let mut client = Client::new(Limits::default());
    let pipe = piped_answer(&mut client);
    let frames = client.read();
    assert_eq!(
        (frames.len(), frames[0].kind, frames[0].flags),
        (1, HEADERS, END_HEADERS)
    );
    pipe.push(b"hello, ");
    client.moved(1);
    let frames = client.read();
    assert_eq!((frames[0].kind, frames[0].flags), (DATA, 0));
    assert_eq!(frames[0].payload, b"hello, ");
    pipe.push(b"world");
    pipe.end();
    client.moved(1);
    let frames = client.read();
    assert_eq!((frames[0].kind, frames[0].flags), (DATA, END_STREAM));
    assert_eq!(frames[0].payload, b"world");
}

/// The upstream's events come whenever: the kernel may be sending from the output then
/// (io_uring), so a move only notes the stream, and the next pass writes it.
#[test]
fn a_piped_bodys_move_leaves_the_output_alone_until_the_next_pass() {
    let mut client = Client::new(Limits::default());
    let pipe = piped_answer(&mut client);
    let in_flight = client.connection.unsent().to_vec();
    let at = client.connection.unsent().as_ptr();
    pipe.push(&[7; 64 * 1024]);
    client.connection.moved(1);
    assert_eq!(client.connection.unsent(), in_flight);
    assert_eq!(client.connection.unsent().as_ptr(), at);
    client.process();
    let frames = client.read();
    assert_eq!((frames[0].kind, frames[1].kind), (HEADERS, DATA));

    pipe.fail();
    client.connection.moved(1);
    assert!(client.connection.unsent().is_empty());
    client.process();
    assert_eq!(client.error(), (RST_STREAM, 1, ErrorCode::Internal as u32));
}

/// An answer given later, and the sweep's GOAWAY, come outside the server's passes too:
/// while the output has bytes unsent, what they write waits aside, and follows once the
/// send ends.
#[test]
fn events_leave_an_output_with_bytes_unsent_alone() {
    let mut client = Client::new(Limits::default());
    let requests = [client.get(1, "/"), client.get(3, "/")].concat();
    client.send(&requests);
    client.answer_next();
    let in_flight = client.connection.unsent().to_vec();
    let at = client.connection.unsent().as_ptr();
    let stream = client.connection.take_request().unwrap().stream;
    let answer = Answer::ok(ContentType::Plain, &[b'a'; 10_000]);
    let (date, buffers) = (&client.date, &mut client.buffers);
    client
        .connection
        .for_event(|connection| connection.answer(stream, &answer, date, Instant::now(), buffers));
    let limits = crate::http::TIMEOUTS;
    let late = Instant::now() + limits.send + Duration::from_secs(1);
    assert_eq!(client.connection.expire(late, &limits), Expiry::Told);
    assert_eq!(client.connection.unsent(), in_flight);
    assert_eq!(client.connection.unsent().as_ptr(), at);
    assert!(!client.connection.is_finished());
    assert_eq!(client.read().len(), 2, "stream 1's HEADERS and DATA");
    let frames = client.read();
    let kinds: Vec<_> = frames.iter().map(|f| (f.kind, f.stream)).collect();
    assert_eq!(kinds, [(HEADERS, 3), (DATA, 3), (GOAWAY, 0)]);
    assert!(client.connection.is_finished());
}

#[test]
fn a_piped_body_that_fails_resets_its_stream_with_internal_error() {
    let mut client = Client::new(Limits::default());
    let pipe = piped_answer(&mut client);
    pipe.push(b"part");
    client.moved(1);
    client.read();
    pipe.fail();
    client.moved(1);
    assert_eq!(client.error(), (RST_STREAM, 1, ErrorCode::Internal as u32));
    // The connection goes on.
    let request = client.get(3, "/");
    client.send(&request);
    assert_eq!(client.answer_next(), 3);
    assert_eq!(client.read()[1].payload, b"/");
}
