use proptest::prelude::*;

use super::*;
use crate::http::huffman::hex;
use crate::http::{Body, Encoding, FieldLines, Method, Status};

type FieldList = Vec<(Vec<u8>, Vec<u8>)>;

/// Every field of `section`, as our decoder reads it.
fn decoded(section: &[u8]) -> Result<FieldList, DecodeError> {
    let mut fields = Vec::new();
    let mut scratch = Vec::new();
    decode::<()>(section, &mut scratch, |name, value| {
        fields.push((name.to_vec(), value.to_vec()));
        Ok(())
    })
    .map_err(|refused| match refused {
        Refused::Decode(error) => error,
        Refused::Field(()) => unreachable!(),
    })?;
    Ok(fields)
}

/// `fields` encoded by the independent encoder (static references, Huffman everywhere).
fn their_section(fields: &[(&str, &str)]) -> Vec<u8> {
    let fields: Vec<_> = fields
        .iter()
        .map(|&(name, value)| {
            ::qpack::HeaderField::new(name.as_bytes().to_vec(), value.as_bytes().to_vec())
        })
        .collect();
    let mut section = Vec::new();
    ::qpack::encode_stateless(&mut section, fields).unwrap();
    section
}

/// `section` as the independent decoder reads it.
fn their_reading(section: &[u8]) -> FieldList {
    let mut bytes = section;
    let decoded = ::qpack::decode_stateless(&mut bytes, u64::MAX).unwrap();
    decoded
        .fields
        .into_iter()
        .map(|field| {
            let (name, value) = field.into_inner();
            (name.into_owned(), value.into_owned())
        })
        .collect()
}

