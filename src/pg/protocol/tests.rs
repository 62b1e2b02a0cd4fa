use super::script::message;
use super::*;

#[test]
fn data_row_columns_and_nulls() {
    let mut body = vec![0, 3];
    body.extend_from_slice(&4u32.to_be_bytes());
    body.extend_from_slice(&7i32.to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&2u32.to_be_bytes());
    body.extend_from_slice(b"hi");
    let bytes = message(b'D', &body);
    let (msg, used) = decode(&bytes).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    let Message::DataRow(row) = msg else {
        panic!("not a DataRow: {msg:?}")
    };
    assert_eq!(row.len(), 3);
    assert_eq!(row.get(0), Some(Some(&7i32.to_be_bytes()[..])));
    assert_eq!(row.get(1), Some(None));
    assert_eq!(row.get(2), Some(Some(&b"hi"[..])));
    assert_eq!(row.get(3), None);
}

#[test]
fn partial_messages_wait_for_more() {
    let bytes = message(b'Z', b"I");
    for cut in 0..bytes.len() {
        assert_eq!(decode(&bytes[..cut]), Ok(None));
    }
    assert_eq!(
        decode(&bytes),
        Ok(Some((Message::ReadyForQuery(b'I'), bytes.len())))
    );
}

#[test]
fn garbage_is_an_error() {
    assert!(decode(&[b'D', 0, 0, 0, 2]).is_err());
    assert!(decode(&[b'D', 0xff, 0xff, 0xff, 0xff]).is_err());
    assert!(decode(&message(b'?', b"")).is_err());
    // A column claiming more bytes than the row holds.
    let mut body = vec![0, 1];
    body.extend_from_slice(&100u32.to_be_bytes());
    assert!(decode(&message(b'D', &body)).is_err());
    assert!(decode(&message(b'Z', b"X")).is_err());
}

#[test]
fn bind_encodes_text_as_its_bytes_and_refuses_a_nul() {
    let mut buf = Vec::new();
    bind(&mut buf, "u", &[Param::Text("név"), Param::Int4(7)]).unwrap();
    let expected: &[u8] = &[0, 0, 0, 4, b'n', 0xc3, 0xa9, b'v', 0, 0, 0, 4, 0, 0, 0, 7];
    assert!(buf.windows(expected.len()).any(|w| w == expected));
    let before = buf.clone();
    assert_eq!(
        bind(&mut buf, "u", &[Param::Text("a\0b")]),
        Err(EncodeError::Nul("text parameter"))
    );
    assert_eq!(buf, before);
}

#[test]
fn bind_encodes_binary_params() {
    let mut buf = Vec::new();
    bind(&mut buf, "w", &[Param::Int4(42), Param::Int4Array(&[1, 2])]).unwrap();
    assert_eq!(buf[0], b'B');
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    assert_eq!(len + 1, buf.len());
    let expected_tail: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 2, 0, 1, 0, 1];
    assert!(buf.ends_with(expected_tail));
    assert!(buf.windows(4).any(|w| w == 42i32.to_be_bytes()));
}

#[test]
fn execute_asks_for_all_rows_of_the_unnamed_portal() {
    let mut buf = Vec::new();
    execute(&mut buf);
    assert_eq!(buf, message(b'E', &[0, 0, 0, 0, 0]));
}

/// Each encoder, given a string with a NUL where a C string goes, refuses and leaves the
/// buffer as it was.
#[test]
fn c_strings_with_a_nul_are_refused_and_nothing_is_written() {
    type Encoder = fn(&mut Vec<u8>) -> Result<(), EncodeError>;
    let cases: [(Encoder, &str); 8] = [
        (|b| startup(b, "us\0er", "db"), "user name"),
        (|b| startup(b, "user", "d\0b"), "database name"),
        (|b| password(b, "se\0cret"), "password"),
        (
            |b| sasl_initial_response(b, "SCRAM\0", b"n,,"),
            "SASL mechanism",
        ),
        (|b| parse(b, "w\0", "SELECT 1", &[]), "statement name"),
        (|b| parse(b, "w", "SELECT 1\0; DROP", &[]), "statement text"),
        (|b| bind(b, "w\0", &[]), "statement name"),
        (|b| describe_statement(b, "\0"), "statement name"),
    ];
    for (encode, what) in cases {
        let mut buf = b"before".to_vec();
        assert_eq!(encode(&mut buf), Err(EncodeError::Nul(what)));
        assert_eq!(buf, b"before", "{what}");
    }
}

