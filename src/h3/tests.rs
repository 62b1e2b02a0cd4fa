//! The frames, a request stream and the unidirectional streams, as a client's bytes make
//! them, split anywhere.

use std::io::Write;

use proptest::prelude::*;

use super::control::{self, OpenedStreams, UniStream};
use super::frame::{self, ErrorCode, Event, Frame, FrameReader, H3Error, Settings};
use super::qpack::{self, Decoder};
use super::stream::{Limits, Received, RequestStream, Written};
use super::varint;
use crate::http::{
    Answer, Body, ContentType, FieldLines, FileBody, HttpDate, Method, Pipe, Status,
};

fn frame_of(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_head(&mut out, kind, payload.len());
    out.extend_from_slice(payload);
    out
}

/// A client's field section (the independent encoder's: static references, Huffman).
fn section(fields: &[(&str, &str)]) -> Vec<u8> {
    let fields: Vec<_> = fields
        .iter()
        .map(|&(name, value)| {
            ::qpack::HeaderField::new(name.as_bytes().to_vec(), value.as_bytes().to_vec())
        })
        .collect();
    let mut out = Vec::new();
    ::qpack::encode_stateless(&mut out, fields).unwrap();
    out
}

fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    frame_of(frame::HEADERS, &section(fields))
}

fn get(path: &str) -> Vec<u8> {
    headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", path),
    ])
}

fn post(length: usize) -> Vec<u8> {
    let length = length.to_string();
    headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/echo"),
        ("content-type", "text/plain"),
        ("content-length", &length),
    ])
}

fn data(bytes: &[u8]) -> Vec<u8> {
    frame_of(frame::DATA, bytes)
}

/// A frame of a reserved type (0x1f * N + 0x21, RFC 9114 7.2.8), which is skipped.
fn grease(payload: &[u8]) -> Vec<u8> {
    frame_of(0x1f * 3 + 0x21, payload)
}

/// A POST whose body comes in two DATA frames, with grease between, and trailers.
fn upload() -> Vec<u8> {
    [
        post(11),
        data(b"hello"),
        grease(b"ignored"),
        data(b" world"),
        headers(&[("x-checksum", "abc")]),
        grease(b""),
    ]
    .concat()
}

/// What a request stream made of `pieces`, the last with the stream's end.
fn receive_all(pieces: &[&[u8]], limits: Limits) -> Result<Received, H3Error> {
    let mut stream = RequestStream::new(limits);
    receive_on(&mut stream, pieces)
}

fn receive_on(stream: &mut RequestStream, pieces: &[&[u8]]) -> Result<Received, H3Error> {
    let mut decoder = Decoder::default();
    let mut received = Received::More;
    for (at, piece) in pieces.iter().enumerate() {
        received = stream.receive(piece, at + 1 == pieces.len(), &mut decoder)?;
        if received != Received::More {
            break;
        }
    }
    Ok(received)
}

/// The request of `bytes` split at `at`: its method, path and body.
fn request_split(bytes: &[u8], at: usize) -> Result<(Method, String, Vec<u8>), H3Error> {
    let mut stream = RequestStream::new(Limits::default());
    let received = receive_on(&mut stream, &[&bytes[..at], &bytes[at..]])?;
    assert_eq!(received, Received::Request);
    let taken = stream.take_request().unwrap();
    let request = taken.request();
    Ok((
        request.method,
        request.path.to_string(),
        request.body.to_vec(),
    ))
}

#[test]
fn a_get_and_an_upload_are_read_whole_however_split() {
    for (bytes, expected) in [
        (get("/plaintext"), (Method::Get, "/plaintext", &b""[..])),
        (upload(), (Method::Post, "/echo", &b"hello world"[..])),
    ] {
        let expected = (expected.0, expected.1.to_string(), expected.2.to_vec());
        for at in 0..=bytes.len() {
            assert_eq!(request_split(&bytes, at), Ok(expected.clone()), "at {at}");
        }
        // A byte at a time.
        let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
        let mut stream = RequestStream::new(Limits::default());
        assert_eq!(receive_on(&mut stream, &pieces), Ok(Received::Request));
        let taken = stream.take_request().unwrap();
        assert_eq!(taken.request().body, &expected.2[..]);
    }
}

#[test]
fn the_request_is_handed_out_once_and_only_when_whole() {
    let mut stream = RequestStream::new(Limits::default());
    let mut decoder = Decoder::default();
    let bytes = upload();
    assert_eq!(
        stream.receive(&bytes, false, &mut decoder),
        Ok(Received::More)
    );
    assert!(stream.take_request().is_none());
    assert_eq!(
        stream.receive(&[], true, &mut decoder),
        Ok(Received::Request)
    );
    assert!(stream.take_request().is_some());
    assert!(stream.take_request().is_none());
}

