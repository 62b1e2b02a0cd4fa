//! A body that is sent while it arrives: an upstream's, in the edge. Its writer (the
//! upstream's connection, `upstream/conn.rs`) pushes each piece as it is read; its reader
//! (the client's protocol) takes what is waiting as its transport has room, as it reads a
//! file's body. Both are on one worker thread, so the two ends share one buffer (`Rc`).
//!
//! What waits is bounded: once [`WINDOW`] bytes wait, the writer stops reading its
//! upstream until the reader takes some, so a slow client holds at most a window (and the
//! read under way) per response, however large the body. A reader that drops its end (its
//! client went away) leaves the writer alone with it: [`Pipe::abandoned`].

use std::cell::RefCell;
use std::rc::Rc;

/// What may wait in a pipe before its writer stops reading: 256 KiB, the bound an HTTP/1.1
/// connection's unsent output has (a client reading at full speed never sees it).
pub const WINDOW: usize = 256 * 1024;

/// Where the body stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// More may come.
    Open,
    /// All of it was pushed: once what waits is taken, it is whole.
    Ended,
    /// The upstream failed within it: it is not whole, and the client must not be told it
    /// is (HTTP/1.1 closes short of its end, HTTP/2 and HTTP/3 reset the stream).
    Failed,
}

/// Where a body stands once its reader took what it could ([`Pipe::take_body`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More may come, or some of what waits was left: the body goes on.
    More,
    /// Its last byte is taken: it is whole.
    Whole,
    /// The upstream failed within it: nothing was taken, and it is not whole.
    Failed,
}

#[derive(Debug)]
struct Inner {
    /// `bytes[at..]` waits to be taken.
    bytes: Vec<u8>,
    at: usize,
    flow: Flow,
    /// All the bytes taken so far: how the writer sees its reader move.
    taken: u64,
}

/// One end of a body's pipe; a clone is another end of the same pipe.
#[derive(Clone, Debug)]
pub struct Pipe(Rc<RefCell<Inner>>);

impl Default for Pipe {
    fn default() -> Self {
        Pipe(Rc::new(RefCell::new(Inner {
            bytes: Vec::new(),
            at: 0,
            flow: Flow::Open,
            taken: 0,
        })))
    }
}

impl Pipe {
    // The writer's side.

    /// Appends the next piece of the body.
    pub fn push(&self, bytes: &[u8]) {
        let mut inner = self.0.borrow_mut();
        if inner.flow != Flow::Open {
            return;
        }
        let Inner {
            bytes: buffer, at, ..
        } = &mut *inner;
        // What was taken goes once it is most of the buffer (each byte moves once at most
        // then), or when the piece would not fit after it.
        let fits = buffer.len() + bytes.len() <= buffer.capacity();
        if *at > 0 && (*at * 2 >= buffer.len() || !fits) {
            buffer.drain(..*at);
            *at = 0;
        }
        let needed = buffer.len() + bytes.len();
        if needed > buffer.capacity() {
            // Doubling as a `Vec` grows, but no further than a window and this piece: the
            // writer reads no more once a window waits, so the rest would never be used.
            let capacity = (buffer.capacity() * 2)
                .min(WINDOW + bytes.len())
                .max(needed);
            buffer.reserve_exact(capacity - buffer.len());
        }
        buffer.extend_from_slice(bytes);
    }

    /// The body is all pushed.
    pub fn end(&self) {
        let mut inner = self.0.borrow_mut();
        if inner.flow == Flow::Open {
            inner.flow = Flow::Ended;
        }
    }

    /// The body will not be whole: what waits is dropped.
    pub fn fail(&self) {
        let mut inner = self.0.borrow_mut();
        if inner.flow == Flow::Open {
            inner.flow = Flow::Failed;
            inner.bytes = Vec::new();
            inner.at = 0;
        }
    }

    /// Whether a window's worth waits: the writer reads no more until it is taken.
    pub fn is_full(&self) -> bool {
        self.waiting() >= WINDOW
    }

    /// Whether this is the last end: the reader dropped its own (its stream or connection
    /// is gone). What waits is dropped then.
    pub fn abandoned(&self) -> bool {
        if Rc::strong_count(&self.0) > 1 {
            return false;
        }
        let mut inner = self.0.borrow_mut();
        inner.bytes = Vec::new();
        inner.at = 0;
        true
    }

    /// How many bytes the reader took so far.
    pub fn taken(&self) -> u64 {
        self.0.borrow().taken
    }

    // The reader's side.

    /// The bytes waiting to be taken.
    pub fn waiting(&self) -> usize {
        let inner = self.0.borrow();
        inner.bytes.len() - inner.at
    }

    pub fn flow(&self) -> Flow {
        self.0.borrow().flow
    }

