use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::h1::{ChunkError, Chunked, Parsed, MAX_CHUNK_LINE, MAX_HEAD, MAX_HEADERS};
use crate::http::{Method, Version, MAX_BODY};

// Responses.

/// An event as the tests keep it: owned, fields as text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Interim(u16, Vec<(String, String)>),
    Head {
        status: u16,
        body: BodyLength,
        keep_alive: bool,
        fields: Vec<(String, String)>,
    },
    Body(Vec<u8>),
    End {
        keep_alive: bool,
    },
    Error(Error),
}

fn fields_of(head: &Head<'_>) -> Vec<(String, String)> {
    head.fields
        .iter()
        .map(|(name, value)| {
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            (text(name), text(value))
        })
        .collect()
}

/// What the reader made of `pieces`, received one after another with a request of each of
/// `sent` awaiting its response (`true` for HEAD), and the most bytes the caller held
/// between reads. The upstream closes after the last piece if `eof`.
fn receive(pieces: &[&[u8]], sent: &[bool], eof: bool) -> (Vec<Seen>, usize) {
    let mut reader = ResponseReader::default();
    let mut awaiting: VecDeque<bool> = sent.iter().copied().collect();
    let mut input = Vec::new();
    let mut seen = Vec::new();
    let mut held = 0;
    for (n, piece) in pieces.iter().enumerate() {
        input.extend_from_slice(piece);
        let closed = eof && n + 1 == pieces.len();
        loop {
            let awaited = match awaiting.front() {
                None => Awaited::Nothing,
                Some(false) => Awaited::Response,
                Some(true) => Awaited::HeadResponse,
            };
            let read = match reader.read(&mut input, awaited, closed) {
                Ok(read) => read,
                Err(error) => {
                    // It stays.
                    assert_eq!(reader.read(&mut [], awaited, closed), Err(error));
                    seen.push(Seen::Error(error));
                    return (seen, held);
                }
            };
            let used = read.used;
            let Some(event) = read.event else {
                input.drain(..used);
                break;
            };
            match event {
                Event::Interim(head) => seen.push(Seen::Interim(head.status, fields_of(&head))),
                Event::Head(head) => seen.push(Seen::Head {
                    status: head.status,
                    body: head.body,
                    keep_alive: head.keep_alive,
                    fields: fields_of(&head),
                }),
                // Pieces of one body, however they were cut, as one.
                Event::Body(bytes) => match seen.last_mut() {
                    Some(Seen::Body(before)) => before.extend_from_slice(bytes),
                    _ => seen.push(Seen::Body(bytes.to_vec())),
                },
                Event::End { keep_alive } => {
                    awaiting.pop_front();
                    seen.push(Seen::End { keep_alive });
                }
            }
            input.drain(..used);
        }
        held = held.max(input.len());
    }
    (seen, held)
}

/// The events of `bytes` received at once, the upstream closing after them.
fn events(bytes: &[u8], sent: &[bool]) -> Vec<Seen> {
    receive(&[bytes], sent, true).0
}

/// The events of `bytes` answering one GET.
fn one(bytes: &[u8]) -> Vec<Seen> {
    events(bytes, &[false])
}

/// The statuses, bodies and ends of `seen`, or its error, for short comparisons.
fn outline(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|seen| match seen {
            Seen::Interim(status, _) => format!("interim {status}"),
            Seen::Head { status, .. } => format!("head {status}"),
            Seen::Body(bytes) => format!("body {}", String::from_utf8_lossy(bytes)),
            Seen::End { keep_alive: true } => "end".to_string(),
            Seen::End { keep_alive: false } => "end, close".to_string(),
            Seen::Error(error) => format!("{error:?}"),
        })
        .collect()
}

fn head(seen: &[Seen]) -> (u16, BodyLength, bool, Vec<(String, String)>) {
    seen.iter()
        .find_map(|seen| match seen {
            Seen::Head {
                status,
                body,
                keep_alive,
                fields,
            } => Some((*status, *body, *keep_alive, fields.clone())),
            _ => None,
        })
        .expect("a head")
}

fn field(name: &str, value: &str) -> (String, String) {
    (name.to_string(), value.to_string())
}

