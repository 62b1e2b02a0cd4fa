//! What a link's connection received and has not read yet, with room to read more: one
//! buffer, read from its front, its unread bytes moved to the front or the buffer doubled
//! when the room runs short (the upstream's and Redis's connections; PostgreSQL's sizes
//! its own by the message under way).

/// The buffer's first size: a response's head or a batch of small replies, and a read.
const INITIAL: usize = 16 * 1024;
/// [`Input::room`] offers at least this much.
const MIN_ROOM: usize = 4 * 1024;

/// `bytes[start..end]` is unread.
#[derive(Debug, Default)]
pub struct Input {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Input {
    /// Room to read into, at least [`MIN_ROOM`]: what waits moves to the front, and the
    /// buffer doubles if that is not enough. [`Input::filled`] says how much was read.
    pub fn room(&mut self) -> &mut [u8] {
        if self.bytes.is_empty() {
            self.bytes = vec![0; INITIAL];
        }
        if self.bytes.len() - self.end < MIN_ROOM {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.bytes.len() - self.end < MIN_ROOM {
                self.bytes.resize(self.bytes.len() * 2, 0);
            }
        }
        &mut self.bytes[self.end..]
    }

    /// `n` bytes were read into [`Input::room`].
    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// What waits to be read.
    pub fn unread(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// `n` bytes of [`Input::unread`] were read.
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.end - self.start);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Drops what waits (the socket is given up); a buffer grown past `kept` is freed.
    pub fn clear(&mut self, kept: usize) {
        self.start = 0;
        self.end = 0;
        self.shrink(kept);
    }

    /// Frees the buffer if it grew past `kept` and nothing waits in it.
    pub fn shrink(&mut self, kept: usize) {
        if self.is_empty() && self.bytes.len() > kept {
            self.bytes = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_waits_moves_to_the_front_or_the_buffer_doubles_for_room() {
        let mut input = Input::default();
        let room = input.room().len();
        assert_eq!(room, INITIAL);
        input.filled(INITIAL - 100);
        input.consume(INITIAL - 200);
        // 100 bytes wait at the end, 100 of room: they move to the front.
        assert_eq!(input.room().len(), INITIAL - 100);
        assert_eq!(input.unread().len(), 100);
        input.filled(INITIAL - 100);
        // Full, nothing read: it doubles.
        assert_eq!(input.room().len(), INITIAL);
        assert_eq!(input.unread().len(), INITIAL);
        input.consume(usize::MAX);
        assert!(input.is_empty());
        input.shrink(INITIAL);
        assert_eq!(input.bytes.len(), 0);
    }
}
