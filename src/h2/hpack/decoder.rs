//! The HPACK decoder of one connection (RFC 7541): a header block in, each field out to a
//! callback as a name and a value borrowed from the block, the tables, or the decoder's
//! scratch buffer (Huffman-coded strings, decoded there; lent from the worker's pool while
//! the connection reads): nothing is allocated per field.

use std::ops::Range;

use super::table::{self, DynamicTable, Field, Name};
use crate::http::huffman::{self, HuffmanError};
use crate::http::prefixed::{self, IntegerError};
use crate::http::{lent, BufferPool};

/// Why a header block cannot be decoded; the decoder's state is then lost (RFC 7541, 2.3
/// and 5-6): a connection error (COMPRESSION_ERROR, RFC 9113 4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// An integer, a string or a field stops with the block.
    Truncated,
    /// An integer past what the decoder takes (`u32`).
    IntegerOverflow,
    /// Index 0 (RFC 7541, 6.1).
    IndexZero,
    /// An index past both tables (RFC 7541, 2.3.3).
    IndexOutOfRange,
    Huffman(HuffmanError),
    /// A dynamic table size update past what the server allows (RFC 7541, 6.3).
    TableSizeTooLarge,
    /// A dynamic table size update after a field (RFC 7541, 4.2).
    TableSizeUpdateAfterField,
}

impl From<HuffmanError> for DecodeError {
    fn from(error: HuffmanError) -> Self {
        DecodeError::Huffman(error)
    }
}

/// The decoder of a connection: its dynamic table lives as long as the connection.
pub struct Decoder {
    table: DynamicTable,
    scratch: Vec<u8>,
}

/// Where a string literal's bytes are: in the block (raw) or in the scratch buffer
/// (Huffman-coded, decoded there).
enum Text {
    Block(Range<usize>),
    Scratch(Range<usize>),
}

impl Text {
    fn bytes<'a>(&self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Text::Block(range) => &block[range.clone()],
            Text::Scratch(range) => &scratch[range.clone()],
        }
    }
}

/// Where a literal field's name is, while its value is read.
enum NameAt {
    Table(Field),
    Literal(Text),
}

/// A header block being read.
struct Reader<'a> {
    block: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// An integer with an N-bit prefix (RFC 7541, 5.1); the first byte's other bits are
    /// the caller's.
    fn integer(&mut self, prefix_bits: u32) -> Result<usize, DecodeError> {
        match prefixed::read(self.block, &mut self.at, prefix_bits) {
            Ok(value) => Ok(value as usize),
            Err(IntegerError::Truncated) => Err(DecodeError::Truncated),
            Err(IntegerError::Overflow) => Err(DecodeError::IntegerOverflow),
        }
    }

    /// A string literal (RFC 7541, 5.2), Huffman-coded ones decoded onto `scratch`.
    fn string(&mut self, scratch: &mut Vec<u8>) -> Result<Text, DecodeError> {
        let huffman = self
            .block
            .get(self.at)
            .is_some_and(|&first| first & 0x80 != 0);
        let length = self.integer(7)?;
        let end = self
            .at
            .checked_add(length)
            .filter(|&end| end <= self.block.len())
            .ok_or(DecodeError::Truncated)?;
        let raw = self.at..end;
        self.at = end;
        if !huffman {
            return Ok(Text::Block(raw));
        }
        let start = scratch.len();
        huffman::decode(&self.block[raw], scratch)?;
        Ok(Text::Scratch(start..scratch.len()))
    }
}

impl Decoder {
    pub fn new() -> Self {
        Decoder {
            table: DynamicTable::new(),
            scratch: Vec::new(),
        }
    }

    /// Gives the decoder a scratch buffer from `buffers` if it has none, for the blocks
    /// decoded next (without one, it allocates its own).
    pub fn lend(&mut self, buffers: &mut BufferPool) {
        lent(&mut self.scratch, buffers);
    }

    /// Gives the scratch buffer back: it holds nothing between blocks.
    pub fn give_back(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.scratch));
    }

    /// What the decoder holds: its dynamic table's buffers and its scratch buffer.
    pub fn held(&self) -> usize {
        self.table.held() + self.scratch.capacity()
    }

    /// Decodes a header block, handing each field to `field` in order. On an error the
    /// fields before it have been handed out, and the decoder is of no further use.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut reader = Reader { block, at: 0 };
        let mut field_seen = false;
        while let Some(&first) = block.get(reader.at) {
            if first & 0x80 != 0 {
                // An indexed field (RFC 7541, 6.1).
                let found = self.find(reader.integer(7)?)?;
                let (name, value) = self.table.read(found);
                field(name, value);
            } else if first & 0xe0 == 0x20 {
                // A dynamic table size update (RFC 7541, 6.3), only before the fields.
                if field_seen {
                    return Err(DecodeError::TableSizeUpdateAfterField);
                }
                let max_size = reader.integer(5)?;
                if max_size > table::ALLOWED_SIZE {
                    return Err(DecodeError::TableSizeTooLarge);
                }
                self.table.set_max_size(max_size);
                continue;
            } else {
                // A literal field (RFC 7541, 6.2): with incremental indexing (01), or without
                // (0000) or never indexed (0001), which a decoder treats alike.
                let indexing = first & 0x40 != 0;
                let name_index = reader.integer(if indexing { 6 } else { 4 })?;
                self.scratch.clear();
                let name = match name_index {
                    0 => NameAt::Literal(reader.string(&mut self.scratch)?),
                    index => NameAt::Table(self.find(index)?),
                };
                let value = reader.string(&mut self.scratch)?;
                let value = value.bytes(block, &self.scratch);
                let name = match name {
                    NameAt::Literal(text) => Name::Literal(text.bytes(block, &self.scratch)),
                    NameAt::Table(found) => Name::Of(found),
                };
                match &name {
                    Name::Literal(name) => field(name, value),
                    Name::Of(found) => field(self.table.read(*found).0, value),
                }
                if indexing {
                    self.table.insert(name, value);
                }
            }
            field_seen = true;
        }
        Ok(())
    }

    fn find(&self, index: usize) -> Result<Field, DecodeError> {
        match index {
            0 => Err(DecodeError::IndexZero),
            index => self.table.get(index).ok_or(DecodeError::IndexOutOfRange),
        }
    }

    #[cfg(test)]
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }
}