#[test]
fn a_body_with_a_content_length_comes_after_its_head() {
    let seen = one(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A:  a b \t\r\n\r\nhello");
    assert_eq!(outline(&seen), ["head 200", "body hello", "end"]);
    let (_, body, keep_alive, fields) = head(&seen);
    assert_eq!((body, keep_alive), (BodyLength::Known(5), true));
    assert_eq!(
        fields,
        [
            field("Content-Type", "text/plain"),
            field("Content-Length", "5"),
            field("X-A", "a b"),
        ]
    );
    // No reason phrase, an empty body.
    let seen = one(b"HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(outline(&seen), ["head 404", "end"]);
}

#[test]
fn pipelined_responses_come_out_in_order_each_with_its_own_body() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none\
HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n\
HTTP/1.1 204 No Content\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nthree";
    assert_eq!(
        outline(&events(bytes, &[false; 4])),
        [
            "head 200",
            "body one",
            "end",
            "head 201",
            "body two",
            "end",
            "head 204",
            "end",
            "head 200",
            "body three",
            "end"
        ]
    );
}

#[test]
fn a_chunked_body_is_decoded_its_extensions_skipped_its_trailers_dropped() {
    let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n\
5;a=b\r\nhello\r\n1 ; c=\"d e\"\r\n \r\n00005\r\nworld\r\n0\r\nX-T: 1\r\nX-U:\r\n\r\n";
    let seen = one(bytes);
    assert_eq!(outline(&seen), ["head 200", "body hello world", "end"]);
    // Transfer-Encoding and Trailer are the connection's; the trailers are not kept.
    let (_, body, _, fields) = head(&seen);
    assert_eq!((body, fields), (BodyLength::Chunked, vec![]));
}

#[test]
fn the_chunks_in_a_buffer_come_out_as_one_body_moved_over_their_framing() {
    let mut bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let head_len = bytes.len();
    for byte in b'a'..=b'z' {
        bytes.extend_from_slice(&[b'1', b';', b'x', b'\r', b'\n', byte, b'\r', b'\n']);
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    let mut reader = ResponseReader::default();
    let read = reader.read(&mut bytes, Awaited::Response, false).unwrap();
    assert!(matches!(read.event, Some(Event::Head(_))));
    assert_eq!(read.used, head_len);
    let body = &mut bytes[head_len..];
    let len = body.len();
    let read = reader.read(body, Awaited::Response, false).unwrap();
    assert_eq!(read.event, Some(Event::Body(b"abcdefghijklmnopqrstuvwxyz")));
    // The last chunk and the empty trailer section are taken with the data.
    assert_eq!(read.used, len);
    let read = reader.read(&mut [], Awaited::Response, false).unwrap();
    assert_eq!(read.event, Some(Event::End { keep_alive: true }));
}

#[test]
fn head_1xx_204_and_304_have_no_body_whatever_their_fields_say() {
    let next = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    // HEAD: its Content-Length is the representation's, kept among the fields.
    let bytes = format!("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{next}");
    let seen = events(bytes.as_bytes(), &[true, false]);
    assert_eq!(
        outline(&seen),
        ["head 200", "end", "head 200", "body ok", "end"]
    );
    let (_, body, keep_alive, fields) = head(&seen);
    assert_eq!(
        (body, keep_alive, fields),
        (BodyLength::Empty, true, vec![field("Content-Length", "50")])
    );
    let chunked_head = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{next}");
    assert_eq!(
        outline(&events(chunked_head.as_bytes(), &[true, false])),
        ["head 200", "end", "head 200", "body ok", "end"]
    );
    for status in ["204 No Content", "304 Not Modified"] {
        for fields in [
            "Content-Length: 50\r\n",
            "Transfer-Encoding: chunked\r\n",
            "",
        ] {
            let bytes = format!("HTTP/1.1 {status}\r\n{fields}\r\n{next}");
            let code = &status[..3];
            assert_eq!(
                outline(&events(bytes.as_bytes(), &[false, false])),
                [
                    &format!("head {code}")[..],
                    "end",
                    "head 200",
                    "body ok",
                    "end"
                ],
                "{bytes}"
            );
        }
    }
}

#[test]
fn interim_responses_are_surfaced_before_the_final_one() {
    let bytes = b"HTTP/1.1 100 Continue\r\n\r\n\
HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nConnection: close\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let seen = events(bytes, &[false]);
    assert_eq!(
        outline(&seen),
        ["interim 100", "interim 103", "head 200", "body ok", "end"]
    );
    assert_eq!(
        seen[1],
        Seen::Interim(103, vec![field("Link", "</style.css>; rel=preload")])
    );
    // An interim response answers a HEAD as well, and has no body either.
    let bytes = b"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(
        outline(&events(bytes, &[true])),
        ["interim 100", "head 200", "end"]
    );
}

#[test]
fn switching_protocols_is_refused_since_no_upgrade_was_asked() {
    let seen = one(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    );
    assert_eq!(seen, [Seen::Error(Error::SwitchingProtocols)]);
}

#[test]
fn a_body_without_a_length_runs_to_the_close_and_the_connection_is_not_reused() {
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this, HTTP/1.1 200 OK\r\n\r\n too";
    let (seen, _) = receive(&[&bytes[..40], &bytes[40..]], &[false, false], true);
    assert_eq!(
        outline(&seen),
        [
            "head 200",
            "body all of this, HTTP/1.1 200 OK\r\n\r\n too",
            "end, close"
        ]
    );
    assert_eq!(head(&seen).1, BodyLength::UntilClose);
    assert!(!head(&seen).2);
    // Until the close, it is not over.
    let (seen, _) = receive(&[bytes], &[false], false);
    assert_eq!(outline(&seen).len(), 2);
}

#[test]
fn a_connection_is_kept_as_the_version_and_connection_say() {
    let cases = [
        ("1.1", "", true),
        ("1.1", "Connection: keep-alive\r\n", true),
        ("1.1", "Connection: close\r\n", false),
        ("1.1", "Connection: x, CLOSE\r\n", false),
        ("1.0", "", false),
        ("1.0", "Connection: keep-alive\r\n", true),
        ("1.0", "Connection: Keep-Alive, close\r\n", false),
        (
            "1.0",
            "Connection: close\r\nConnection: keep-alive\r\n",
            false,
        ),
    ];
    for (version, connection, kept) in cases {
        let bytes = format!("HTTP/{version} 200 OK\r\n{connection}Content-Length: 1\r\n\r\nx");
        let seen = one(bytes.as_bytes());
        assert_eq!(head(&seen).2, kept, "{bytes}");
        assert_eq!(
            seen.last(),
            Some(&Seen::End { keep_alive: kept }),
            "{bytes}"
        );
    }
}

#[test]
fn bytes_after_a_response_that_closes_are_refused_not_read_as_the_next_response() {
    let bytes = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok\
HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake";
    assert_eq!(
        outline(&events(bytes, &[false, false])),
        ["head 200", "body ok", "end, close", "Unsolicited"]
    );
    // Its close after it is no error.
    let closing = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        outline(&events(closing, &[false, false])),
        ["head 200", "body ok", "end, close"]
    );
}

