//! QUIC's variable-length integers (RFC 9000, 16), which HTTP/3 writes its frame types,
//! lengths, settings and stream types in: the two high bits of the first byte give the
//! length (1, 2, 4 or 8 bytes), the rest is the value, big-endian, up to 2^62 - 1.

/// The largest value a variable-length integer holds.
pub const MAX: u64 = (1 << 62) - 1;

/// The longest a variable-length integer is.
pub const MAX_LEN: usize = 8;

/// Reads the integer at the front of `bytes`: its value and its length, or `None` if it is
/// not all in yet. Any encoding is taken, minimal or not (RFC 9000, 16).
pub fn read(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1 << (first >> 6);
    let encoded = bytes.get(..len)?;
    let value = encoded[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |value, &byte| {
            (value << 8) | u64::from(byte)
        });
    Some((value, len))
}

/// How many bytes `value` takes, written minimally.
pub fn len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends `value`, minimally encoded. What the server writes (lengths of what it holds,
/// codes, settings, stream types) is far below [`MAX`]; a larger value is written as `MAX`
/// rather than corrupt the bytes after it.
pub fn write(out: &mut Vec<u8>, value: u64) {
    let value = value.min(MAX);
    match len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&(value as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(value as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::huffman::hex;
    use proptest::prelude::*;

    #[test]
    fn rfc_9000_appendix_a_1_examples() {
        let examples = [
            ("c2197c5eff14e88c", 151_288_809_941_952_652, 8),
            ("9d7f3e7d", 494_878_333, 4),
            ("7bbd", 15_293, 2),
            ("25", 37, 1),
            // Not minimal, and taken all the same.
            ("4025", 37, 2),
        ];
        for (encoded, value, length) in examples {
            assert_eq!(read(&hex(encoded)), Some((value, length)), "{encoded}");
        }
        for (encoded, value, _) in &examples[..4] {
            let mut out = Vec::new();
            write(&mut out, *value);
            assert_eq!(out, hex(encoded));
        }
    }

    #[test]
    fn a_cut_integer_needs_more_and_max_is_the_bound() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&hex("c2197c5eff14e8")), None);
        assert_eq!(read(&hex("9d")), None);
        let mut out = Vec::new();
        write(&mut out, u64::MAX);
        assert_eq!(read(&out), Some((MAX, 8)));
    }

    proptest! {
        #[test]
        fn any_value_round_trips(value in 0..=MAX) {
            let mut out = Vec::new();
            write(&mut out, value);
            prop_assert_eq!(out.len(), len(value));
            prop_assert_eq!(read(&out), Some((value, len(value))));
        }

        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..10)) {
            if let Some((value, length)) = read(&bytes) {
                prop_assert!(value <= MAX && length <= bytes.len());
            }
        }
    }
}