fn owned(fields: &[(&str, &str)]) -> FieldList {
    fields
        .iter()
        .map(|&(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
        .collect()
}

#[test]
fn rfc_9204_b_1_a_literal_with_a_static_name_reference() {
    let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    assert_eq!(decoded(&section), Ok(owned(&[(":path", "/index.html")])));
}

#[test]
fn the_static_table_is_rfc_9204_appendix_a_as_another_encoder_has_it() {
    assert_eq!(table::STATIC.len(), 99);
    for (index, &(name, value)) in table::STATIC.iter().enumerate() {
        let field = (
            std::str::from_utf8(name).unwrap(),
            std::str::from_utf8(value).unwrap(),
        );
        let section = their_section(&[field]);
        // Each field whole is one indexed line: the same index in both tables.
        let mut expected = vec![0, 0];
        prefixed::write(&mut expected, index, 6, 0xc0);
        assert_eq!(section, expected, "{field:?}");
        assert_eq!(decoded(&section), Ok(owned(&[field])));
    }
    assert_eq!(table::find(b":status", b"200"), Some(25));
    assert_eq!(table::find_name(b"content-type"), Some(table::CONTENT_TYPE));
}

#[test]
fn a_request_another_encoder_wrote_is_read_whole() {
    let section = their_section(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/grpc.Service/GetSum?x=1"),
        ("content-type", "application/grpc"),
        ("grpc-encoding", "identity"),
        ("accept-encoding", "gzip, br"),
        ("te", "trailers"),
        ("user-agent", "tests/0.1 (a long value, Huffman-coded)"),
        ("content-length", "5"),
    ]);
    let head = Decoder::default()
        .request(&section, 16 * 1024, false)
        .unwrap();
    assert_eq!(head.method(), Method::Post);
    assert_eq!(head.scheme(), "https");
    assert_eq!(head.authority(), "example.com");
    assert_eq!(head.content_length, Some(5));
    let request = head.request(b"hello");
    assert_eq!(request.version, crate::http::Version::Http3);
    assert_eq!(
        (request.path, request.query()),
        ("/grpc.Service/GetSum", "x=1")
    );
    assert_eq!(request.fields.content_type, Some(&b"application/grpc"[..]));
    assert_eq!(request.fields.grpc_encoding, Some(&b"identity"[..]));
    assert!(request
        .fields
        .accept_encoding
        .preferred()
        .any(|coding| coding == Coding::Br));
    assert_eq!(request.body, b"hello");
}

/// A date fixed for the tests.
fn date() -> HttpDate {
    HttpDate::new()
}

#[test]
fn answers_round_trip_through_both_decoders() {
    let date = date();
    let date_text = std::str::from_utf8(date.as_bytes()).unwrap().to_string();
    let mut coded = Answer::ok(ContentType::Css, b"a{}");
    coded.encoding = Encoding {
        coding: Some(Coding::Br),
        vary: true,
    };
    let answers = [
        (
            Answer::ok(ContentType::Plain, b"Hello, World!"),
            vec![
                (":status", "200"),
                ("content-type", "text/plain"),
                ("content-length", "13"),
            ],
        ),
        (
            Answer::error(Status::MethodNotAllowed),
            vec![
                (":status", "405"),
                ("allow", "GET, HEAD"),
                ("content-type", "text/plain"),
                ("content-length", "18"),
            ],
        ),
        (
            Answer::new(Status::Ok, ContentType::Grpc, b""),
            vec![
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("content-length", "0"),
            ],
        ),
        (
            coded,
            vec![
                (":status", "200"),
                ("content-type", "text/css"),
                ("content-encoding", "br"),
                ("vary", "accept-encoding"),
                ("content-length", "3"),
            ],
        ),
    ];
    for (answer, fields) in answers {
        let mut section = Vec::new();
        encode_answer(&mut section, &answer, answer.content_length(false), &date);
        let mut expected = owned(&fields);
        expected.extend(owned(&[("date", &date_text), ("server", "gnosis")]));
        assert_eq!(decoded(&section), Ok(expected.clone()));
        assert_eq!(their_reading(&section), expected);
    }
}

#[test]
fn answers_use_the_static_table() {
    let mut section = Vec::new();
    encode_answer(
        &mut section,
        &Answer::ok(ContentType::Json, b"{}"),
        Some(2),
        &date(),
    );
    // Prefix, :status 200 (25), content-type application/json (46), content-length with
    // its static name (4) and "2", then date and server.
    assert_eq!(section[..7], [0, 0, 0xc0 | 25, 0xc0 | 46, 0x54, 0x01, b'2']);
    // The date is Huffman-coded (its H bit), shorter than its 29 bytes.
    assert_eq!(section[7], 0x50 | table::DATE as u8);
    assert!(section[8] & 0x80 != 0 && usize::from(section[8] & 0x7f) < 29);
}

#[test]
fn trailers_are_a_section_of_their_own() {
    let answer = Answer::ok(ContentType::Grpc, b"")
        .with_trailers([Some((b"grpc-status", b"0")), Some((b"grpc-message", b"OK"))]);
    let mut section = Vec::new();
    encode_fields(&mut section, answer.trailers());
    let expected = owned(&[("grpc-status", "0"), ("grpc-message", "OK")]);
    assert_eq!(decoded(&section), Ok(expected.clone()));
    assert_eq!(their_reading(&section), expected);
    let mut decoder = Decoder::default();
    assert_eq!(decoder.trailers(&section, 1024), Ok(()));
    assert_eq!(
        decoder.trailers(&their_section(&[(":path", "/")]), 1024),
        Err(SectionError::Malformed)
    );
}

#[test]
fn every_reference_to_the_dynamic_table_and_every_broken_encoding_fail() {
    let cases = [
        // Required Insert Count 1.
        ("0100 d1", DecodeError::DynamicTable),
        // A negative Base (sign 1).
        ("0080 d1", DecodeError::DynamicTable),
        // Indexed field line, T = 0: the dynamic table.
        ("0000 80", DecodeError::DynamicTable),
        // Indexed field line with post-base index.
        ("0000 10", DecodeError::DynamicTable),
        // Literal with a dynamic name reference.
        ("0000 40 01 61", DecodeError::DynamicTable),
        // Literal with a post-base name reference.
        ("0000 00 01 61", DecodeError::DynamicTable),
        // Static index 99, past the table.
        ("0000 ff24", DecodeError::IndexOutOfRange),
        // Cut short: no prefix, half a prefix, a string longer than the section.
        ("", DecodeError::Truncated),
        ("00", DecodeError::Truncated),
        ("0000 5105 2f", DecodeError::Truncated),
        ("0000 2361 62", DecodeError::Truncated),
        // An integer past 32 bits.
        ("0000 ffff ffff ffff 7f", DecodeError::IntegerOverflow),
        // Huffman-coded value: eight bits of padding.
        (
            "0000 5181 ff",
            DecodeError::Huffman(huffman::HuffmanError::Padding),
        ),
    ];
    for (section, error) in cases {
        let section = hex(section);
        assert_eq!(decoded(&section), Err(error), "{section:02x?}");
        let refused = Decoder::default().request(&section, 4096, false);
        assert_eq!(refused.err(), Some(SectionError::Decompression));
    }
    assert_eq!(
        SectionError::Decompression.error(),
        H3Error::Connection(ErrorCode::QpackDecompressionFailed)
    );
}

#[test]
fn malformed_requests_are_message_errors() {
    let base = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut fields = base.to_vec();
        fields.extend_from_slice(extra);
        fields
    };
    let refused = [
        with(&[("accept", "*/*"), (":authority", "late.example")]),
        with(&[("Accept", "*/*")]),
        with(&[("connection", "close")]),
        with(&[("keep-alive", "5")]),
        with(&[("transfer-encoding", "chunked")]),
        with(&[("upgrade", "websocket")]),
        with(&[("proxy-connection", "close")]),
        with(&[("te", "gzip")]),
        with(&[(":protocol", "websocket")]),
        with(&[(":path", "/again")]),
        with(&[("content-length", "1x")]),
        vec![(":method", "GET"), (":path", "/")],
        vec![(":method", "GET"), (":scheme", "https"), (":path", "")],
        vec![(":method", "CONNECT"), (":scheme", "https"), (":path", "/")],
    ];
    for fields in refused {
        let section = their_section(&fields);
        let refused = Decoder::default().request(&section, 4096, false);
        assert_eq!(refused.err(), Some(SectionError::Malformed), "{fields:?}");
    }
    assert_eq!(
        SectionError::Malformed.error(),
        H3Error::Stream(ErrorCode::MessageError)
    );
    let fine = [
        with(&[("te", "trailers")]),
        vec![(":method", "CONNECT"), (":authority", "example.com:443")],
        vec![(":method", "OPTIONS"), (":scheme", "https"), (":path", "*")],
    ];
    for fields in fine {
        let section = their_section(&fields);
        assert!(
            Decoder::default().request(&section, 4096, false).is_ok(),
            "{fields:?}"
        );
    }
}

