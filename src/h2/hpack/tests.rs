//! The decoder against RFC 7541's examples (Appendix C), every way a block can be broken,
//! and an independent encoder (`loona-hpack`'s).

use proptest::prelude::*;

use super::decoder::{DecodeError, Decoder};
use super::hex;
use super::table;
use crate::http::huffman::HuffmanError;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut fields = Vec::new();
    decoder
        .decode(block, |name, value| {
            fields.push((name.to_vec(), value.to_vec()))
        })
        .map(|()| fields)
}

fn owned(fields: &[(&str, &str)]) -> Fields {
    fields
        .iter()
        .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
        .collect()
}

/// The dynamic table, newest first, and its size.
fn table_of(decoder: &Decoder) -> (Fields, usize) {
    let table = decoder.table();
    let fields = table
        .fields()
        .into_iter()
        .map(|(name, value)| (name.to_vec(), value.to_vec()))
        .collect();
    (fields, table.size())
}

/// An example block, the fields it decodes to, and the dynamic table after it (newest
/// first) with its size.
type Example<'a> = (
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    usize,
);

/// Decodes the blocks in turn with one decoder, checking each block's fields and the
/// dynamic table after it.
fn check_sequence(blocks: &[Example]) {
    let mut decoder = Decoder::new();
    for (block, fields, table, size) in blocks {
        assert_eq!(
            decode(&mut decoder, &hex(block)),
            Ok(owned(fields)),
            "{block}"
        );
        assert_eq!(table_of(&decoder), (owned(table), *size), "{block}");
    }
}

#[test]
fn c2_field_representations() {
    let cases: [Example; 4] = [
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            &[("custom-key", "custom-header")],
            &[("custom-key", "custom-header")],
            55,
        ),
        (
            "040c 2f73 616d 706c 652f 7061 7468",
            &[(":path", "/sample/path")],
            &[],
            0,
        ),
        (
            "1008 7061 7373 776f 7264 0673 6563 7265 74",
            &[("password", "secret")],
            &[],
            0,
        ),
        ("82", &[(":method", "GET")], &[], 0),
    ];
    // Each example starts from an empty table.
    for case in cases {
        check_sequence(&[case]);
    }
}

const REQUEST_1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQUEST_2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQUEST_3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQUEST_TABLES: [&[(&str, &str)]; 3] = [
    &[(":authority", "www.example.com")],
    &[
        ("cache-control", "no-cache"),
        (":authority", "www.example.com"),
    ],
    &[
        ("custom-key", "custom-value"),
        ("cache-control", "no-cache"),
        (":authority", "www.example.com"),
    ],
];

