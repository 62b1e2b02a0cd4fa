//! Header field lines as HTTP/1.1 writes them (`name: value` CRLF), with some left out: the
//! one shape in which a message's fields travel between a protocol and a proxy, whichever
//! side received them. An HTTP/1.1 head is already in it (no copy); HTTP/2 and HTTP/3 write
//! their decoded fields in it where a request is to be forwarded.

/// A block of field lines, each `name:value` ending in CRLF, checked by whoever made it (a
/// parser, or [`FieldLines::push`]): a name is a token, a value holds no CR, LF or NUL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FieldLines<'a> {
    lines: &'a [u8],
    /// Bit `i` set: line `i` is left out (a hop-by-hop field, say). Lines past the 64th
    /// are never left out; a block has at most `h1::MAX_HEADERS` lines.
    skip: u64,
}

impl<'a> FieldLines<'a> {
    /// `lines`, checked field lines ending in CRLF, with the lines whose bits `skip` sets
    /// left out.
    pub fn new(lines: &'a [u8], skip: u64) -> Self {
        FieldLines { lines, skip }
    }

    /// The fields, in order, their names as written and their values without the blanks
    /// around them.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone {
        let skip = self.skip;
        self.lines
            .split_inclusive(|&b| b == b'\n')
            .enumerate()
            .filter(move |&(i, _)| i >= 64 || skip & (1 << i) == 0)
            .map(|(_, line)| {
                // The name is a token, so the first colon ends it.
                let colon = line.iter().position(|&b| b == b':').unwrap_or(0);
                let value = line.get(colon + 1..).unwrap_or_default();
                (&line[..colon], value.trim_ascii())
            })
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Appends one field line to `block`, for a protocol that decoded the field (its name
    /// already checked as a token, its value free of CR, LF and NUL).
    pub fn push(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        block.extend_from_slice(name);
        block.extend_from_slice(b": ");
        block.extend_from_slice(value);
        block.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_as_fields_with_the_skipped_ones_left_out() {
        let mut block = Vec::new();
        FieldLines::push(&mut block, b"Host", b"example.com");
        block.extend_from_slice(b"Connection:close \r\nX-A:  b c \r\n");
        let fields = FieldLines::new(&block, 0b010);
        let read: Vec<_> = fields.iter().collect();
        assert_eq!(
            read,
            [(&b"Host"[..], &b"example.com"[..]), (b"X-A", b"b c")]
        );
        assert!(!fields.is_empty());
        assert!(FieldLines::new(&block, 0b111).is_empty());
        assert!(FieldLines::default().is_empty());
    }
}