#[test]
fn a_section_past_the_limit_is_too_large() {
    let long = "x".repeat(200);
    let mut fields = vec![(":method", "GET"), (":scheme", "https"), (":path", "/")];
    fields.extend(std::iter::repeat_n(("x-long", long.as_str()), 20));
    let section = their_section(&fields);
    let mut decoder = Decoder::default();
    assert_eq!(
        decoder.request(&section, 4096, false).err(),
        Some(SectionError::TooLarge)
    );
    assert!(decoder.request(&section, 8192, false).is_ok());
}

proptest! {
    #[test]
    fn any_bytes_decode_or_are_refused_within_bounds(
        section in proptest::collection::vec(any::<u8>(), 0..200)
    ) {
        let mut decoder = Decoder::default();
        if let Ok(head) = decoder.request(&section, 1024, false) {
            prop_assert!(head.capacity() <= 1024);
        }
        // The scratch holds one field's strings at most, Huffman-decoded.
        prop_assert!(decoder.held() <= section.len() * 8 / 5 + 16);
    }

    #[test]
    fn fields_another_encoder_wrote_decode_the_same(
        fields in proptest::collection::vec(
            ("[a-z][a-z0-9-]{0,20}", "[ -~]{0,40}"), 0..8)
    ) {
        let fields: Vec<(&str, &str)> =
            fields.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
        let section = their_section(&fields);
        prop_assert_eq!(decoded(&section), Ok(owned(&fields)));
    }
}

/// Sections ls-qpack (LiteSpeed's C library, through its Python binding) encoded for a
/// decoder with no dynamic table, kept here as its bytes: another encoder's choices
/// (static references, Huffman where shorter, non-ASCII bytes), read by ours.
#[test]
fn sections_ls_qpack_encoded_are_read() {
    let curl = hex("0000d1d7508aa0e41d139d09b8f34d33518762ba066a925f295f508825b650c3cbb6b83fdd");
    assert_eq!(
        decoded(&curl),
        Ok(owned(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost:8443"),
            (":path", "/plaintext"),
            ("user-agent", "curl/8.5.0"),
            ("accept", "*/*"),
        ]))
    );
    let form = hex(
        "0000d4d750882f91d35d055c87a7519162dae838e4ff2a1d25806a8811fc79803fef54023131df5f398b\
         2d4b70ddf45abefb4005df559a4150831ea8001132d36e3af3e38c92165fb51339692c120ecebf2ef2b1\
         2d424f4f08c3a974c3a9207f7e",
    );
    let mut expected = owned(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/upload?name=a%20b&x=1"),
        ("content-type", "application/x-www-form-urlencoded"),
        ("content-length", "11"),
        ("accept-encoding", "gzip, deflate, br"),
        ("accept-language", "en-US,en;q=0.9"),
        ("cookie", "session=0123456789abcdef; theme=dark"),
    ]);
    expected.push((b"x-custom".to_vec(), b"\xc3\xa9t\xc3\xa9 \x7f~".to_vec()));
    assert_eq!(decoded(&form), Ok(expected));
    let head = Decoder::default().request(&form, 4096, false).unwrap();
    let request = head.request(b"");
    assert_eq!(
        (request.path, request.query()),
        ("/upload", "name=a%20b&x=1")
    );
    assert_eq!(head.content_length, Some(11));
}

