//! `GetSum` on hand-written messages: the issue's example, protobuf's reading rules, each
//! refusal with its status, and random requests against an encoder of the test's own.

use proptest::prelude::*;

use super::*;
use crate::http::Body;

/// A body: the flag, the big-endian length, the message.
fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut body = vec![flag];
    body.extend_from_slice(&(message.len() as u32).to_be_bytes());
    body.extend_from_slice(message);
    body
}

fn call(body: &[u8]) -> Result<Vec<u8>, GrpcStatus> {
    let mut out = b"before".to_vec();
    get_sum(None, body, &mut out).map(|()| out[b"before".len()..].to_vec())
}

/// The sum a message answers, read back from the reply.
fn sum_of(message: &[u8]) -> Result<i32, GrpcStatus> {
    let reply = call(&framed(0, message))?;
    assert_eq!(reply[0], 0, "an uncompressed reply");
    assert_eq!(reply[1..5], ((reply.len() - 5) as u32).to_be_bytes());
    Ok(match &reply[5..] {
        [] => 0,
        [0x08, varint @ ..] => {
            let mut reader = Reader(varint);
            let value = reader.varint().unwrap() as i32;
            assert!(reader.0.is_empty(), "one field: {reply:x?}");
            value
        }
        other => panic!("not a SumReply: {other:x?}"),
    })
}

fn varint(value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write_varint(&mut out, value);
    out
}

/// Field `field` of wire type 0 holding the int32 `value` (10 bytes when negative).
fn int32_field(field: u64, value: i32) -> Vec<u8> {
    let mut out = varint(field << 3);
    out.extend(varint(i64::from(value) as u64));
    out
}

#[test]
fn the_issues_example() {
    let reply = call(&[0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02]).unwrap();
    assert_eq!(reply, [0, 0, 0, 0, 2, 0x08, 0x03]);
}

#[test]
fn negative_numbers_take_ten_bytes_each_way() {
    let message = [int32_field(1, -5), int32_field(2, 2)].concat();
    assert_eq!(message.len(), 13);
    let reply = call(&framed(0, &message)).unwrap();
    let mut expected = vec![0, 0, 0, 0, 11, 0x08];
    expected.extend_from_slice(&[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert_eq!(reply, expected);
}

#[test]
fn protobufs_reading_rules() {
    let cases: [(&[u8], i32); 11] = [
        // Nothing: both default to 0, and so does the reply (an empty message).
        (&[], 0),
        (&[0x08, 0x01, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f], 0),
        // Fields in any order; the last of a repeated field wins.
        (&[0x10, 0x02, 0x08, 0x01], 3),
        (&[0x08, 0x01, 0x08, 0x05, 0x10, 0x02], 7),
        // A varint padded with zero groups is still the number.
        (&[0x08, 0x81, 0x80, 0x80, 0x00, 0x10, 0x00], 1),
        // Over 32 bits: the low 32 (2^32 + 3 is 3).
        (&[0x08, 0x83, 0x80, 0x80, 0x80, 0x10], 3),
        // Unknown fields of every wire type, skipped: 3 varint, 4 i64, 5 len, 6 i32.
        (
            &[
                0x18, 0x96, 0x01, 0x21, 1, 2, 3, 4, 5, 6, 7, 8, 0x2a, 0x02, 0x08, 0x09, 0x35, 1, 2,
                3, 4, 0x08, 0x04,
            ],
            4,
        ),
        // A group (field 7) holding a field 1 and a nested group (field 8): not a's.
        (
            &[
                0x3b, 0x08, 0x63, 0x43, 0x10, 0x01, 0x44, 0x3c, 0x08, 0x02, 0x10, 0x02,
            ],
            4,
        ),
        // A known field of another wire type is skipped as unknown (field 1 as len).
        (&[0x08, 0x02, 0x0a, 0x01, 0x05], 2),
        // The largest field number.
        (&[0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x10, 0x06], 6),
        // The sum wraps as int32 addition does.
        (&[0x08, 0xff, 0xff, 0xff, 0xff, 0x07, 0x10, 0x01], i32::MIN),
    ];
    for (message, expected) in cases {
        assert_eq!(sum_of(message), Ok(expected), "{message:x?}");
    }
}

#[test]
fn malformed_messages_are_internal() {
    let nested = [vec![0x3b; 101], vec![0x3c; 101]].concat();
    let cases: [&[u8]; 14] = [
        // Truncated varints: a value, a tag.
        &[0x08, 0x80],
        &[0x08, 0x01, 0x90],
        // Eleven bytes; ten whose last holds more than bit 63.
        &[
            0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ],
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ],
        // Wire types 6 and 7, field number 0, one past the largest.
        &[0x0e, 0x00],
        &[0x0f, 0x00],
        &[0x00, 0x01],
        &[0x80, 0x80, 0x80, 0x80, 0x10, 0x00],
        // Lengths past the end: len, i64, i32.
        &[0x2a, 0x03, 0x01, 0x02],
        &[0x21, 1, 2, 3],
        &[0x35, 1],
        // Groups: an end never begun, one never ended, another's end.
        &[0x3c],
        &[0x3b, 0x08, 0x01],
        &[0x3b, 0x44],
    ];
    for message in cases.iter().copied().chain([&nested[..]]) {
        let status = call(&framed(0, message)).unwrap_err();
        assert_eq!(status.code, Code::Internal, "{message:x?}: {status:?}");
    }
    // 100 groups deep is still read.
    let deep = [vec![0x3b; 100], vec![0x3c; 100]].concat();
    assert_eq!(sum_of(&deep), Ok(0));
}

#[test]
fn framing_errors_have_their_grpc_codes() {
    let message = [0x08, 0x01, 0x10, 0x02];
    let two = [framed(0, &message), framed(0, &message)].concat();
    let gzip: Option<&[u8]> = Some(b"gzip");
    let identity: Option<&[u8]> = Some(b"identity");
    let cases = [
        (None, vec![], Code::Unimplemented),
        (None, vec![0, 0, 0], Code::Internal),
        (None, framed(0, &message)[..8].to_vec(), Code::Internal),
        (None, two, Code::Unimplemented),
        (
            None,
            [framed(0, &message), vec![0]].concat(),
            Code::Unimplemented,
        ),
        (None, framed(1, &message), Code::Internal),
        (identity, framed(1, &message), Code::Internal),
        (gzip, framed(1, &message), Code::Unimplemented),
        (None, framed(2, &message), Code::Internal),
        (None, framed(0x80, &message), Code::Internal),
    ];
    for (encoding, body, code) in cases {
        let mut out = Vec::new();
        let status = get_sum(encoding, &body, &mut out).unwrap_err();
        assert_eq!(status.code, code, "{body:x?}: {status:?}");
        assert!(out.is_empty());
        // A valid grpc-message as it is: printable ASCII, no '%' to escape.
        assert!(
            status
                .message
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'%'),
            "{status:?}"
        );
    }
    // An uncompressed message under a declared encoding is read.
    let mut out = Vec::new();
    get_sum(gzip, &framed(0, &message), &mut out).unwrap();
    assert_eq!(out, [0, 0, 0, 0, 2, 0x08, 0x03]);
    assert_eq!((Code::Unimplemented as u8, Code::Internal as u8), (12, 13));
}