#[test]
fn bytes_when_no_response_is_awaited_are_refused() {
    assert_eq!(
        events(b"HTTP/1.1 200 OK\r\n\r\n", &[]),
        [Seen::Error(Error::Unsolicited)]
    );
    // A response longer than its length says: what is past it answers nothing.
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake";
    assert_eq!(
        outline(&events(bytes, &[false])),
        ["head 200", "body ok", "end", "Unsolicited"]
    );
    // Nothing at all, then the close, is the end of an idle connection.
    assert_eq!(events(b"", &[]), Vec::<Seen>::new());
}

#[test]
fn a_response_hidden_in_a_body_is_body() {
    // A body that looks like a response is body, as its length says.
    let hidden = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake";
    let bytes = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{hidden}",
        hidden.len()
    );
    assert_eq!(
        outline(&events(bytes.as_bytes(), &[false])),
        ["head 200", &format!("body {hidden}"), "end"]
    );
    // A chunked body that ends early, what follows it awaited by nothing: refused.
    let bytes = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n{hidden}"
    );
    assert_eq!(
        outline(&events(bytes.as_bytes(), &[false])),
        ["head 200", "body ok", "end", "Unsolicited"]
    );
    // A chunk whose size is wrong: refused, what follows never read as a response.
    let bytes =
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nok\r\n{hidden}\r\n");
    assert_eq!(
        outline(&events(bytes.as_bytes(), &[false, false])),
        ["head 200", "body o", "Chunked(DataEnd)"]
    );
}