    /// Hands what waits to `take`, which returns how many bytes of it it took.
    pub fn take(&self, take: impl FnOnce(&[u8]) -> usize) -> usize {
        let mut inner = self.0.borrow_mut();
        let at = inner.at;
        let taken = take(&inner.bytes[at..]).min(inner.bytes.len() - at);
        inner.at += taken;
        inner.taken += taken as u64;
        if inner.at == inner.bytes.len() {
            inner.bytes.clear();
            inner.at = 0;
        }
        taken
    }

    /// Hands what waits to `take`, with whether it is the last of the body (the body
    /// ended), which returns how many bytes it took; says where the body stands then. What
    /// the body came to is read before the taking, as each reader frames its end by it: a
    /// failed body is never taken, nor told to end.
    pub fn take_body(&self, take: impl FnOnce(&[u8], bool) -> usize) -> Progress {
        let flow = self.flow();
        if flow == Flow::Failed {
            return Progress::Failed;
        }
        let waiting = self.waiting();
        let last = flow == Flow::Ended;
        let taken = self.take(|bytes| take(bytes, last));
        match last && taken == waiting {
            true => Progress::Whole,
            false => Progress::More,
        }
    }

    /// The body's whole length, once it has ended.
    pub fn ended_len(&self) -> Option<u64> {
        let inner = self.0.borrow();
        (inner.flow == Flow::Ended).then(|| inner.taken + (inner.bytes.len() - inner.at) as u64)
    }

    /// The memory it holds, for the worker's budget.
    pub fn held(&self) -> usize {
        self.0.borrow().bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_pushed_is_taken_in_order_and_its_length_known_at_the_end() {
        let writer = Pipe::default();
        let reader = writer.clone();
        writer.push(b"hello ");
        assert_eq!(reader.take(|bytes| bytes.len().min(3)), 3);
        writer.push(b"world");
        let mut got = Vec::new();
        reader.take(|bytes| {
            got.extend_from_slice(bytes);
            bytes.len()
        });
        assert_eq!(got, b"lo world");
        assert_eq!((reader.flow(), reader.ended_len()), (Flow::Open, None));
        writer.end();
        assert_eq!((reader.flow(), reader.ended_len()), (Flow::Ended, Some(11)));
        assert_eq!(writer.taken(), 11);
    }

    #[test]
    fn a_body_is_whole_once_its_last_byte_is_taken_and_a_failed_one_never_is() {
        let writer = Pipe::default();
        let reader = writer.clone();
        writer.push(b"hello");
        let more = reader.take_body(|bytes, last| bytes.len() - usize::from(last));
        assert_eq!((more, reader.waiting()), (Progress::More, 0));
        writer.push(b" world");
        writer.end();
        let some = reader.take_body(|bytes, last| bytes.len() - usize::from(last));
        assert_eq!(
            (some, reader.waiting()),
            (Progress::More, 1),
            "the last left"
        );
        assert_eq!(reader.take_body(|bytes, _| bytes.len()), Progress::Whole);

        let writer = Pipe::default();
        let reader = writer.clone();
        writer.push(b"part");
        writer.fail();
        let failed = reader.take_body(|_, _| panic!("a failed body is not taken"));
        assert_eq!(failed, Progress::Failed);
    }

    #[test]
    fn a_window_waiting_is_full_and_a_failure_drops_it() {
        let writer = Pipe::default();
        let reader = writer.clone();
        writer.push(&vec![0; WINDOW - 1]);
        assert!(!writer.is_full());
        writer.push(b"x");
        assert!(writer.is_full());
        reader.take(|_| 1);
        assert!(!writer.is_full());
        writer.fail();
        writer.push(b"more");
        assert_eq!((reader.flow(), reader.waiting()), (Flow::Failed, 0));
        writer.end();
        assert_eq!(reader.flow(), Flow::Failed);
    }

    /// A slow reader: a window waits, a read's worth beyond it comes, then the reader
    /// takes a read's worth and the writer pushes as much, again and again. The buffer
    /// holds a window and a read, not twice that (a `Vec` doubles).
    #[test]
    fn the_buffer_holds_a_window_and_a_read_at_most() {
        const READ: usize = 16 * 1024;
        let writer = Pipe::default();
        let reader = writer.clone();
        while !writer.is_full() {
            writer.push(&[1; READ]);
        }
        writer.push(&[2; READ]);
        for _ in 0..100 {
            assert_eq!(reader.take(|_| READ), READ);
            writer.push(&[3; READ]);
            assert!(writer.held() <= WINDOW + READ, "{}", writer.held());
        }
        assert_eq!(reader.waiting(), WINDOW + READ);
    }

    #[test]
    fn the_writer_alone_is_abandoned_and_holds_nothing() {
        let writer = Pipe::default();
        let reader = writer.clone();
        writer.push(b"waiting");
        assert!(!writer.abandoned());
        drop(reader);
        assert!(writer.abandoned());
        assert_eq!(writer.held(), 0);
    }
}