proptest! {
    #[test]
    fn random_requests_get_their_wrapped_sum(
        a in any::<i32>(),
        b in any::<i32>(),
        unknown in proptest::collection::vec((3u64..1000, any::<u64>()), 0..4),
    ) {
        let mut message = int32_field(2, b);
        for (field, value) in unknown {
            message.extend(varint(field << 3));
            message.extend(varint(value));
        }
        message.extend(int32_field(1, a));
        prop_assert_eq!(sum_of(&message), Ok(a.wrapping_add(b)));
    }

    #[test]
    fn any_bytes_get_a_reply_or_a_status(body in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = call(&body);
        let _ = sum_of(&body);
    }
}

/// What `respond` answers: the status, content type, trailers and body.
fn answered(content_type: &[u8], body: &[u8]) -> (u16, String, Vec<(String, String)>, Vec<u8>) {
    let fields = Fields {
        content_type: Some(content_type),
        ..Fields::default()
    };
    let mut message = Vec::new();
    let answer = respond(&fields, body, &mut message);
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
    let Body::Bytes(body) = answer.body else {
        panic!("a gRPC answer is bytes");
    };
    (
        answer.status.code(),
        text(answer.content_type.value()),
        answer
            .trailers()
            .map(|(name, value)| (text(name), text(value)))
            .collect(),
        body.to_vec(),
    )
}

#[test]
fn respond_answers_the_reply_with_grpc_status_0_or_the_failure_in_trailers() {
    let field = |name: &str, value: &str| (name.to_string(), value.to_string());
    let request = [0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02];
    assert_eq!(
        answered(b"application/grpc", &request),
        (
            200,
            "application/grpc".to_string(),
            vec![field("grpc-status", "0")],
            vec![0, 0, 0, 0, 2, 0x08, 0x03]
        )
    );
    assert_eq!(answered(b"application/grpc+proto", &request).0, 200);
    let truncated = answered(b"application/grpc", &request[..7]);
    assert_eq!(
        truncated,
        (
            200,
            "application/grpc".to_string(),
            vec![
                field("grpc-status", "13"),
                field("grpc-message", "truncated message")
            ],
            vec![]
        )
    );
    let (status, _, trailers, _) = answered(b"application/json", &request);
    assert_eq!((status, trailers), (415, vec![]));
    assert_eq!(answered(b"application/grpcx", &request).0, 415);
}