#[test]
fn frames_out_of_order_or_of_another_stream_are_unexpected() {
    let unexpected = Err(H3Error::Connection(ErrorCode::FrameUnexpected));
    let mut settings = Vec::new();
    frame::write_settings(&mut settings, &[]);
    let cases = [
        data(b"early"),
        data(b""),
        [get("/"), headers(&[("x-trailer", "1")]), data(b"late")].concat(),
        [
            post(0),
            headers(&[("x-trailer", "1")]),
            headers(&[("x-trailer", "2")]),
        ]
        .concat(),
        [get("/"), settings.clone()].concat(),
        settings,
        [get("/"), frame_of(frame::GOAWAY, &[0])].concat(),
        [get("/"), frame_of(frame::MAX_PUSH_ID, &[0])].concat(),
        [get("/"), frame_of(frame::CANCEL_PUSH, &[0])].concat(),
        [get("/"), frame_of(frame::PUSH_PROMISE, &[0, 0, 0])].concat(),
        // HTTP/2's PRIORITY, PING, WINDOW_UPDATE and CONTINUATION.
        [get("/"), frame_of(0x2, &[])].concat(),
        [get("/"), frame_of(0x6, &[0; 8])].concat(),
        [get("/"), frame_of(0x8, &[0; 4])].concat(),
        [get("/"), frame_of(0x9, &[])].concat(),
    ];
    for bytes in cases {
        assert_eq!(
            receive_all(&[&bytes], Limits::default()),
            unexpected,
            "{bytes:02x?}"
        );
    }
}

#[test]
fn a_body_unlike_its_content_length_is_a_message_error() {
    let message_error = Err(H3Error::Stream(ErrorCode::MessageError));
    let short = [post(11), data(b"hello")].concat();
    assert_eq!(receive_all(&[&short], Limits::default()), message_error);
    // Past it: refused as soon as it is.
    let long = [post(2), data(b"hello")].concat();
    let mut stream = RequestStream::new(Limits::default());
    let mut decoder = Decoder::default();
    assert_eq!(stream.receive(&long, false, &mut decoder), message_error);
}

#[test]
fn a_stream_cut_short_is_refused() {
    // Mid-frame: H3_FRAME_ERROR.
    let bytes = [post(5), data(b"hello")].concat();
    assert_eq!(
        receive_all(&[&bytes[..bytes.len() - 1]], Limits::default()),
        Err(H3Error::Connection(ErrorCode::FrameError))
    );
    let cut_head = &get("/")[..1];
    assert_eq!(
        receive_all(&[cut_head], Limits::default()),
        Err(H3Error::Connection(ErrorCode::FrameError))
    );
    // Between frames, but before any request.
    assert_eq!(
        receive_all(&[&grease(b"x")], Limits::default()),
        Err(H3Error::Stream(ErrorCode::RequestIncomplete))
    );
    assert_eq!(
        receive_all(&[b""], Limits::default()),
        Err(H3Error::Stream(ErrorCode::RequestIncomplete))
    );
}

#[test]
fn bodies_and_heads_past_the_limits_are_answered() {
    let limits = Limits {
        max_field_section: 1024,
        max_body: 8,
        keep_fields: false,
    };
    let too_long = [post(20), data(b"")].concat();
    assert_eq!(
        receive_all(&[&too_long], limits),
        Ok(Received::Refused(Status::PayloadTooLarge))
    );
    let unsaid = [
        headers(&[(":method", "POST"), (":scheme", "https"), (":path", "/")]),
        data(b"12345"),
        data(b"6789"),
    ]
    .concat();
    assert_eq!(
        receive_all(&[&unsaid], limits),
        Ok(Received::Refused(Status::PayloadTooLarge))
    );
    let long = "v".repeat(600);
    let big_head = headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        ("x-a", &long),
        ("x-b", &long),
    ]);
    assert_eq!(
        receive_all(&[&big_head], limits),
        Ok(Received::Refused(Status::HeaderTooLarge))
    );
    // An encoded section past twice the limit is not even held.
    let huge = frame_of(frame::HEADERS, &vec![0; 2049]);
    assert_eq!(
        receive_all(&[&huge[..10]], limits),
        Err(H3Error::Connection(ErrorCode::ExcessiveLoad))
    );
    // What a refused stream still sends is dropped.
    let mut stream = RequestStream::new(limits);
    assert_eq!(
        receive_on(&mut stream, &[&too_long]),
        Ok(Received::Refused(Status::PayloadTooLarge))
    );
    let mut decoder = Decoder::default();
    assert_eq!(
        stream.receive(&data(b"more"), true, &mut decoder),
        Ok(Received::More)
    );
}