#[test]
fn framings_two_parsers_could_read_differently_are_refused() {
    let cases: &[(&[u8], Error)] = &[
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\na",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1 0\r\n\r\n",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
            Error::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            Error::LengthAndEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
            Error::LengthAndEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n",
            Error::TransferEncoding,
        ),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            Error::TransferEncoding,
        ),
        // obs-fold.
        (
            b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n chunked\r\n\r\n",
            Error::Malformed,
        ),
        // Bare LFs, in the head and in the chunked framing.
        (
            b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
            Error::Malformed,
        ),
        (b"HTTP/1.1 200 OK\r\n\n", Error::Malformed),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n",
            Error::Chunked(ChunkError::Trailer),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n",
            Error::Chunked(ChunkError::Trailer),
        ),
        // A bare CR, a blank before the colon, a NUL, a space in a name.
        (
            b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"HTTP/1.1 200 OK\r\nX A: a\r\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        // Empty lines before the status line, leftovers of a body that ran over.
        (
            b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        (
            b"\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            Error::Malformed,
        ),
        // Chunk sizes with a sign, blanks, too many digits.
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nok\r\n0\r\n\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
            Error::Chunked(ChunkError::SizeLine),
        ),
        (b"HTTP/1.1 600 Nope\r\n\r\n", Error::Status),
        (b"HTTP/1.1 099 Nope\r\n\r\n", Error::Status),
        (b"HTTP/2.0 200 OK\r\n\r\n", Error::Malformed),
        (b"HTTP/1.1 20 OK\r\n\r\n", Error::Malformed),
        (b"HTTP/1.1  200 OK\r\n\r\n", Error::Malformed),
        (b"ICY 200 OK\r\n\r\n", Error::Malformed),
    ];
    for &(bytes, error) in cases {
        let text = String::from_utf8_lossy(bytes);
        let seen = one(bytes);
        assert_eq!(seen.last(), Some(&Seen::Error(error)), "{text}");
        // Never a body from an ambiguous head, in whatever pieces it comes.
        let whole = receive(&[bytes], &[false], true).0;
        for cut in 0..bytes.len() {
            let (seen, _) = receive(&[&bytes[..cut], &bytes[cut..]], &[false], true);
            assert_eq!(seen, whole, "{text} cut at {cut}");
        }
        // Nor from a HEAD's response, whose body the fields do not frame (the status
        // line and the field lines are as strict, and the framing fields as well).
        if !bytes.starts_with(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") {
            let seen = events(bytes, &[true]);
            assert!(matches!(seen.last(), Some(Seen::Error(_))), "{text}");
        }
    }
}

