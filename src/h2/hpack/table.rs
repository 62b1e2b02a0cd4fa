//! HPACK's tables (RFC 7541, 2.3): the static one of Appendix A, and the dynamic one each
//! connection's decoder keeps, both addressed by one index space (1 to 61 static, 62 on
//! dynamic, newest first).
//!
//! The dynamic table keeps its fields' bytes in one buffer, oldest first, and the fields
//! themselves (where their bytes start, their lengths) in a ring, newest at the front.
//! Evicting a field only drops it from the ring; its bytes go when the buffer is full and
//! what is still live moves to its start. The buffer grows with what is added, up to twice
//! the largest table, so that moving happens at most once per table's worth of bytes added
//! (a field is copied once on the way in and at most once more). A table nothing was added
//! to holds nothing, and one of a few fields (what clients' encoders index) little.

use std::collections::VecDeque;

/// The largest dynamic table the server allows: RFC 7541's default
/// SETTINGS_HEADER_TABLE_SIZE, which the server never changes, so a peer's table size update
/// beyond it is an error.
pub const ALLOWED_SIZE: usize = 4096;

/// What a field costs in the table besides its bytes (RFC 7541, 4.1).
const FIELD_OVERHEAD: usize = 32;

/// The most fields a table of `ALLOWED_SIZE` holds: empty names and values.
#[cfg(test)]
const MOST_FIELDS: usize = ALLOWED_SIZE / FIELD_OVERHEAD;

/// The buffer of the fields' bytes at its largest: the live bytes (below `ALLOWED_SIZE`) and
/// a field being added (below it too) always fit.
const BYTES_CAPACITY: usize = 2 * ALLOWED_SIZE;

/// The buffer's first capacity: a few fields' worth.
const FIRST_BYTES_CAPACITY: usize = 256;

/// What a dynamic table holds at its fullest: its bytes and its ring of fields (which grows
/// by doubling to at most `MOST_FIELDS`).
#[cfg(test)]
pub const HELD: usize = BYTES_CAPACITY + MOST_FIELDS * std::mem::size_of::<Entry>();

/// RFC 7541, Appendix A.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// A field of the dynamic table: where its name starts, counted from the first byte the
/// table ever held (so that moving the bytes does not move it), then its value.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    start: usize,
    name_len: u16,
    value_len: u16,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len as usize + self.value_len as usize + FIELD_OVERHEAD
    }
}

/// A field found by its index, to be read from the tables while they do not change.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    Static(&'static [u8], &'static [u8]),
    Dynamic(Entry),
}

/// The name of a field being added: its own bytes, or the name of a field in the tables
/// (which may be evicted by this very addition, RFC 7541 4.4).
pub enum Name<'a> {
    Literal(&'a [u8]),
    Of(Field),
}

/// The dynamic table (RFC 7541, 2.3.2 and 4).
#[derive(Default)]
pub struct DynamicTable {
    /// The fields' names and values, oldest first; `bytes[0]` is byte `base` of all the
    /// table ever held.
    bytes: Vec<u8>,
    base: usize,
    /// Newest first.
    entries: VecDeque<Entry>,
    /// The fields' sizes, summed as RFC 7541 4.1 counts them.
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    pub fn new() -> Self {
        DynamicTable {
            max_size: ALLOWED_SIZE,
            ..DynamicTable::default()
        }
    }

    /// The field at `index` of the index space (RFC 7541, 2.3.3); none for 0 or an index
    /// past both tables.
    pub fn get(&self, index: usize) -> Option<Field> {
        if index == 0 {
            None
        } else if let Some(&(name, value)) = STATIC.get(index - 1) {
            Some(Field::Static(name, value))
        } else {
            let newest_first = index - 1 - STATIC.len();
            self.entries.get(newest_first).copied().map(Field::Dynamic)
        }
    }

    /// A field's name and value, as long as the table does not change.
    pub fn read(&self, field: Field) -> (&[u8], &[u8]) {
        match field {
            Field::Static(name, value) => (name, value),
            Field::Dynamic(entry) => {
                let start = entry.start - self.base;
                let middle = start + entry.name_len as usize;
                let end = middle + entry.value_len as usize;
                (&self.bytes[start..middle], &self.bytes[middle..end])
            }
        }
    }

    /// A dynamic table size update (RFC 7541, 4.3 and 6.3): `max_size` is at most
    /// `ALLOWED_SIZE`, as the decoder checked.
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_down_to(max_size);
    }

    /// Adds a field (RFC 7541, 4.4): the oldest fields go until it fits; one larger than the
    /// whole table empties it and is not added.
    pub fn insert(&mut self, name: Name, value: &[u8]) {
        let name_len = match &name {
            Name::Literal(name) => name.len(),
            Name::Of(field) => self.read(*field).0.len(),
        };
        let size = name_len + value.len() + FIELD_OVERHEAD;
        if size > self.max_size {
            self.evict_down_to(0);
            return;
        }
        self.make_room(name_len + value.len());
        let start = self.base + self.bytes.len();
        // The name is copied before anything is evicted: it may be an evicted field's.
        match name {
            Name::Literal(name) => self.bytes.extend_from_slice(name),
            Name::Of(Field::Static(name, _)) => self.bytes.extend_from_slice(name),
            Name::Of(Field::Dynamic(entry)) => {
                let from = entry.start - self.base;
                self.bytes.extend_from_within(from..from + name_len);
            }
        }
        self.bytes.extend_from_slice(value);
        self.evict_down_to(self.max_size - size);
        self.entries.push_front(Entry {
            start,
            // Both below `ALLOWED_SIZE`: `size` fits in the table.
            name_len: name_len as u16,
            value_len: value.len() as u16,
        });
        self.size += size;
    }

    fn evict_down_to(&mut self, size: usize) {
        while self.size > size {
            let Some(oldest) = self.entries.pop_back() else {
                break;
            };
            self.size -= oldest.size();
        }
    }

    /// Makes room in the buffer for `added` more bytes: once it is full, the live bytes move
    /// to its start, and it doubles (up to [`BYTES_CAPACITY`]) if they and the new ones
    /// would take more than half of it, so that it fills again only after at least as many
    /// bytes as were moved were added.
    fn make_room(&mut self, added: usize) {
        let capacity = self.bytes.capacity();
        if self.bytes.len() + added <= capacity {
            return;
        }
        self.move_live_bytes_to_start();
        let needed = self.bytes.len() + added;
        if 2 * needed > capacity && capacity < BYTES_CAPACITY {
            let capacity = (2 * needed)
                .next_power_of_two()
                .clamp(FIRST_BYTES_CAPACITY, BYTES_CAPACITY);
            self.bytes.reserve_exact(capacity - self.bytes.len());
        }
    }

    /// Drops the bytes of evicted fields, moving the live ones to the buffer's start.
    fn move_live_bytes_to_start(&mut self) {
        let live_from = self
            .entries
            .back()
            .map_or(self.base + self.bytes.len(), |oldest| oldest.start);
        self.bytes.drain(..live_from - self.base);
        self.base = live_from;
    }

    /// The table's size as RFC 7541 4.1 counts it.
    #[cfg(test)]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The fields, newest first.
    #[cfg(test)]
    pub fn fields(&self) -> Vec<(&[u8], &[u8])> {
        self.entries
            .iter()
            .map(|&entry| self.read(Field::Dynamic(entry)))
            .collect()
    }

    /// The bytes this table holds.
    pub fn held(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}