#[test]
fn c3_requests_without_huffman() {
    check_sequence(&[
        (
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            REQUEST_1,
            REQUEST_TABLES[0],
            57,
        ),
        (
            "8286 84be 5808 6e6f 2d63 6163 6865",
            REQUEST_2,
            REQUEST_TABLES[1],
            110,
        ),
        (
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            REQUEST_3,
            REQUEST_TABLES[2],
            164,
        ),
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    check_sequence(&[
        (
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            REQUEST_1,
            REQUEST_TABLES[0],
            57,
        ),
        (
            "8286 84be 5886 a8eb 1064 9cbf",
            REQUEST_2,
            REQUEST_TABLES[1],
            110,
        ),
        (
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            REQUEST_3,
            REQUEST_TABLES[2],
            164,
        ),
    ]);
}

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

/// C.5 and C.6's responses: the table is 256 bytes (here by a table size update starting
/// the first block, `3fe101`), so fields are evicted.
fn check_responses(blocks: [&str; 3]) {
    let [first, second, third] = blocks.map(|block| block.to_string());
    check_sequence(&[
        (
            &format!("3fe101 {first}"),
            &[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", DATE_1),
                ("location", LOCATION),
            ],
            &[
                ("location", LOCATION),
                ("date", DATE_1),
                ("cache-control", "private"),
                (":status", "302"),
            ],
            222,
        ),
        (
            &second,
            &[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", DATE_1),
                ("location", LOCATION),
            ],
            &[
                (":status", "307"),
                ("location", LOCATION),
                ("date", DATE_1),
                ("cache-control", "private"),
            ],
            222,
        ),
        (
            &third,
            &[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", DATE_2),
                ("location", LOCATION),
                ("content-encoding", "gzip"),
                ("set-cookie", COOKIE),
            ],
            &[
                ("set-cookie", COOKIE),
                ("content-encoding", "gzip"),
                ("date", DATE_2),
            ],
            215,
        ),
    ]);
}

#[test]
fn c5_responses_without_huffman_and_eviction() {
    check_responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman_and_eviction() {
    check_responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn every_malformed_block_is_refused() {
    let huffman_a_then_8_ones = "8286 8441 82 1fff";
    let cases = [
        ("80", DecodeError::IndexZero),
        ("4000", DecodeError::Truncated), // an empty literal name, then no value
        ("be", DecodeError::IndexOutOfRange), // 62, the table empty
        ("ff00", DecodeError::IndexOutOfRange), // 127
        ("7f00 0161", DecodeError::IndexOutOfRange), // a name at index 63
        ("ff", DecodeError::Truncated),
        ("ff80", DecodeError::Truncated),
        ("ff80 8080 8080 00", DecodeError::IntegerOverflow), // six continuation bytes
        ("ffff ffff ff0f", DecodeError::IntegerOverflow),    // past u32
        ("40", DecodeError::Truncated),
        ("4005 6162", DecodeError::Truncated), // a name of 5 bytes, 2 there
        ("4001 61", DecodeError::Truncated),   // the value missing
        ("4001 6105 6162", DecodeError::Truncated),
        ("417f", DecodeError::Truncated), // a value's length cut short
        (
            "8286 8441 8100",
            DecodeError::Huffman(HuffmanError::Padding),
        ), // '0' padded with zeros
        (
            huffman_a_then_8_ones,
            DecodeError::Huffman(HuffmanError::Padding),
        ),
        (
            "8286 8441 84ff ffff ff",
            DecodeError::Huffman(HuffmanError::Eos),
        ),
        ("3fe2 1f", DecodeError::TableSizeTooLarge), // 4097
        ("82 20", DecodeError::TableSizeUpdateAfterField),
        ("4001 6101 62 3f00", DecodeError::TableSizeUpdateAfterField),
    ];
    for (block, error) in cases {
        assert_eq!(
            decode(&mut Decoder::new(), &hex(block)),
            Err(error),
            "{block}"
        );
    }
}

#[test]
fn table_size_updates_at_the_start_evict_and_are_kept() {
    let mut decoder = Decoder::new();
    // Two fields of 34 bytes; then the table shrinks to 40 (one field), to 0, back to 4096.
    let fields = hex("4001 6101 62 4001 6301 64");
    decode(&mut decoder, &fields).unwrap();
    assert_eq!(table_of(&decoder).1, 68);
    assert_eq!(
        decode(&mut decoder, &hex("3f09 be")),
        Ok(owned(&[("c", "d")]))
    );
    assert_eq!(table_of(&decoder), (owned(&[("c", "d")]), 34));
    assert_eq!(
        decode(&mut decoder, &hex("20 3fe1 1f 4001 6501 66")),
        Ok(owned(&[("e", "f")]))
    );
    assert_eq!(table_of(&decoder), (owned(&[("e", "f")]), 34));
    // At 0 a field is not kept, but it is still decoded.
    assert_eq!(
        decode(&mut decoder, &hex("20 4001 6701 68")),
        Ok(owned(&[("g", "h")]))
    );
    assert_eq!(table_of(&decoder), (Vec::new(), 0));
}

#[test]
fn a_field_named_after_the_field_it_evicts_keeps_the_name() {
    let mut decoder = Decoder::new();
    // A table of 40 bytes holds one field of 38; the next one, named by index 62, evicts
    // the field whose name it takes.
    decode(&mut decoder, &hex("3f09 4003 6161 6103 6262 62")).unwrap();
    assert_eq!(
        decode(&mut decoder, &hex("7e03 6363 63")),
        Ok(owned(&[("aaa", "ccc")]))
    );
    assert_eq!(table_of(&decoder), (owned(&[("aaa", "ccc")]), 38));
}

#[test]
fn a_field_larger_than_the_table_empties_it() {
    let mut decoder = Decoder::new();
    decode(&mut decoder, &hex("4001 6101 62")).unwrap();
    // "x" and 4,000 bytes: 4,033 with the 32 of a field, both fields fit.
    let mut block = hex("4001 78 7f a11e");
    block.extend(std::iter::repeat_n(b'y', 4000));
    let fields = decode(&mut decoder, &block).unwrap();
    assert_eq!(fields[0].1.len(), 4000);
    assert_eq!(table_of(&decoder).1, 34 + 4033);
    // A byte longer: it fits alone, so both others go.
    block[4] = 0xa2;
    block.push(b'y');
    decode(&mut decoder, &block).unwrap();
    assert_eq!(table_of(&decoder).1, 4034);
    // "xxx" and 4,064 bytes: 4,099, larger than the table.
    let mut too_large = hex("4003 787878 7f e11e");
    too_large.extend(std::iter::repeat_n(b'z', 4064));
    assert_eq!(decode(&mut decoder, &too_large).unwrap()[0].1.len(), 4064);
    assert_eq!(table_of(&decoder), (Vec::new(), 0));
}

/// Blocks of fields, some repeated so that the encoder indexes them, long enough that its
/// table evicts.
fn any_blocks() -> impl Strategy<Value = Vec<Vec<(Vec<u8>, Vec<u8>)>>> {
    let name = prop_oneof![
        Just(b":path".to_vec()),
        Just(b"user-agent".to_vec()),
        Just(b"x-custom".to_vec()),
        Just(b"cookie".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..20),
    ];
    let value = prop_oneof![
        Just(b"/".to_vec()),
        Just(b"h2load nghttp2/1.52.0".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..300),
    ];
    let field = (name, value);
    proptest::collection::vec(proptest::collection::vec(field, 0..16), 1..12)
}

#[test]
fn a_table_holds_nothing_until_a_field_is_added_and_grows_with_its_fields() {
    let mut decoder = Decoder::new();
    // :method GET indexed, :path literal not indexed: nothing enters the table.
    let block = hex("82 04 01 2f");
    assert_eq!(
        decode(&mut decoder, &block),
        Ok(owned(&[(":method", "GET"), (":path", "/")]))
    );
    assert_eq!(decoder.table().held(), 0);
    // One field indexed (RFC 7541, C.2.1): a few fields' worth, not the largest table's.
    let block = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    decode(&mut decoder, &block).unwrap();
    let small = decoder.table().held();
    assert!(small > 0 && small <= 512, "{small}");
    // Filled, and filled again many times over: at most the largest table's.
    let value = [b'v'; 100];
    for round in 0..200u32 {
        let mut block = vec![0x40, 4];
        block.extend_from_slice(format!("k{:03}", round % 1000).as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(&value);
        decode(&mut decoder, &block).unwrap();
        assert!(decoder.table().held() <= table::HELD);
    }
    assert!(decoder.table().size() > table::ALLOWED_SIZE - 140);
    assert!(decoder.table().held() > table::ALLOWED_SIZE);
}

proptest! {
    #[test]
    fn blocks_of_an_independent_encoder_decode_as_encoded(blocks in any_blocks()) {
        let mut encoder = loona_hpack::Encoder::new();
        let mut decoder = Decoder::new();
        for fields in blocks {
            let block = encoder.encode(
                fields.iter().map(|(name, value)| (name.as_slice(), value.as_slice())),
            );
            prop_assert_eq!(decode(&mut decoder, &block), Ok(fields));
            prop_assert!(decoder.table().held() <= table::HELD);
            prop_assert!(decoder.table().size() <= table::ALLOWED_SIZE);
        }
    }

    #[test]
    fn any_bytes_decode_or_are_refused_without_panic(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..8)
    ) {
        let mut decoder = Decoder::new();
        for block in blocks {
            if decode(&mut decoder, &block).is_err() {
                break;
            }
            prop_assert!(decoder.table().held() <= table::HELD);
        }
    }
}