#[test]
fn a_response_cut_short_is_an_error_and_no_response_at_all_another() {
    assert_eq!(events(b"", &[false]), [Seen::Error(Error::NoResponse)]);
    assert_eq!(
        events(b"HTTP/1.1 200 OK\r\nContent", &[false]),
        [Seen::Error(Error::Truncated)]
    );
    assert_eq!(
        outline(&one(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel")),
        ["head 200", "body hel", "Truncated"]
    );
    assert_eq!(
        outline(&one(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")),
        ["head 200", "Truncated"]
    );
    for cut_at in [
        "5\r\nhel",
        "5\r\nhello",
        "5\r\nhello\r\n",
        "5\r\nhello\r\n0\r\n",
        "5",
    ] {
        let bytes = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{cut_at}");
        let seen = one(bytes.as_bytes());
        assert_eq!(seen.last(), Some(&Seen::Error(Error::Truncated)), "{bytes}");
    }
    // Between two responses, the close is no response for the second.
    let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    assert_eq!(
        outline(&events(bytes, &[false, false])),
        ["head 200", "body ok", "end", "NoResponse"]
    );
}

#[test]
fn heads_chunk_lines_and_trailers_past_their_limits_are_refused() {
    let mut long = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
    long.resize(MAX_HEAD, b'a');
    // Refused once MAX_HEAD bytes are in without the head's end, whatever follows.
    assert_eq!(
        receive(&[&long], &[false], false).0,
        [Seen::Error(Error::HeadTooLarge)]
    );
    assert_eq!(
        receive(&[&long[..MAX_HEAD - 1]], &[false], false).0,
        Vec::<Seen>::new()
    );
    long.extend_from_slice(b"\r\n\r\n");
    assert_eq!(one(&long), [Seen::Error(Error::HeadTooLarge)]);

    let many = |count: usize| {
        let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..count - 1 {
            bytes.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        bytes
    };
    assert_eq!(head(&one(&many(MAX_HEADERS))).3.len(), MAX_HEADERS);
    assert_eq!(
        one(&many(MAX_HEADERS + 1)),
        [Seen::Error(Error::TooManyFields)]
    );

    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut long_line = [&chunked[..], b"1;x="].concat();
    long_line.resize(chunked.len() + MAX_CHUNK_LINE, b'e');
    assert_eq!(
        outline(&receive(&[&long_line], &[false], false).0),
        ["head 200", "Chunked(SizeLine)"]
    );
    let mut long_trailers = [&chunked[..], b"0\r\nX-T: "].concat();
    long_trailers.resize(chunked.len() + 3 + MAX_HEAD, b't');
    assert_eq!(
        outline(&receive(&[&long_trailers], &[false], false).0),
        ["head 200", "Chunked(TrailersTooLarge)"]
    );
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_left_out() {
    let bytes = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Private\r\nKeep-Alive: timeout=5\r\n\
Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\nUpgrade: h2c\r\nx-private: 1\r\n\
Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\nConnection: x-other\r\nX-Other: 2\r\n\r\nok";
    let (_, _, keep_alive, fields) = head(&one(bytes));
    assert!(keep_alive);
    assert_eq!(
        fields,
        [
            field("Set-Cookie", "a=1"),
            field("Set-Cookie", "b=2"),
            field("Content-Length", "2"),
        ]
    );
}

#[test]
fn a_response_cut_at_every_byte_gives_the_events_of_the_whole() {
    let bytes = b"HTTP/1.1 100 Continue\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: a\r\n\r\nhello\
HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n\
HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n\
HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n\
HTTP/1.0 200 OK\r\n\r\nto the end";
    let sent = [false, false, false, true, false];
    let whole = events(bytes, &sent);
    assert_eq!(
        outline(&whole),
        [
            "interim 100",
            "head 200",
            "body hello",
            "end",
            "head 200",
            "body abcde",
            "end",
            "head 304",
            "end",
            "head 200",
            "end",
            "head 200",
            "body to the end",
            "end, close"
        ]
    );
    for cut in 0..=bytes.len() {
        let (seen, _) = receive(&[&bytes[..cut], &bytes[cut..]], &sent, true);
        assert_eq!(seen, whole, "cut at {cut}");
    }
    // And a byte at a time.
    let bytes_one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(receive(&bytes_one_by_one, &sent, true).0, whole);
}

#[test]
fn a_reader_is_small() {
    assert!(std::mem::size_of::<ResponseReader>() <= 32);
}

// Requests.

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

fn forward<'a>(method: &'a str, target: &'a str, body: &'a [u8]) -> Forward<'a> {
    Forward {
        method: method.as_bytes(),
        target: target.as_bytes(),
        version: Version::Http11,
        client: Some(CLIENT),
        https: false,
        body,
    }
}

/// The request written with `fields`, as text.
fn written(forward: &Forward<'_>, fields: &[(&str, &str)]) -> Result<String, WriteError> {
    let fields = fields
        .iter()
        .map(|&(name, value)| (name.as_bytes(), value.as_bytes()));
    let mut out = b"before".to_vec();
    let result = forward.write(fields, &mut out);
    if result.is_err() {
        assert_eq!(out, b"before", "nothing written");
    }
    result.map(|()| String::from_utf8(out.split_off(6)).unwrap())
}

#[test]
fn a_request_is_written_with_its_end_to_end_fields_and_the_proxys_own() {
    let text = written(
        &forward("POST", "/submit?x=1", b"hello"),
        &[
            ("Accept", "*/*"),
            ("Host", "example.com:8080"),
            ("Content-Type", " text/plain "),
            ("Content-Length", "5"),
            ("Via", "1.1 other"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "POST /submit?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\
Content-Type: text/plain\r\nVia: 1.1 other\r\nVia: 1.1 gnosis\r\nX-Forwarded-For: 192.0.2.7\r\n\
X-Forwarded-Proto: http\r\nContent-Length: 5\r\n\r\nhello"
    );
    // The server's own parser reads it as it was meant.
    let Parsed::Complete {
        request,
        len,
        keep_alive,
    } = crate::h1::parse(text.as_bytes(), MAX_BODY, &Chunked::default())
    else {
        panic!("{text}");
    };
    assert_eq!(
        (request.method, request.path, request.query(), request.body),
        (Method::Post, "/submit", "x=1", &b"hello"[..])
    );
    assert_eq!((len, keep_alive), (text.len(), true));
}

#[test]
fn via_names_the_clients_protocol_and_the_forwarded_fields_its_address_and_scheme() {
    let mut request = forward("GET", "*", b"");
    request.method = b"OPTIONS";
    request.version = Version::Http2;
    request.client = Some(IpAddr::V6(Ipv6Addr::LOCALHOST));
    request.https = true;
    let text = written(
        &request,
        &[
            ("host", "a"),
            ("X-Forwarded-For", "6.6.6.6"),
            ("x-forwarded-proto", "http"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "OPTIONS * HTTP/1.1\r\nHost: a\r\nVia: 2 gnosis\r\nX-Forwarded-For: ::1\r\n\
X-Forwarded-Proto: https\r\n\r\n"
    );
    for (version, via) in [
        (Version::Http10, "1.0"),
        (Version::Http11, "1.1"),
        (Version::Http3, "3"),
    ] {
        request.version = version;
        let text = written(&request, &[("Host", "a")]).unwrap();
        assert!(
            text.contains(&format!("\r\nVia: {via} gnosis\r\n")),
            "{text}"
        );
    }
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_not_forwarded() {
    let text = written(
        &forward("GET", "/", b""),
        &[
            ("Host", "a"),
            ("Connection", "keep-alive, X-Secret,,"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "trailers"),
            ("Trailer", "X-T"),
            ("Upgrade", "websocket"),
            ("x-secret", "1"),
            ("Expect", "100-continue"),
            ("connection", "X-Other"),
            ("X-Other", "2"),
            ("X-Kept", "3"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "GET / HTTP/1.1\r\nHost: a\r\nX-Kept: 3\r\nVia: 1.1 gnosis\r\n\
X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
    // Host is never hop-by-hop, nor are the fields this proxy writes.
    let text = written(
        &forward("GET", "/", b""),
        &[("Host", "a"), ("Connection", "Host, X-Forwarded-For, Via")],
    )
    .unwrap();
    assert!(
        text.starts_with(
            "GET / HTTP/1.1\r\nHost: a\r\nVia: 1.1 gnosis\r\nX-Forwarded-For: 192.0.2.7\r\n"
        ),
        "{text}"
    );
}

#[test]
fn content_length_is_the_bodys_and_written_when_there_is_one() {
    let length = |body: &[u8], fields: &[(&str, &str)]| {
        let text = written(&forward("POST", "/", body), fields).unwrap();
        text.split("\r\n")
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .map(str::to_string)
    };
    assert_eq!(length(b"", &[("Host", "a")]), None);
    assert_eq!(length(b"abc", &[("Host", "a")]).as_deref(), Some("3"));
    // The client's own, whatever it says, is replaced.
    assert_eq!(
        length(b"abc", &[("Host", "a"), ("Content-Length", "999")]).as_deref(),
        Some("3")
    );
    // A body announced, even empty, is framed; a chunked one is sent with its length.
    assert_eq!(
        length(b"", &[("Host", "a"), ("Content-Length", "0")]).as_deref(),
        Some("0")
    );
    assert_eq!(
        length(b"ab", &[("Host", "a"), ("Transfer-Encoding", "chunked")]).as_deref(),
        Some("2")
    );
}

#[test]
fn what_could_end_a_line_or_confuse_the_upstream_is_refused() {
    use WriteError::{FieldName, FieldValue, Host, Method, Target};
    let host = ("Host", "a");
    let fields: [(&[(&str, &str)], WriteError); 15] = [
        (&[host, ("X-A", "a\r\nX-B: b")], FieldValue),
        (&[host, ("X-A", "a\rb")], FieldValue),
        (&[host, ("X-A", "a\nb")], FieldValue),
        (&[host, ("X-A", "a\0b")], FieldValue),
        // A field that would be dropped is checked too.
        (
            &[host, ("Keep-Alive", "\r\n\r\nGET /admin HTTP/1.1")],
            FieldValue,
        ),
        (&[host, ("X-A\r\nX-B", "b")], FieldName),
        (&[host, ("X-A: b\r\nX-C", "c")], FieldName),
        (&[host, ("X A", "b")], FieldName),
        (&[host, ("", "b")], FieldName),
        (&[host, ("X-A:", "b")], FieldName),
        (&[], Host),
        (&[host, ("host", "a")], Host),
        (&[("Host", "a b")], Host),
        (&[("Host", "a/b")], Host),
        (&[("Host", "user@a")], Host),
    ];
    for (fields, error) in fields {
        let request = forward("GET", "/", b"");
        assert_eq!(written(&request, fields), Err(error), "{fields:?}");
    }
    let lines = [
        ("GET /admin HTTP/1.1\r\n", "/", Method),
        ("GET /", "/", Method),
        ("", "/", Method),
        ("CONNECT", "/", Method),
        ("GET", "/ HTTP/1.1\r\nHost: b\r\n\r\nGET /", Target),
        ("GET", "/a b", Target),
        ("GET", "/a\tb", Target),
        ("GET", "/\u{e9}", Target),
        ("GET", "", Target),
        ("GET", "http://a/", Target),
    ];
    for (method, target, error) in lines {
        let request = forward(method, target, b"");
        assert_eq!(
            written(&request, &[host]),
            Err(error),
            "{method:?} {target:?}"
        );
    }
}

// Whatever comes.

/// One response as an upstream could send it, with the body its request should get.
#[derive(Clone, Debug)]
struct Sent {
    head_request: bool,
    bytes: Vec<u8>,
    body: Vec<u8>,
}

/// A response that keeps the connection, of any framing, with interim responses before
/// it, chunked into chunks of any sizes with extensions and trailers.
fn response() -> impl Strategy<Value = Sent> {
    (
        prop::sample::select(vec![200u16, 201, 204, 304, 404, 500]),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 0..200),
        any::<bool>(),
        prop::collection::vec(1..50usize, 1..8),
        prop::sample::select(vec!["", ";a", ";a=b ; c=\"d\"", " ;x"]),
        prop::sample::select(vec!["", "X-T: 1\r\n", "A: \r\nB:\tc\r\n"]),
        prop::collection::vec(prop::sample::select(vec![100u16, 103]), 0..3),
        prop::sample::select(vec!["1.1", "1.0"]),
    )
        .prop_map(
            |(
                status,
                head_request,
                body,
                chunked,
                sizes,
                extension,
                trailers,
                interim,
                version,
            )| {
                let mut bytes = Vec::new();
                for status in interim {
                    bytes.extend_from_slice(
                        format!("HTTP/1.1 {status} Interim\r\nLink: </a>\r\n\r\n").as_bytes(),
                    );
                }
                let (chunked, connection) = match version {
                    "1.0" => (false, "Connection: keep-alive\r\n"),
                    _ => (chunked, ""),
                };
                let framing = match chunked {
                    true => "Transfer-Encoding: chunked".to_string(),
                    false => format!("Content-Length: {}", body.len()),
                };
                bytes.extend_from_slice(
                    format!("HTTP/{version} {status} X\r\nX-A: a\r\n{connection}{framing}\r\n\r\n")
                        .as_bytes(),
                );
                let has_body = !head_request && status != 204 && status != 304;
                if !has_body {
                    return Sent {
                        head_request,
                        bytes,
                        body: Vec::new(),
                    };
                }
                match chunked {
                    false => bytes.extend_from_slice(&body),
                    true => {
                        let mut rest = &body[..];
                        let mut n = 0;
                        while !rest.is_empty() {
                            let (chunk, after) =
                                rest.split_at(sizes[n % sizes.len()].min(rest.len()));
                            bytes.extend_from_slice(
                                format!("{:x}{extension}\r\n", chunk.len()).as_bytes(),
                            );
                            bytes.extend_from_slice(chunk);
                            bytes.extend_from_slice(b"\r\n");
                            rest = after;
                            n += 1;
                        }
                        bytes.extend_from_slice(format!("0\r\n{trailers}\r\n").as_bytes());
                    }
                }
                Sent {
                    head_request,
                    bytes,
                    body,
                }
            },
        )
}

/// `bytes` cut at the points `cuts` pick.
fn cut<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for point in points.into_iter().chain([bytes.len()]) {
        pieces.push(&bytes[from..point]);
        from = point;
    }
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Pipelined responses of every framing, cut anywhere, give the events of the whole:
    /// each response's body whole, each its end, the caller never holding a head's worth.
    #[test]
    fn pipelined_responses_cut_anywhere_give_the_same_events(
        sent in prop::collection::vec(response(), 1..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let bytes = sent.iter().flat_map(|sent| sent.bytes.clone()).collect::<Vec<_>>();
        let heads = sent.iter().map(|sent| sent.head_request).collect::<Vec<_>>();
        let (whole, _) = receive(&[&bytes], &heads, false);
        let bodies: Vec<&[u8]> = whole
            .iter()
            .filter_map(|seen| match seen {
                Seen::Body(body) => Some(&body[..]),
                _ => None,
            })
            .collect();
        let expected: Vec<&[u8]> = sent
            .iter()
            .map(|sent| &sent.body[..])
            .filter(|body| !body.is_empty())
            .collect();
        prop_assert_eq!(bodies, expected);
        let ends = whole.iter().filter(|seen| **seen == Seen::End { keep_alive: true }).count();
        prop_assert_eq!(ends, sent.len());
        let (pieces, held) = receive(&cut(&bytes, &cuts), &heads, false);
        prop_assert_eq!(pieces, whole);
        prop_assert!(held < MAX_HEAD);
    }

    /// Any bytes in any pieces, for any requests, whatever the close: no panic, the same
    /// events (or error) however they are cut, and less than a head held between reads.
    #[test]
    fn any_bytes_cut_anywhere_give_the_same_events_without_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        sent in prop::collection::vec(any::<bool>(), 0..4),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        eof in any::<bool>(),
    ) {
        let (whole, _) = receive(&[&bytes], &sent, eof);
        let (pieces, held) = receive(&cut(&bytes, &cuts), &sent, eof);
        prop_assert_eq!(pieces, whole);
        prop_assert!(held < MAX_HEAD);
    }

    /// Responses with a few bytes changed, the shape of what a broken or hostile upstream
    /// sends: the same, where the bytes reach deeper than random ones do.
    #[test]
    fn near_miss_responses_cut_anywhere_give_the_same_events_without_panic(
        sent in prop::collection::vec(response(), 1..4),
        flips in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(b"\r\n\0 :;,-0123456789abcdefxHTP/\t".to_vec())), 1..4),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        eof in any::<bool>(),
    ) {
        let mut bytes = sent.iter().flat_map(|sent| sent.bytes.clone()).collect::<Vec<_>>();
        for (at, byte) in flips {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        let heads = sent.iter().map(|sent| sent.head_request).collect::<Vec<_>>();
        let (whole, _) = receive(&[&bytes], &heads, eof);
        let (pieces, held) = receive(&cut(&bytes, &cuts), &heads, eof);
        prop_assert_eq!(pieces, whole);
        prop_assert!(held < MAX_HEAD);
    }

    /// A head's fields are httparse's, in order, but the hop-by-hop ones.
    #[test]
    fn a_heads_fields_are_httparses_but_the_hop_by_hop_ones(
        fields in prop::collection::vec(
            (
                prop::sample::select(vec!["X-A", "Connection", "keep-alive", "Set-Cookie", "TE", "x-b", "Upgrade"]),
                prop::sample::select(vec!["", "v", " a b ", "x-a", "close, x-b", "\t1\t"]),
            ),
            0..12,
        ),
    ) {
        let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
        for (name, value) in &fields {
            bytes.extend_from_slice(format!("{name}:{value}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        prop_assert!(response.parse(&bytes).unwrap().is_complete());
        let named: Vec<String> = response
            .headers
            .iter()
            .filter(|header| header.name.eq_ignore_ascii_case("connection"))
            .flat_map(|header| String::from_utf8_lossy(header.value).split(',').map(|option| option.trim().to_ascii_lowercase()).collect::<Vec<_>>())
            .collect();
        let expected: Vec<(String, String)> = response
            .headers
            .iter()
            .filter(|header| {
                let name = header.name.to_ascii_lowercase();
                !["connection", "keep-alive", "te", "upgrade"].contains(&name.as_str())
                    && !named.contains(&name)
            })
            .map(|header| field(header.name, &String::from_utf8_lossy(header.value)))
            .collect();
        prop_assert_eq!(head(&one(&bytes)).3, expected);
    }
}
