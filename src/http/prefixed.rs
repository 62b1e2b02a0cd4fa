//! Integers with an N-bit prefix, as HPACK (RFC 7541 5.1) and QPACK (RFC 9204 4.1.1) write
//! them: one code for both, as their Huffman code is one (`huffman.rs`).

/// Why an integer could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegerError {
    /// The bytes end inside it.
    Truncated,
    /// It is above `u32::MAX`: no index, length or size taken comes near.
    Overflow,
}

/// Reads the integer at `bytes[*at]` with a `prefix_bits`-bit prefix (1 to 8; the first byte's
/// other bits are the caller's) and moves `at` past it.
pub fn read(bytes: &[u8], at: &mut usize, prefix_bits: u32) -> Result<u32, IntegerError> {
    let max_prefix = ((1u16 << prefix_bits) - 1) as u8;
    let first = *bytes.get(*at).ok_or(IntegerError::Truncated)? & max_prefix;
    *at += 1;
    if first < max_prefix {
        return Ok(u32::from(first));
    }
    let mut value = u64::from(max_prefix);
    let mut shift = 0;
    loop {
        let byte = *bytes.get(*at).ok_or(IntegerError::Truncated)?;
        *at += 1;
        // Five continuation bytes carry 35 bits, more than any value taken.
        if shift > 28 {
            return Err(IntegerError::Overflow);
        }
        value += u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return u32::try_from(value).map_err(|_| IntegerError::Overflow);
        }
    }
}

/// Writes `value` with a `prefix_bits`-bit prefix, the first byte's other bits `flags`.
pub fn write(out: &mut Vec<u8>, value: usize, prefix_bits: u32, flags: u8) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7541s_examples_and_their_round_trips() {
        // C.1.1: 10 in a 5-bit prefix; C.1.2: 1337 in a 5-bit prefix; C.1.3: 42 in 8 bits.
        for (value, prefix_bits, bytes) in [
            (10, 5, &[0x0a][..]),
            (1337, 5, &[0x1f, 0x9a, 0x0a]),
            (42, 8, &[0x2a]),
        ] {
            let mut out = Vec::new();
            write(&mut out, value, prefix_bits, 0);
            assert_eq!(out, bytes);
            let mut at = 0;
            assert_eq!(read(&out, &mut at, prefix_bits), Ok(value as u32));
            assert_eq!(at, out.len());
        }
    }

    #[test]
    fn a_cut_or_oversized_integer_is_refused() {
        let mut at = 0;
        assert_eq!(
            read(&[0x1f, 0x9a], &mut at, 5),
            Err(IntegerError::Truncated)
        );
        let mut huge = Vec::new();
        write(&mut huge, 1 << 33, 5, 0);
        let mut at = 0;
        assert_eq!(read(&huge, &mut at, 5), Err(IntegerError::Overflow));
        let mut at = 0;
        let endless = [0xff; 12];
        assert_eq!(read(&endless, &mut at, 8), Err(IntegerError::Overflow));
    }
}