#[test]
fn counts_past_int16_are_refused() {
    let types = vec![INT4_OID; usize::from(u16::MAX) + 1];
    let params = vec![Param::Int4(1); types.len()];
    let mut buf = Vec::new();
    assert_eq!(
        parse(&mut buf, "w", "SELECT 1", &types),
        Err(EncodeError::TooLong("parameter type list"))
    );
    assert_eq!(
        bind(&mut buf, "w", &params),
        Err(EncodeError::TooLong("parameter list"))
    );
    assert!(buf.is_empty());
    // The largest count fits.
    parse(&mut buf, "w", "SELECT 1", &types[1..]).unwrap();
    bind(&mut buf, "w", &params[1..]).unwrap();
    let (parse_len, bind_len) = (
        4 + 2 + 9 + 2 + 4 * 65_535,
        4 + 1 + 2 + 4 + 2 + 8 * 65_535 + 4,
    );
    assert_eq!(buf.len(), 1 + parse_len + 1 + bind_len);
    assert_eq!(buf[1..5], (parse_len as u32).to_be_bytes());
}

#[test]
fn column_values_decode_their_binary_forms() {
    assert_eq!(bool::decode(&[1]), Ok(true));
    assert_eq!(bool::decode(&[0]), Ok(false));
    assert_eq!(i32::decode(&(-7i32).to_be_bytes()), Ok(-7));
    assert_eq!(i64::decode(&(1i64 << 40).to_be_bytes()), Ok(1 << 40));
    assert_eq!(<&str>::decode("フレーム".as_bytes()), Ok("フレーム"));
    assert_eq!(
        Jsonb::decode(b"\x01[\"fast\", \"eco\"]"),
        Ok(Jsonb(r#"["fast", "eco"]"#))
    );
    assert_eq!(Jsonb::decode(b"\x01"), Ok(Jsonb("")));
}

#[test]
fn column_values_of_the_wrong_length_or_form_are_errors() {
    for bytes in [&[][..], &[2], &[0, 1], &[0xff]] {
        assert!(bool::decode(bytes).is_err(), "{bytes:?}");
    }
    for bytes in [&[][..], &[0, 0, 0], &[0; 5], &[0; 8]] {
        assert_eq!(
            i32::decode(bytes),
            Err(ProtocolError("int4 of the wrong size"))
        );
    }
    for bytes in [&[][..], &[0; 4], &[0; 7], &[0; 9]] {
        assert_eq!(
            i64::decode(bytes),
            Err(ProtocolError("int8 of the wrong size"))
        );
    }
    assert!(<&str>::decode(&[0xc3, 0x28]).is_err());
    assert_eq!(
        Jsonb::decode(b""),
        Err(ProtocolError("jsonb without its version byte"))
    );
    for version in [0u8, 2, b'['] {
        assert_eq!(
            Jsonb::decode(&[version, b'1']),
            Err(ProtocolError("jsonb of an unknown version"))
        );
    }
    assert!(Jsonb::decode(&[1, 0xff]).is_err());
}

#[test]
fn bind_encodes_int8_as_eight_bytes() {
    let mut buf = Vec::new();
    bind(&mut buf, "s", &[Param::Int8(-2), Param::Int8(1 << 33)]).unwrap();
    let mut expected = vec![0, 2];
    expected.extend_from_slice(&8i32.to_be_bytes());
    expected.extend_from_slice(&(-2i64).to_be_bytes());
    expected.extend_from_slice(&8i32.to_be_bytes());
    expected.extend_from_slice(&(1i64 << 33).to_be_bytes());
    expected.extend_from_slice(&[0, 1, 0, 1]);
    assert!(buf.ends_with(&expected), "{buf:?}");
    // Tag, length, portal, "s", one binary format code: the parameters follow.
    assert_eq!(buf.len(), 1 + 4 + 1 + 2 + 4 + expected.len());
}

#[test]
fn error_fields() {
    let bytes = message(b'E', b"SERROR\0C22012\0Mdivision by zero\0\0");
    let (Message::ErrorResponse(fields), _) = decode(&bytes).unwrap().unwrap() else {
        panic!("not an ErrorResponse")
    };
    assert_eq!(fields.field(b'C'), Some("22012"));
    assert_eq!(fields.field(b'M'), Some("division by zero"));
    assert_eq!(fields.field(b'D'), None);
    assert_eq!(fields.text(b'D'), "");
}

#[test]
fn server_text_is_escaped_for_the_log() {
    let bytes = message(
        b'E',
        b"SERROR\0C22012\0Mline\n2024 FATAL forged\x1b[2J\\\0\0",
    );
    let (Message::ErrorResponse(fields), _) = decode(&bytes).unwrap().unwrap() else {
        panic!("not an ErrorResponse")
    };
    assert_eq!(fields.text(b'M'), "line\\n2024 FATAL forged\\u{1b}[2J\\\\");
    assert_eq!(printable("caf\u{e9} \t\r\u{7f}"), "caf\u{e9} \\t\\r\\u{7f}");
}

#[test]
fn a_message_over_the_limit_is_refused_from_its_header() {
    let header = [b'D', 0, 0, 0x10, 1];
    assert_eq!(
        decode_within(&header, 4096),
        Err(ProtocolError("message longer than the limit"))
    );
    assert_eq!(decode_within(&header, 4100), Ok(None));
    let row = message(b'D', &[0, 0]);
    assert!(decode_within(&row, 6).unwrap().is_some());
    assert!(decode_within(&row, 5).is_err());
}