#[test]
fn broken_sections_end_the_connection_and_malformed_ones_the_stream() {
    // A reference to the dynamic table.
    let dynamic = frame_of(frame::HEADERS, &[0, 0, 0x80]);
    assert_eq!(
        receive_all(&[&dynamic], Limits::default()),
        Err(H3Error::Connection(ErrorCode::QpackDecompressionFailed))
    );
    let uppercase = headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        ("X-Upper", "1"),
    ]);
    assert_eq!(
        receive_all(&[&uppercase], Limits::default()),
        Err(H3Error::Stream(ErrorCode::MessageError))
    );
    let bad_trailers = [get("/"), headers(&[("connection", "close")])].concat();
    assert_eq!(
        receive_all(&[&bad_trailers], Limits::default()),
        Err(H3Error::Stream(ErrorCode::MessageError))
    );
}

/// The frames of an answer: each HEADERS decoded (by the independent decoder), each DATA's
/// payload.
#[derive(Debug, PartialEq)]
enum Out {
    Headers(Vec<(String, String)>),
    Data(Vec<u8>),
}

fn frames_of(mut bytes: &[u8]) -> Vec<Out> {
    let mut reader = FrameReader::new(1 << 20);
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let (event, used) = reader.next(bytes).unwrap();
        bytes = &bytes[used..];
        match event.unwrap() {
            Event::DataHead { .. } => frames.push(Out::Data(Vec::new())),
            Event::Data(piece) => match frames.last_mut() {
                Some(Out::Data(data)) => data.extend_from_slice(piece),
                _ => panic!("DATA without its head"),
            },
            Event::Frame(Frame::Headers(mut section)) => {
                let decoded = ::qpack::decode_stateless(&mut section, u64::MAX).unwrap();
                let fields = decoded.fields.into_iter().map(|field| {
                    let (name, value) = field.into_inner();
                    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
                    (text(&name), text(&value))
                });
                frames.push(Out::Headers(fields.collect()));
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(reader.between_frames());
    frames
}

fn answered(request: &[u8], answer: Answer<'_>) -> (Written, Vec<Out>) {
    let mut stream = RequestStream::new(Limits::default());
    assert_eq!(receive_on(&mut stream, &[request]), Ok(Received::Request));
    stream.take_request().unwrap();
    let mut out = Vec::new();
    let written = stream.answer(answer, &HttpDate::new(), &mut out, usize::MAX);
    (written, frames_of(&out))
}

fn status_of(frame: &Out) -> &str {
    match frame {
        Out::Headers(fields) => &fields[0].1,
        Out::Data(_) => panic!("not HEADERS"),
    }
}

#[test]
fn an_answer_is_headers_data_and_trailers() {
    let (written, frames) = answered(&get("/"), Answer::ok(ContentType::Plain, b"Hello"));
    assert_eq!(written, Written::Done);
    assert_eq!(frames.len(), 2);
    let Out::Headers(fields) = &frames[0] else {
        panic!()
    };
    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            ":status",
            "content-type",
            "content-length",
            "date",
            "server"
        ]
    );
    assert_eq!(status_of(&frames[0]), "200");
    assert_eq!(frames[1], Out::Data(b"Hello".to_vec()));

    let grpc = Answer::ok(ContentType::Grpc, b"\0\0\0\0\0")
        .with_trailers([Some((b"grpc-status", b"0")), None]);
    let (_, frames) = answered(&get("/"), grpc);
    assert_eq!(frames.len(), 3);
    assert_eq!(
        frames[2],
        Out::Headers(vec![("grpc-status".into(), "0".into())])
    );

    // A HEAD's answer has no body, but says its length; HTTP/3 has no 101.
    let head = headers(&[(":method", "HEAD"), (":scheme", "https"), (":path", "/")]);
    let (_, frames) = answered(&head, Answer::ok(ContentType::Plain, b"Hello"));
    assert_eq!(frames.len(), 1);
    let switch = Answer::switch_to_websocket(b"key");
    let (_, frames) = answered(&get("/"), switch);
    assert_eq!(status_of(&frames[0]), "500");
}

