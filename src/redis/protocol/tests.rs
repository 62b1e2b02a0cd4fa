use super::*;

fn limits() -> Limits {
    Limits::default()
}

/// The whole of `bytes` as one reply.
fn whole(bytes: &[u8]) -> Value<'_> {
    match decode(bytes, &limits()) {
        Ok(Some((value, used))) => {
            assert_eq!(used, bytes.len(), "{:?}", String::from_utf8_lossy(bytes));
            value
        }
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
    }
}

fn error_of(bytes: &[u8], limits: &Limits) -> DecodeError {
    match decode(bytes, limits) {
        Err(error) => error,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
    }
}

/// Every RESP2 and RESP3 type, as a server writes it, with what it decodes to (aggregates
/// checked apart).
const SCALARS: &[(&[u8], Value<'static>)] = &[
    (b"+OK\r\n", Value::Simple(b"OK")),
    (b"+\r\n", Value::Simple(b"")),
    (
        b"-ERR unknown command\r\n",
        Value::Error(b"ERR unknown command"),
    ),
    (b":0\r\n", Value::Integer(0)),
    (b":-42\r\n", Value::Integer(-42)),
    (b":+7\r\n", Value::Integer(7)),
    (b":9223372036854775807\r\n", Value::Integer(i64::MAX)),
    (b":-9223372036854775808\r\n", Value::Integer(i64::MIN)),
    (b"$5\r\nhello\r\n", Value::Bulk(b"hello")),
    (b"$0\r\n\r\n", Value::Bulk(b"")),
    (b"$4\r\na\r\nb\r\n", Value::Bulk(b"a\r\nb")),
    (b"$-1\r\n", Value::Null),
    (b"*-1\r\n", Value::Null),
    (b"_\r\n", Value::Null),
    (b"#t\r\n", Value::Boolean(true)),
    (b"#f\r\n", Value::Boolean(false)),
    (b",1.5\r\n", Value::Double(1.5)),
    (b",-2e3\r\n", Value::Double(-2000.0)),
    (b",10\r\n", Value::Double(10.0)),
    (b",inf\r\n", Value::Double(f64::INFINITY)),
    (b",-inf\r\n", Value::Double(f64::NEG_INFINITY)),
    (
        b"(3492890328409238509324850943850943825024385\r\n",
        Value::BigNumber(b"3492890328409238509324850943850943825024385"),
    ),
    (b"(-1\r\n", Value::BigNumber(b"-1")),
    (
        b"=15\r\ntxt:Some string\r\n",
        Value::Verbatim {
            format: b"txt",
            text: b"Some string",
        },
    ),
    (
        b"=4\r\nmkd:\r\n",
        Value::Verbatim {
            format: b"mkd",
            text: b"",
        },
    ),
    (
        b"!21\r\nSYNTAX invalid syntax\r\n",
        Value::BlobError(b"SYNTAX invalid syntax"),
    ),
];

#[test]
fn every_scalar_type_decodes() {
    for (bytes, expected) in SCALARS {
        assert_eq!(
            whole(bytes),
            *expected,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    assert!(matches!(whole(b",nan\r\n"), Value::Double(x) if x.is_nan()));
    assert_eq!(whole(b"-ERR x\r\n").error(), Some(&b"ERR x"[..]));
    assert_eq!(whole(b"!1\r\nx\r\n").error(), Some(&b"x"[..]));
    assert_eq!(whole(b"+OK\r\n").error(), None);
    assert_eq!(whole(b"$2\r\nab\r\n").bytes(), Some(&b"ab"[..]));
    assert_eq!(whole(b":1\r\n").bytes(), None);
}

#[test]
fn aggregates_decode_and_their_elements_iterate() {
    let Value::Array(array) = whole(b"*3\r\n$3\r\nfoo\r\n$-1\r\n:5\r\n") else {
        panic!()
    };
    assert_eq!(array.len(), 3);
    let elements: Vec<_> = array.iter().collect();
    assert_eq!(
        elements,
        [Value::Bulk(b"foo"), Value::Null, Value::Integer(5)]
    );
    assert!(matches!(whole(b"*0\r\n"), Value::Array(a) if a.is_empty()));

    // Nested: [[1, 2], ["a"]].
    let Value::Array(outer) = whole(b"*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n+a\r\n") else {
        panic!()
    };
    let inner: Vec<Vec<Value<'_>>> = outer
        .into_iter()
        .map(|value| match value {
            Value::Array(inner) => inner.iter().collect(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        inner,
        [
            vec![Value::Integer(1), Value::Integer(2)],
            vec![Value::Simple(b"a")]
        ]
    );

    // A map's count is of pairs; its elements alternate key and value.
    let Value::Map(map) = whole(b"%2\r\n+first\r\n:1\r\n+second\r\n#t\r\n") else {
        panic!()
    };
    assert_eq!(map.len(), 4);
    assert_eq!(map.iter().nth(3), Some(Value::Boolean(true)));
    let Value::Set(set) = whole(b"~2\r\n+a\r\n+b\r\n") else {
        panic!()
    };
    assert_eq!(set.iter().count(), 2);
    let Value::Push(push) = whole(b">2\r\n+message\r\n$2\r\nhi\r\n") else {
        panic!()
    };
    assert_eq!(push.iter().nth(1), Some(Value::Bulk(b"hi")));
    let Value::Attribute(attribute) = whole(b"|1\r\n+ttl\r\n:3\r\n") else {
        panic!()
    };
    assert_eq!(attribute.len(), 2);
}

#[test]
fn replies_back_to_back_are_taken_one_at_a_time() {
    let input = b"+OK\r\n$3\r\nabc\r\n:1\r\n$-1\r\n";
    let mut rest = &input[..];
    let mut seen = Vec::new();
    while let Some((value, used)) = decode(rest, &limits()).unwrap() {
        seen.push(value);
        rest = &rest[used..];
    }
    assert!(rest.is_empty());
    assert_eq!(
        seen,
        [
            Value::Simple(b"OK"),
            Value::Bulk(b"abc"),
            Value::Integer(1),
            Value::Null
        ]
    );
}

#[test]
fn every_prefix_of_a_reply_needs_more_and_the_whole_decodes() {
    let mut replies: Vec<&[u8]> = SCALARS.iter().map(|(bytes, _)| *bytes).collect();
    replies.extend_from_slice(&[
        b"*3\r\n$3\r\nfoo\r\n$-1\r\n:5\r\n",
        b"*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n+a\r\n",
        b"%1\r\n$1\r\nk\r\n=5\r\ntxt:v\r\n",
        b">1\r\n~1\r\n_\r\n",
    ]);
    for reply in replies {
        let expected = whole(reply);
        for split in 0..reply.len() {
            assert_eq!(
                decode(&reply[..split], &limits()),
                Ok(None),
                "{:?} cut at {split}",
                String::from_utf8_lossy(reply)
            );
        }
        // Followed by the next reply's first bytes, it is still taken alone.
        let mut longer = reply.to_vec();
        longer.extend_from_slice(b"$5\r\nhel");
        assert_eq!(
            decode(&longer, &limits()),
            Ok(Some((expected, reply.len())))
        );
    }
}

#[test]
fn malformed_replies_are_errors() {
    let cases: &[(&[u8], DecodeError)] = &[
        (b"?\r\n", DecodeError::UnknownType(b'?')),
        (b"hello\r\n", DecodeError::UnknownType(b'h')),
        (b"$?\r\n", DecodeError::Malformed("a length")),
        (b"$-2\r\n", DecodeError::Malformed("a length")),
        (b"$+1\r\nx\r\n", DecodeError::Malformed("a length")),
        (b"$\r\n", DecodeError::Malformed("a length")),
        (b"*x\r\n", DecodeError::Malformed("a length")),
        (b"%-1\r\n", DecodeError::Malformed("a length")),
        (
            b"$99999999999999999999999\r\n",
            DecodeError::Malformed("a length"),
        ),
        (b":12a\r\n", DecodeError::Malformed("an integer")),
        (b":\r\n", DecodeError::Malformed("an integer")),
        (b":-\r\n", DecodeError::Malformed("an integer")),
        (
            b":9223372036854775808\r\n",
            DecodeError::Malformed("an integer"),
        ),
        (b"+OK\rX", DecodeError::Malformed("a CR without LF")),
        (
            b"$3\r\nabcXY",
            DecodeError::Malformed("a bulk string without its CRLF"),
        ),
        (
            b"$3\r\nabc\rX",
            DecodeError::Malformed("a bulk string without its CRLF"),
        ),
        (
            b"$3\r\nabcd",
            DecodeError::Malformed("a bulk string without its CRLF"),
        ),
        (
            b"#x\r\n",
            DecodeError::Malformed("a boolean neither t nor f"),
        ),
        (b"_x\r\n", DecodeError::Malformed("a null with data")),
        (b",1.5.5\r\n", DecodeError::Malformed("a double")),
        (b",infinity\r\n", DecodeError::Malformed("a double")),
        (b",\r\n", DecodeError::Malformed("a double")),
        (b"(12x\r\n", DecodeError::Malformed("a big number's digits")),
        (b"(\r\n", DecodeError::Malformed("a big number's digits")),
        (
            b"=3\r\ntxt\r\n",
            DecodeError::Malformed("a verbatim string's format"),
        ),
        (
            b"=5\r\ntxt-x\r\n",
            DecodeError::Malformed("a verbatim string's format"),
        ),
        // The error is an element's.
        (b"*2\r\n:1\r\n:x\r\n", DecodeError::Malformed("an integer")),
    ];
    for (bytes, expected) in cases {
        assert_eq!(
            error_of(bytes, &limits()),
            *expected,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn what_is_over_the_limits_is_refused_before_it_all_comes() {
    let small = Limits {
        max_len: 16,
        max_elements: 3,
        max_depth: 2,
    };
    // A bulk string's declared length, before its bytes.
    assert_eq!(error_of(b"$17\r\n", &small), DecodeError::TooLarge);
    // 17 bytes in all: over, though each part fits.
    assert_eq!(
        error_of(b"$10\r\n0123456789\r\n", &small),
        DecodeError::TooLarge
    );
    assert_eq!(
        whole_with(b"$9\r\n012345678\r\n", &small),
        Value::Bulk(b"012345678")
    );
    // A line that never ends.
    assert_eq!(
        error_of(b"+aaaaaaaaaaaaaaaaaaaa", &small),
        DecodeError::TooLarge
    );
    // Too many elements, at once from the count.
    assert_eq!(error_of(b"*4\r\n", &small), DecodeError::TooLarge);
    assert_eq!(error_of(b"%2\r\n", &small), DecodeError::TooLarge);
    assert_eq!(
        error_of(b"*99999999999999\r\n", &limits()),
        DecodeError::TooLarge
    );
    // A map's pairs counted twice without overflowing.
    assert_eq!(
        error_of(b"%9999999999999999999\r\n", &limits()),
        DecodeError::TooLarge
    );
    // Depth: two levels fit, the third does not.
    assert!(matches!(
        whole_with(b"*1\r\n*1\r\n:1\r\n", &small),
        Value::Array(_)
    ));
    assert_eq!(
        error_of(b"*1\r\n*1\r\n*1\r\n", &small),
        DecodeError::TooDeep
    );
    // Deep nesting is refused whatever the limits say: no stack overflow.
    let unbounded = Limits {
        max_len: usize::MAX,
        max_elements: usize::MAX,
        max_depth: usize::MAX,
    };
    let deep = b"*1\r\n".repeat(100_000);
    assert_eq!(error_of(&deep, &unbounded), DecodeError::TooDeep);
    let deep = b">1\r\n".repeat(DEPTH_CAP + 1);
    assert_eq!(error_of(&deep, &unbounded), DecodeError::TooDeep);
}

fn whole_with<'a>(bytes: &'a [u8], limits: &Limits) -> Value<'a> {
    match decode(bytes, limits) {
        Ok(Some((value, used))) if used == bytes.len() => value,
        other => panic!("{other:?}"),
    }
}

#[test]
fn commands_are_arrays_of_bulk_strings_and_any_bytes_round_trip() {
    let mut out = Vec::new();
    encode_command(&[b"SET", b"item:1", b"{}", b"PX", b"1000"], &mut out);
    assert_eq!(
        out,
        b"*5\r\n$3\r\nSET\r\n$6\r\nitem:1\r\n$2\r\n{}\r\n$2\r\nPX\r\n$4\r\n1000\r\n"
    );
    // Every byte value, CR LF and NUL among them, in one argument: decoded back as sent.
    let binary: Vec<u8> = (0..=255u8)
        .chain(b"\r\n\r\n$-1\r\n".iter().copied())
        .collect();
    out.clear();
    encode_command(&[b"ECHO", &binary, b""], &mut out);
    let Value::Array(array) = whole(&out) else {
        panic!()
    };
    let args: Vec<_> = array.iter().collect();
    assert_eq!(
        args,
        [Value::Bulk(b"ECHO"), Value::Bulk(&binary), Value::Bulk(b"")]
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let small = Limits {
        max_len: 256,
        max_elements: 8,
        max_depth: 4,
    };
    // Bytes drawn mostly from RESP's own alphabet, so that the decoder gets deep into its
    // paths, not just refused at the first byte.
    const ALPHABET: &[u8] = b"+-:$*_#,(=!%~>|\r\n0123456789-1tfinax:";
    for round in 0..20_000 {
        let len = rng.usize(0..64);
        let bytes: Vec<u8> = (0..len)
            .map(|_| match rng.u8(0..8) {
                0 => rng.u8(..),
                _ => ALPHABET[rng.usize(0..ALPHABET.len())],
            })
            .collect();
        let limits = if round % 2 == 0 { small } else { limits() };
        if let Ok(Some((value, used))) = decode(&bytes, &limits) {
            assert!(used <= bytes.len());
            walk(value);
        }
    }
    // Valid replies with bytes flipped.
    let valid = b"*3\r\n$3\r\nfoo\r\n%1\r\n+k\r\n,1.5\r\n=5\r\ntxt:v\r\n";
    for _ in 0..20_000 {
        let mut bytes = valid.to_vec();
        for _ in 0..rng.usize(1..4) {
            let at = rng.usize(0..bytes.len());
            bytes[at] = rng.u8(..);
        }
        let cut = rng.usize(0..=bytes.len());
        if let Ok(Some((value, _))) = decode(&bytes[..cut], &small) {
            walk(value);
        }
    }
}

/// Visits every element of `value`, as a caller would.
fn walk(value: Value<'_>) {
    if let Value::Array(a) | Value::Set(a) | Value::Map(a) | Value::Push(a) | Value::Attribute(a) =
        value
    {
        assert_eq!(a.iter().map(walk).count(), a.len());
    }
}
