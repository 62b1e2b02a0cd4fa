use proptest::prelude::*;

use super::{codes, decode, encode, encoded_len, hex, HuffmanError, CODE_LENGTHS, EOS};

/// `bytes` Huffman-coded by the encoder.
fn encoded(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(bytes, &mut out);
    assert_eq!(out.len(), encoded_len(bytes));
    out
}

fn decoded(encoded: &[u8]) -> Result<Vec<u8>, HuffmanError> {
    let mut out = Vec::new();
    decode(encoded, &mut out).map(|()| out)
}

#[test]
fn the_canonical_codes_are_appendix_b_codes() {
    // A symbol of each length, and the first and last of the longest ones, as Appendix B
    // lists them.
    let listed = [
        (b'0' as usize, 0x0, 5),
        (b't' as usize, 0x9, 5),
        (b' ' as usize, 0x14, 6),
        (b':' as usize, 0x5c, 7),
        (b'&' as usize, 0xf8, 8),
        (b'!' as usize, 0x3f8, 10),
        (b'\'' as usize, 0x7fa, 11),
        (b'#' as usize, 0xffa, 12),
        (0, 0x1ff8, 13),
        (b'^' as usize, 0x3ffc, 14),
        (b'<' as usize, 0x7ffc, 15),
        (b'\\' as usize, 0x7fff0, 19),
        (128, 0xfffe6, 20),
        (153, 0x1fffdc, 21),
        (129, 0x3fffd2, 22),
        (1, 0x7fffd8, 23),
        (9, 0xffffea, 24),
        (199, 0x1ffffec, 25),
        (192, 0x3ffffe0, 26),
        (203, 0x7ffffde, 27),
        (2, 0xfffffe2, 28),
        (127, 0xffffffc, 28),
        (255, 0x3ffffee, 26),
        (10, 0x3ffffffc, 30),
        (22, 0x3ffffffe, 30),
        (EOS, 0x3fffffff, 30),
    ];
    let codes = codes();
    for (symbol, code, length) in listed {
        assert_eq!(
            (codes[symbol], CODE_LENGTHS[symbol]),
            (code, length),
            "{symbol}"
        );
    }
    // A complete prefix code: the lengths fill the code space exactly (Kraft).
    let space: u64 = CODE_LENGTHS.iter().map(|&length| 1 << (30 - length)).sum();
    assert_eq!(space, 1 << 30);
}

#[test]
fn appendix_c_strings_decode() {
    let strings = [
        ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
        ("a8eb 1064 9cbf", "no-cache"),
        ("25a8 49e9 5ba9 7d7f", "custom-key"),
        ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
        ("6402", "302"),
        ("aec3 771a 4b", "private"),
        (
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            "Mon, 21 Oct 2013 20:13:21 GMT",
        ),
        (
            "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            "https://www.example.com",
        ),
        ("640e ff", "307"),
        ("9bd9 ab", "gzip"),
        (
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 \
             3160 65c0 03ed 4ee5 b106 3d50 07",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];
    for (coded, text) in strings {
        assert_eq!(decoded(&hex(coded)), Ok(text.as_bytes().to_vec()));
        assert_eq!(encoded(text.as_bytes()), hex(coded), "{text}");
    }
}

#[test]
fn every_byte_decodes_and_appends_to_what_is_there() {
    let all: Vec<u8> = (0..=255).collect();
    let mut out = b"kept".to_vec();
    assert_eq!(decode(&encoded(&all), &mut out), Ok(()));
    assert_eq!(out, [&b"kept"[..], &all].concat());
    assert_eq!(decoded(&[]), Ok(Vec::new()));
}

#[test]
fn bad_padding_and_eos_are_refused() {
    // 'a' (00011) then three ones: padding that may end a string.
    assert_eq!(decoded(&[0x1f]), Ok(b"a".to_vec()));
    // '0' (00000) padded with zeros.
    assert_eq!(decoded(&[0x00]), Err(HuffmanError::Padding));
    // Eight bits of padding, alone or after 'a' (00011 then eleven ones).
    assert_eq!(decoded(&[0xff]), Err(HuffmanError::Padding));
    assert_eq!(decoded(&[0x1f, 0xff]), Err(HuffmanError::Padding));
    // A code cut short that is not EOS's beginning: the first 8 bits of '\\' (19 bits).
    assert_eq!(decoded(&[0xff, 0xfe]), Err(HuffmanError::Padding));
    // EOS whole (30 ones), padded with two more; and EOS between two symbols.
    assert_eq!(decoded(&[0xff; 4]), Err(HuffmanError::Eos));
    // 'a' (00011), EOS (30 ones), 'a': 40 bits, five bytes.
    let bits: u64 = (0b00011 << 35) | (0x3fff_ffff << 5) | 0b00011;
    let eos_inside = &bits.to_be_bytes()[3..];
    assert_eq!(decoded(eos_inside), Err(HuffmanError::Eos));
}

proptest! {
    #[test]
    fn any_bytes_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(decoded(&encoded(&bytes)), Ok(bytes));
    }

    #[test]
    fn any_input_decodes_or_is_refused_without_panic(
        encoded in proptest::collection::vec(any::<u8>(), 0..64)
    ) {
        let mut out = Vec::new();
        let _ = decode(&encoded, &mut out);
        prop_assert!(out.len() <= encoded.len() * 8 / 5);
    }
}