#[test]
fn connection_specific_fields_of_an_answer_are_not_written() {
    let mut section = Vec::new();
    let answer = Answer::error(Status::UpgradeRequired);
    encode_answer(&mut section, &answer, answer.content_length(false), &date());
    let fields = decoded(&section).unwrap();
    assert!(fields.iter().all(|(name, _)| name != b"upgrade"));
    assert!(fields.contains(&(b"sec-websocket-version".to_vec(), b"13".to_vec())));
}

#[test]
fn a_forwarded_answer_is_encoded_with_its_fields_lowercased_and_its_own_length() {
    let upstream = b"Content-Type: application/json\r\nLocation: /items/7\r\n\
        Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\
        Connection: keep-alive\r\nTransfer-Encoding: chunked\r\nETag: \"x\"\r\n\
        X-A-Name-Longer-Than-Any-In-The-Static-Table: 1\r\n";
    let answer = Answer::forwarded(
        Status::from_code(201),
        FieldLines::new(upstream, 0),
        Body::Bytes(b"{}"),
    );
    let mut section = Vec::new();
    encode_answer(&mut section, &answer, answer.content_length(false), &date());
    let date_text = String::from_utf8(date().as_bytes().to_vec()).unwrap();
    let expected = owned(&[
        (":status", "201"),
        ("content-type", "application/json"),
        ("location", "/items/7"),
        ("set-cookie", "a=1; Path=/"),
        ("set-cookie", "b=2"),
        ("etag", "\"x\""),
        ("x-a-name-longer-than-any-in-the-static-table", "1"),
        ("content-length", "2"),
        ("date", &date_text),
        ("server", "gnosis"),
    ]);
    assert_eq!(decoded(&section), Ok(expected.clone()));
    assert_eq!(their_reading(&section), expected);
    // The upstream's Date and Server stand for ours; a HEAD's length is the upstream's.
    let upstream = b"date: Tue, 01 Jan 2030 00:00:00 GMT\r\nServer: upstream\r\n\
        content-length: 1234\r\n";
    let answer = Answer::forwarded(Status::Ok, FieldLines::new(upstream, 0), Body::Bytes(b""));
    let mut section = Vec::new();
    encode_answer(&mut section, &answer, answer.content_length(true), &date());
    let expected = owned(&[
        (":status", "200"),
        ("date", "Tue, 01 Jan 2030 00:00:00 GMT"),
        ("server", "upstream"),
        ("content-length", "1234"),
    ]);
    assert_eq!(decoded(&section), Ok(expected));
}

#[test]
fn a_request_keeps_its_fields_as_lines_when_told_to() {
    let section = their_section(&[
        (":method", "PATCH"),
        (":scheme", "https"),
        (":path", "/items/7?x=1"),
        ("host", "example.com"),
        ("cookie", "a=1"),
        ("cookie", "b=2"),
        ("x-trace", "abc"),
    ]);
    for keep_fields in [false, true] {
        let head = Decoder::default()
            .request(&section, 4096, keep_fields)
            .unwrap();
        let request = head.request(b"");
        assert_eq!(request.method_bytes, b"PATCH");
        assert_eq!(request.target, "/items/7?x=1");
        // No `:authority`: the `host` field's value.
        assert_eq!(request.authority, b"example.com");
        let lines: Vec<_> = request.field_lines.iter().collect();
        match keep_fields {
            false => assert!(lines.is_empty()),
            true => assert_eq!(
                lines,
                [
                    (&b"host"[..], &b"example.com"[..]),
                    (b"cookie", b"a=1"),
                    (b"cookie", b"b=2"),
                    (b"x-trace", b"abc"),
                ]
            ),
        }
    }
}