#[test]
fn a_refused_request_is_answered_once() {
    let limits = Limits {
        max_body: 1,
        ..Limits::default()
    };
    let mut stream = RequestStream::new(limits);
    let refused = receive_on(&mut stream, &[&[post(2), data(b"ab")].concat()]);
    assert_eq!(refused, Ok(Received::Refused(Status::PayloadTooLarge)));
    let mut out = Vec::new();
    let date = HttpDate::new();
    let error = Answer::error(Status::PayloadTooLarge);
    assert_eq!(stream.answer(error, &date, &mut out, 0), Written::Done);
    assert_eq!(status_of(&frames_of(&out)[0]), "413");
    let written = out.len();
    let again = Answer::error(Status::PayloadTooLarge);
    assert_eq!(stream.answer(again, &date, &mut out, 0), Written::Done);
    assert_eq!(out.len(), written);
}

/// A file of `len` bytes in the temporary folder, open for reading.
fn file_of(len: usize, name: &str) -> (FileBody, Vec<u8>, std::path::PathBuf) {
    let bytes: Vec<u8> = (0..len).map(|at| (at * 7 % 251) as u8).collect();
    let path = std::env::temp_dir().join(format!("gnosis-h3-{}-{name}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let file = std::fs::File::open(&path).unwrap();
    (FileBody { file, len }, bytes, path)
}

#[test]
fn a_file_is_written_as_the_transport_has_room() {
    let (file, bytes, path) = file_of(200_000, "room");
    let mut stream = RequestStream::new(Limits::default());
    receive_on(&mut stream, &[&get("/static/file")]).unwrap();
    stream.take_request().unwrap();
    let mut answer = Answer::ok(ContentType::OctetStream, b"");
    answer.body = Body::File(file);
    let mut out = Vec::new();
    let date = HttpDate::new();
    let mut written = stream.answer(answer, &date, &mut out, 30_000);
    let mut rounds = 1;
    while written == Written::More {
        // Each round writes at most its room, and something.
        let before = out.len();
        written = stream.write_more(&mut out, 50_000);
        assert!(out.len() > before && out.len() - before <= 50_000);
        rounds += 1;
    }
    std::fs::remove_file(path).unwrap();
    assert_eq!(written, Written::Done);
    assert!(rounds >= 4);
    let frames = frames_of(&out);
    let body: Vec<u8> = frames[1..]
        .iter()
        .flat_map(|frame| match frame {
            Out::Data(data) => data.clone(),
            Out::Headers(_) => panic!("trailers"),
        })
        .collect();
    assert_eq!(body, bytes);
    let Out::Headers(fields) = &frames[0] else {
        panic!()
    };
    assert!(fields.contains(&("content-length".into(), "200000".into())));
}

#[test]
fn a_file_that_shrank_fails_the_stream() {
    let (file, _, path) = file_of(10_000, "shrank");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    let mut stream = RequestStream::new(Limits::default());
    receive_on(&mut stream, &[&get("/")]).unwrap();
    stream.take_request().unwrap();
    let mut answer = Answer::ok(ContentType::OctetStream, b"");
    answer.body = Body::File(file);
    let mut out = Vec::new();
    let written = stream.answer(answer, &HttpDate::new(), &mut out, usize::MAX);
    std::fs::remove_file(path).unwrap();
    assert_eq!(written, Written::Failed);
    // The HEADERS stay, the partial DATA frame does not.
    assert_eq!(frames_of(&out).len(), 1);
}

/// A stream answered with a piped body (an upstream's, arriving): its HEADERS written.
fn piped_stream() -> (RequestStream, Pipe, Vec<u8>) {
    let mut stream = RequestStream::new(Limits::default());
    receive_on(&mut stream, &[&get("/")]).unwrap();
    stream.take_request().unwrap();
    let pipe = Pipe::default();
    let fields = FieldLines::new(b"Content-Type: text/plain\r\n", 0);
    let answer = Answer::forwarded(Status::Ok, fields, Body::Piped(pipe.clone()));
    let mut out = Vec::new();
    let written = stream.answer(answer, &HttpDate::new(), &mut out, 100);
    assert_eq!((written, frames_of(&out).len()), (Written::More, 1));
    (stream, pipe, out)
}

#[test]
fn a_piped_body_is_written_as_it_comes_and_the_transport_has_room() {
    let (mut stream, pipe, mut out) = piped_stream();
    pipe.push(b"hello, world");
    // Room for a frame's head and five bytes.
    assert_eq!(stream.write_more(&mut out, 9 + 5), Written::More);
    assert_eq!(stream.write_more(&mut out, 100), Written::More);
    assert_eq!(stream.write_more(&mut out, 100), Written::More);
    pipe.end();
    assert_eq!(stream.write_more(&mut out, 100), Written::Done);
    let frames = frames_of(&out);
    assert_eq!(
        frames[1..],
        [Out::Data(b"hello".to_vec()), Out::Data(b", world".to_vec())]
    );
}

#[test]
fn a_piped_body_that_fails_fails_the_stream() {
    let (mut stream, pipe, mut out) = piped_stream();
    pipe.push(b"part");
    assert_eq!(stream.write_more(&mut out, 100), Written::More);
    pipe.fail();
    assert_eq!(stream.write_more(&mut out, 100), Written::Failed);
}

#[test]
fn frames_read_split_anywhere_borrow_what_is_whole() {
    let mut settings = Vec::new();
    frame::write_settings(
        &mut settings,
        &[(frame::SETTINGS_MAX_FIELD_SECTION_SIZE, 100)],
    );
    let bytes = [settings.clone(), grease(b"abc"), data(b"xyz")].concat();
    let expected_settings = Settings {
        max_field_section_size: Some(100),
        ..Settings::default()
    };
    for at in 0..=bytes.len() {
        let mut reader = FrameReader::new(64);
        let mut seen = Vec::new();
        let mut data = Vec::new();
        for piece in [&bytes[..at], &bytes[at..]] {
            let mut rest = piece;
            while !rest.is_empty() {
                let (event, used) = reader.next(rest).unwrap();
                rest = &rest[used..];
                match event {
                    Some(Event::Data(piece)) => data.extend_from_slice(piece),
                    Some(event) => seen.push(format!("{event:?}")),
                    None => assert!(rest.is_empty()),
                }
            }
        }
        assert!(reader.between_frames());
        let settings = Event::Frame(Frame::Settings(expected_settings));
        let expected = [
            format!("{settings:?}"),
            "Unknown".into(),
            "DataHead { len: 3 }".into(),
        ];
        assert_eq!(seen, expected, "at {at}");
        assert_eq!(data, b"xyz");
    }
    // Whole in one read: the payload is the input's own bytes.
    let mut reader = FrameReader::new(64);
    let headers = frame_of(frame::HEADERS, b"section");
    let (event, used) = reader.next(&headers).unwrap();
    assert_eq!(used, headers.len());
    let Some(Event::Frame(Frame::Headers(section))) = event else {
        panic!()
    };
    assert_eq!(section.as_ptr(), headers[2..].as_ptr());
    assert_eq!(reader.held(), 0);
}

#[test]
fn payloads_not_their_fields_are_frame_errors() {
    let cases = [
        (frame_of(frame::GOAWAY, &[]), ErrorCode::FrameError),
        (frame_of(frame::GOAWAY, &[0, 0]), ErrorCode::FrameError),
        (frame_of(frame::MAX_PUSH_ID, &[0x40]), ErrorCode::FrameError),
        (frame_of(frame::CANCEL_PUSH, &[1, 2]), ErrorCode::FrameError),
        (frame_of(frame::SETTINGS, &[0x06]), ErrorCode::FrameError),
        (
            frame_of(frame::SETTINGS, &[0x02, 0x00]),
            ErrorCode::SettingsError,
        ),
        (
            frame_of(frame::SETTINGS, &[0x06, 1, 0x06, 2]),
            ErrorCode::SettingsError,
        ),
        (
            frame_of(frame::SETTINGS, &[0x08, 2]),
            ErrorCode::SettingsError,
        ),
        (
            frame_of(frame::SETTINGS, &[0; 65]),
            ErrorCode::ExcessiveLoad,
        ),
    ];
    for (bytes, code) in cases {
        let mut reader = FrameReader::new(64);
        assert_eq!(reader.next(&bytes).err(), Some(code), "{bytes:02x?}");
    }
    // Unknown settings (grease) are ignored.
    let grease_setting = frame_of(frame::SETTINGS, &[0x40, 0x21, 0x05, 0x01, 0x00]);
    let mut reader = FrameReader::new(64);
    let (event, _) = reader.next(&grease_setting).unwrap();
    assert_eq!(
        event,
        Some(Event::Frame(Frame::Settings(Settings {
            qpack_max_table_capacity: 0,
            ..Settings::default()
        })))
    );
}

/// A client's unidirectional stream of type `stream_type` carrying `bytes`.
fn uni(stream_type: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::write(&mut out, stream_type);
    out.extend_from_slice(bytes);
    out
}

fn client_settings() -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_settings(
        &mut out,
        &[
            (frame::SETTINGS_QPACK_MAX_TABLE_CAPACITY, 4096),
            (frame::SETTINGS_QPACK_BLOCKED_STREAMS, 16),
            (0x1f * 2 + 0x21, 7),
        ],
    );
    out
}

fn uni_receive(bytes: &[u8], fin: bool) -> Result<UniStream, ErrorCode> {
    let mut stream = UniStream::default();
    stream.receive(bytes, fin, &mut OpenedStreams::default())?;
    Ok(stream)
}

#[test]
fn the_control_stream_begins_with_settings_and_says_goaway() {
    let bytes = uni(
        control::STREAM_CONTROL,
        &[
            client_settings(),
            grease(b"x"),
            frame_of(frame::MAX_PUSH_ID, &[3]),
            frame_of(frame::MAX_PUSH_ID, &[5]),
            frame_of(frame::GOAWAY, &[4]),
            frame_of(frame::GOAWAY, &[2]),
        ]
        .concat(),
    );
    for at in 0..=bytes.len() {
        let mut stream = UniStream::default();
        let mut opened = OpenedStreams::default();
        stream.receive(&bytes[..at], false, &mut opened).unwrap();
        stream.receive(&bytes[at..], false, &mut opened).unwrap();
        let control = stream.control().unwrap();
        let settings = control.settings().unwrap();
        assert_eq!(settings.qpack_max_table_capacity, 4096);
        assert_eq!(settings.qpack_blocked_streams, 16);
        assert_eq!(control.goaway(), Some(2));
    }
}

#[test]
fn every_control_stream_error() {
    let on_control =
        |frames: &[Vec<u8>]| uni_receive(&uni(control::STREAM_CONTROL, &frames.concat()), false);
    let settings = client_settings();
    let cases = [
        (
            vec![frame_of(frame::GOAWAY, &[0])],
            ErrorCode::MissingSettings,
        ),
        (
            vec![grease(b""), settings.clone()],
            ErrorCode::MissingSettings,
        ),
        (vec![data(b"")], ErrorCode::MissingSettings),
        (
            vec![settings.clone(), settings.clone()],
            ErrorCode::FrameUnexpected,
        ),
        (
            vec![settings.clone(), data(b"x")],
            ErrorCode::FrameUnexpected,
        ),
        (vec![settings.clone(), get("/")], ErrorCode::FrameUnexpected),
        (
            vec![settings.clone(), frame_of(frame::PUSH_PROMISE, &[0])],
            ErrorCode::FrameUnexpected,
        ),
        (
            vec![settings.clone(), frame_of(frame::CANCEL_PUSH, &[0])],
            ErrorCode::IdError,
        ),
        (
            vec![
                settings.clone(),
                frame_of(frame::MAX_PUSH_ID, &[5]),
                frame_of(frame::MAX_PUSH_ID, &[4]),
            ],
            ErrorCode::IdError,
        ),
        (
            vec![
                settings.clone(),
                frame_of(frame::GOAWAY, &[4]),
                frame_of(frame::GOAWAY, &[8]),
            ],
            ErrorCode::IdError,
        ),
    ];
    for (frames, code) in cases {
        assert_eq!(on_control(&frames).err(), Some(code), "{frames:02x?}");
    }
    // A critical stream may not end.
    for stream_type in [
        control::STREAM_CONTROL,
        control::STREAM_QPACK_ENCODER,
        control::STREAM_QPACK_DECODER,
    ] {
        assert_eq!(
            uni_receive(&uni(stream_type, &[]), true).err(),
            Some(ErrorCode::ClosedCriticalStream)
        );
    }
}

#[test]
fn one_critical_stream_of_each_type_and_no_push() {
    let mut opened = OpenedStreams::default();
    for stream_type in [
        control::STREAM_CONTROL,
        control::STREAM_QPACK_ENCODER,
        control::STREAM_QPACK_DECODER,
    ] {
        let bytes = uni(stream_type, &[]);
        assert_eq!(
            UniStream::default().receive(&bytes, false, &mut opened),
            Ok(())
        );
        assert_eq!(
            UniStream::default().receive(&bytes, false, &mut opened),
            Err(ErrorCode::StreamCreationError)
        );
    }
    assert_eq!(
        uni_receive(&uni(control::STREAM_PUSH, &[]), false).err(),
        Some(ErrorCode::StreamCreationError)
    );
    // An unknown (grease) type, its type split across reads: dropped, and it may end.
    let bytes = uni(0x1f * 5 + 0x21, b"anything at all");
    let mut stream = UniStream::default();
    let mut opened = OpenedStreams::default();
    assert_eq!(stream.receive(&bytes[..1], false, &mut opened), Ok(()));
    assert_eq!(stream.receive(&bytes[1..], true, &mut opened), Ok(()));
    assert!(matches!(stream, UniStream::Ignored));
}

#[test]
fn the_qpack_streams_may_say_only_what_a_table_of_capacity_0_allows() {
    let encoder = |bytes: &[u8]| uni_receive(&uni(control::STREAM_QPACK_ENCODER, bytes), false);
    assert!(encoder(&[0x20, 0x20]).is_ok());
    for refused in [
        &[0x21][..],               // Set Dynamic Table Capacity 1
        &[0x3f, 0x00],             // ... 31
        &[0xc0, 0x01, b'a'],       // Insert with static name reference
        &[0x41, b'a', 0x01, b'b'], // Insert with literal name
        &[0x00],                   // Duplicate
    ] {
        assert_eq!(
            encoder(refused).err(),
            Some(ErrorCode::QpackEncoderStreamError),
            "{refused:02x?}"
        );
    }
    let decoder = |bytes: &[u8]| uni_receive(&uni(control::STREAM_QPACK_DECODER, bytes), false);
    // Stream Cancellation, short and long.
    assert!(decoder(&[0x44, 0x7f, 0xff, 0x01, 0x40]).is_ok());
    for refused in [
        &[0x84][..], // Section Acknowledgment
        &[0x01],     // Insert Count Increment
        &[
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ],
    ] {
        assert_eq!(
            decoder(refused).err(),
            Some(ErrorCode::QpackDecoderStreamError),
            "{refused:02x?}"
        );
    }
}

#[test]
fn the_servers_control_stream_says_capacity_0() {
    let mut out = Vec::new();
    control::write_control_stream(&mut out, &Limits::default());
    control::write_goaway(&mut out, 8);
    assert_eq!(out[0], control::STREAM_CONTROL as u8);
    let mut reader = FrameReader::new(64);
    let (event, used) = reader.next(&out[1..]).unwrap();
    assert_eq!(
        event,
        Some(Event::Frame(Frame::Settings(Settings {
            max_field_section_size: Some(16 * 1024),
            ..Settings::default()
        })))
    );
    let (event, _) = reader.next(&out[1 + used..]).unwrap();
    assert_eq!(event, Some(Event::Frame(Frame::GoAway(8))));
    // Both values 0 are said, not left to their defaults.
    assert!(out.windows(2).any(|pair| pair == [0x01, 0x00]));
    assert!(out.windows(2).any(|pair| pair == [0x07, 0x00]));
}

#[test]
fn error_codes_have_their_numbers() {
    let codes = [
        (ErrorCode::NoError, 0x100),
        (ErrorCode::GeneralProtocolError, 0x101),
        (ErrorCode::StreamCreationError, 0x103),
        (ErrorCode::ClosedCriticalStream, 0x104),
        (ErrorCode::FrameUnexpected, 0x105),
        (ErrorCode::FrameError, 0x106),
        (ErrorCode::ExcessiveLoad, 0x107),
        (ErrorCode::IdError, 0x108),
        (ErrorCode::SettingsError, 0x109),
        (ErrorCode::MissingSettings, 0x10a),
        (ErrorCode::RequestRejected, 0x10b),
        (ErrorCode::RequestIncomplete, 0x10d),
        (ErrorCode::MessageError, 0x10e),
        (ErrorCode::VersionFallback, 0x110),
        (ErrorCode::QpackDecompressionFailed, 0x200),
        (ErrorCode::QpackEncoderStreamError, 0x201),
        (ErrorCode::QpackDecoderStreamError, 0x202),
    ];
    for (code, number) in codes {
        assert_eq!(code.value(), number, "{code:?}");
    }
}

proptest! {
    #[test]
    fn any_bytes_on_a_request_stream_are_taken_or_refused_within_bounds(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        cut in any::<prop::sample::Index>(),
    ) {
        let limits = Limits { max_field_section: 256, max_body: 128, keep_fields: false };
        let mut stream = RequestStream::new(limits);
        let mut decoder = Decoder::default();
        let at = cut.index(bytes.len() + 1);
        for (piece, fin) in [(&bytes[..at], false), (&bytes[at..], true)] {
            if stream.receive(piece, fin, &mut decoder).is_err() {
                break;
            }
            // A held frame is at most twice the section limit, a body at most the limit,
            // a head at most the section limit.
            prop_assert!(stream.held() <= 2 * 256 + 2 * 128 + 256);
        }
    }

    #[test]
    fn requests_with_any_body_split_anywhere_are_read_whole(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        frame_len in 1usize..100,
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = post(body.len());
        for chunk in body.chunks(frame_len) {
            bytes.extend(data(chunk));
        }
        let at = cut.index(bytes.len() + 1);
        let (method, _, read) = request_split(&bytes, at).unwrap();
        prop_assert_eq!(method, Method::Post);
        prop_assert_eq!(read, body);
    }

    #[test]
    fn any_bytes_on_a_unidirectional_stream_are_taken_or_refused(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut stream = UniStream::default();
        let mut opened = OpenedStreams::default();
        let at = cut.index(bytes.len() + 1);
        if stream.receive(&bytes[..at], false, &mut opened).is_ok() {
            let _ = stream.receive(&bytes[at..], false, &mut opened);
        }
        prop_assert!(stream.held() <= 4096);
    }
}

#[test]
fn the_answers_encoder_is_the_qpack_modules() {
    // What the stream writes in its HEADERS is qpack::encode_answer's section.
    let answer = Answer::ok(ContentType::Json, b"{}");
    let date = HttpDate::new();
    let mut section = Vec::new();
    qpack::encode_answer(&mut section, &answer, Some(2), &date);
    let mut stream = RequestStream::new(Limits::default());
    receive_on(&mut stream, &[&get("/json")]).unwrap();
    stream.take_request().unwrap();
    let mut out = Vec::new();
    stream.answer(answer, &date, &mut out, usize::MAX);
    assert_eq!(out[..2], [frame::HEADERS as u8, section.len() as u8]);
    assert_eq!(out[2..2 + section.len()], section[..]);
}

#[test]
fn a_payload_encoded_in_place_gets_the_head_its_length_needs() {
    for len in [0, 63, 64, 16_383, 16_384, 70_000] {
        let mut out = vec![0xaa];
        frame::write_encoded(&mut out, frame::HEADERS, |out| {
            out.extend((0..len).map(|at| at as u8))
        });
        assert_eq!(out[0], 0xaa);
        let mut reader = FrameReader::new(1 << 20);
        let (event, used) = reader.next(&out[1..]).unwrap();
        assert_eq!(used, out.len() - 1);
        let Some(Event::Frame(Frame::Headers(payload))) = event else {
            panic!("{event:?}")
        };
        assert!(payload
            .iter()
            .enumerate()
            .all(|(at, &byte)| byte == at as u8));
        assert_eq!(payload.len(), len);
    }
}

#[test]
fn a_forwarded_answer_to_head_or_a_304_says_the_upstreams_length_and_a_204_none() {
    let upstream = b"ETag: \"x\"\r\nContent-Length: 1234\r\n";
    let head = headers(&[(":method", "HEAD"), (":scheme", "https"), (":path", "/")]);
    for (request, code) in [(&head, 200), (&get("/"), 304), (&get("/"), 204)] {
        let answer = Answer::forwarded(
            Status::from_code(code),
            FieldLines::new(upstream, 0),
            Body::Bytes(b""),
        );
        let (written, frames) = answered(request, answer);
        assert_eq!(written, Written::Done);
        assert_eq!(frames.len(), 1, "{code}");
        let Out::Headers(fields) = &frames[0] else {
            panic!()
        };
        assert_eq!(status_of(&frames[0]), code.to_string());
        assert!(fields.contains(&("etag".into(), "\"x\"".into())));
        let lengths: Vec<_> = fields
            .iter()
            .filter(|(name, _)| name == "content-length")
            .collect();
        match code {
            204 => assert!(lengths.is_empty(), "{fields:?}"),
            _ => assert_eq!(lengths, [&("content-length".into(), "1234".into())]),
        }
    }
    // A GET's 200 frames its own body.
    let upstream = b"Content-Type: text/plain\r\nContent-Length: 99\r\n";
    let answer = Answer::forwarded(
        Status::Ok,
        FieldLines::new(upstream, 0),
        Body::Bytes(b"Hello"),
    );
    let (_, frames) = answered(&get("/"), answer);
    let Out::Headers(fields) = &frames[0] else {
        panic!()
    };
    assert!(fields.contains(&("content-length".into(), "5".into())));
    assert!(fields.contains(&("content-type".into(), "text/plain".into())));
    assert_eq!(frames[1], Out::Data(b"Hello".to_vec()));
}

#[test]
fn a_request_carries_its_method_target_authority_and_fields_when_the_stream_keeps_them() {
    let request = headers(&[
        (":method", "DELETE"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/items/7"),
        ("x-trace", "abc"),
    ]);
    for keep_fields in [false, true] {
        let mut stream = RequestStream::new(Limits {
            keep_fields,
            ..Limits::default()
        });
        assert_eq!(receive_on(&mut stream, &[&request]), Ok(Received::Request));
        let taken = stream.take_request().unwrap();
        let request = taken.request();
        assert_eq!(request.method_bytes, b"DELETE");
        assert_eq!((request.target, request.query()), ("/items/7", ""));
        assert_eq!(request.authority, b"example.com");
        let lines: Vec<_> = request.field_lines.iter().collect();
        match keep_fields {
            false => assert!(lines.is_empty()),
            true => assert_eq!(lines, [(&b"x-trace"[..], &b"abc"[..])]),
        }
    }
}
