//! QPACK's field section decoder (RFC 9204, 4.5) for a decoder whose dynamic table has
//! capacity 0: the server says so in its SETTINGS (QPACK_MAX_TABLE_CAPACITY and
//! QPACK_BLOCKED_STREAMS both 0), so a section may reference the static table only, and
//! any reference to the dynamic table, or a Required Insert Count other than 0, is
//! QPACK_DECOMPRESSION_FAILED (RFC 9204 2.2.3 and 4.5.1.1). Nothing is stateful: each
//! field goes to a callback as a name and a value borrowed from the section, the static
//! table, or a scratch buffer (Huffman-coded strings, decoded there).

use std::ops::Range;

use super::table;
use crate::http::huffman::{self, HuffmanError};
use crate::http::prefixed::{self, IntegerError};

/// Why a field section cannot be decoded: QPACK_DECOMPRESSION_FAILED, a connection error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The prefix, an integer, a string or a field stops with the section.
    Truncated,
    /// An integer past what the decoder takes (`u32`).
    IntegerOverflow,
    /// A Required Insert Count other than 0, a negative Base, or a field that references
    /// the dynamic table: the server's table has capacity 0.
    DynamicTable,
    /// A static index past the table's 99 fields.
    IndexOutOfRange,
    Huffman(HuffmanError),
}

impl From<HuffmanError> for DecodeError {
    fn from(error: HuffmanError) -> Self {
        DecodeError::Huffman(error)
    }
}

/// Why a field section is not taken: it cannot be decoded, or the callback refused one of
/// its fields with `E`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<E> {
    Decode(DecodeError),
    Field(E),
}

impl<E> From<DecodeError> for Refused<E> {
    fn from(error: DecodeError) -> Self {
        Refused::Decode(error)
    }
}

/// A field section being read.
struct Reader<'a> {
    section: &'a [u8],
    at: usize,
}

/// Where a string's bytes are: in the section (raw) or in the scratch buffer (Huffman-coded,
/// decoded there).
enum Text {
    Section(Range<usize>),
    Scratch(Range<usize>),
}

impl Text {
    fn bytes<'a>(&self, section: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Text::Section(range) => &section[range.clone()],
            Text::Scratch(range) => &scratch[range.clone()],
        }
    }
}

impl Reader<'_> {
    /// An integer with an N-bit prefix (RFC 9204 4.1.1, as RFC 7541 5.1); the first
    /// byte's other bits are the caller's. Up to 8 bits: the Required Insert Count has the
    /// whole first byte.
    fn integer(&mut self, prefix_bits: u32) -> Result<u64, DecodeError> {
        match prefixed::read(self.section, &mut self.at, prefix_bits) {
            Ok(value) => Ok(u64::from(value)),
            Err(IntegerError::Truncated) => Err(DecodeError::Truncated),
            Err(IntegerError::Overflow) => Err(DecodeError::IntegerOverflow),
        }
    }

    /// A string whose length has an N-bit prefix, Huffman-coded if `huffman_bit` of its
    /// first byte is set (RFC 9204, 4.1.2); Huffman-coded ones are decoded onto `scratch`.
    fn string(
        &mut self,
        prefix_bits: u32,
        huffman_bit: u8,
        scratch: &mut Vec<u8>,
    ) -> Result<Text, DecodeError> {
        let huffman = self
            .section
            .get(self.at)
            .is_some_and(|&first| first & huffman_bit != 0);
        let length = self.integer(prefix_bits)? as usize;
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.section.len())
            .ok_or(DecodeError::Truncated)?;
        let raw = self.at..end;
        self.at = end;
        if !huffman {
            return Ok(Text::Section(raw));
        }
        let start = scratch.len();
        huffman::decode(&self.section[raw], scratch)?;
        Ok(Text::Scratch(start..scratch.len()))
    }

    /// A static-table index, as a field line names it: `static_bit` of its first byte
    /// set, else it is the dynamic table's.
    fn static_index(
        &mut self,
        prefix_bits: u32,
        static_bit: u8,
    ) -> Result<(&'static [u8], &'static [u8]), DecodeError> {
        let is_static = self
            .section
            .get(self.at)
            .is_some_and(|&first| first & static_bit != 0);
        let index = self.integer(prefix_bits)?;
        if !is_static {
            return Err(DecodeError::DynamicTable);
        }
        table::get(index).ok_or(DecodeError::IndexOutOfRange)
    }
}

/// Decodes a field section, handing each field to `field` in order; the first field it
/// refuses ends the decoding. `scratch` holds the Huffman-decoded strings of one field at
/// a time (at most 8/5 of the section's length).
pub fn decode<E>(
    section: &[u8],
    scratch: &mut Vec<u8>,
    mut field: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
) -> Result<(), Refused<E>> {
    let mut reader = Reader { section, at: 0 };
    // The prefix (4.5.1): the Required Insert Count must be 0; the Base is then 0 plus a
    // delta (sign 0), or negative (sign 1), which no field may use.
    if reader.integer(8)? != 0 {
        return Err(DecodeError::DynamicTable.into());
    }
    let negative_base = section.get(reader.at).is_some_and(|&byte| byte & 0x80 != 0);
    reader.integer(7)?;
    if negative_base {
        return Err(DecodeError::DynamicTable.into());
    }
    while let Some(&first) = section.get(reader.at) {
        scratch.clear();
        if first & 0x80 != 0 {
            // Indexed field line (4.5.2): 1, T, a 6-bit index.
            let (name, value) = reader.static_index(6, 0x40)?;
            field(name, value).map_err(Refused::Field)?;
        } else if first & 0xc0 == 0x40 {
            // Literal field line with name reference (4.5.4): 01, N, T, a 4-bit index.
            let (name, _) = reader.static_index(4, 0x10)?;
            let value = reader.string(7, 0x80, scratch)?;
            field(name, value.bytes(section, scratch)).map_err(Refused::Field)?;
        } else if first & 0xe0 == 0x20 {
            // Literal field line with literal name (4.5.6): 001, N, H, a 3-bit length.
            let name = reader.string(3, 0x08, scratch)?;
            let value = reader.string(7, 0x80, scratch)?;
            let (name, value) = (name.bytes(section, scratch), value.bytes(section, scratch));
            field(name, value).map_err(Refused::Field)?;
        } else {
            // Post-base index (0001) or post-base name reference (0000): the dynamic table's.
            return Err(DecodeError::DynamicTable.into());
        }
    }
    Ok(())
}
