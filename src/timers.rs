//! One worker's deadlines in milliseconds: what is due at a given instant, exactly then.
//! Today that is the answers the application asked for at a time
//! ([`crate::service::Context::answer_at`], a [`Wakeup`]); a QUIC endpoint's connections
//! (loss detection, pacing, idle: each one deadline that moves) are the other kind of entry
//! the heap is made for. The 1 s sweep of `server::core` stays for what only needs seconds.
//!
//! A binary heap ordered by deadline. Pushing and popping cost O(log n) (about 15 steps at
//! 32,000 waiting entries, fewer in practice: entries of one delay arrive in deadline
//! order, so a new one mostly stays at the bottom), an entry is its payload and 16 bytes
//! in one contiguous vector, and deadlines are exact: a timer wheel would give O(1) but
//! round each deadline to its tick, and an answer must not come sooner than asked.
//!
//! An entry whose owner went away (a closed connection, a deadline moved) is not searched
//! for (a heap cannot remove from its middle cheaply). The owner ignores it when it comes
//! due, and, so that churning clients cannot pile them up, the heap is swept of them
//! whenever it has doubled since the last sweep: the sweep is O(n) once per doubling, O(1)
//! per entry amortised, and dead entries never outnumber twice the live ones plus what
//! arrives between two runs of the timers.

use std::cmp::Ordering;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::time::Instant;

use crate::http::Ticket;

/// Below this many entries the heap is not swept of dead entries.
const MIN_SWEEP: usize = 4096;

/// A request to answer at a time: its ticket, and the application's token for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wakeup {
    pub ticket: Ticket,
    pub token: u64,
}

/// `due` at `at`.
struct Entry<T> {
    at: Instant,
    due: T,
}

// Ordered by deadline alone, earliest greatest, so that the max-heap pops the earliest.
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at)
    }
}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl<T> Eq for Entry<T> {}

pub struct Timers<T> {
    heap: BinaryHeap<Entry<T>>,
    /// The heap is swept of dead entries once it is this long (and at least `MIN_SWEEP`).
    sweep_at: usize,
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Timers {
            heap: BinaryHeap::new(),
            sweep_at: 0,
        }
    }
}

impl<T> Timers<T> {
    /// Makes `due` due at `at`.
    pub fn schedule(&mut self, at: Instant, due: T) {
        self.heap.push(Entry { at, due });
    }

    /// The earliest deadline, if any.
    pub fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|entry| entry.at)
    }

    /// Calls `due` for every entry whose deadline is not after `now`, earliest first.
    pub fn run(&mut self, now: Instant, mut due: impl FnMut(T)) {
        while let Some(entry) = self.pop_due(now) {
            due(entry);
        }
    }

    /// The earliest entry whose deadline is not after `now`, taken out: for an owner that
    /// schedules again while it handles what is due (a QUIC connection's next deadline).
    pub fn pop_due(&mut self, now: Instant) -> Option<T> {
        let entry = self.heap.peek_mut().filter(|entry| entry.at <= now)?;
        Some(PeekMut::pop(entry).due)
    }

    /// Drops the entries that `is_live` says are dead, once the heap has doubled since the
    /// last time.
    pub fn sweep_when_grown(&mut self, is_live: impl Fn(&T) -> bool) {
        if self.heap.len() >= self.sweep_at.max(MIN_SWEEP) {
            self.heap.retain(|entry| is_live(&entry.due));
            self.sweep_at = 2 * self.heap.len();
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn wakeup(slot: u32, generation: u32, token: u64) -> Wakeup {
        let seq = 0;
        let ticket = Ticket {
            slot,
            generation,
            seq,
        };
        Wakeup { ticket, token }
    }

    #[test]
    fn fires_what_is_due_earliest_first_and_not_before() {
        let start = Instant::now();
        let mut timers = Timers::default();
        for (ms, token) in [(30, 3), (10, 1), (20, 2), (10, 4)] {
            timers.schedule(start + Duration::from_millis(ms), wakeup(0, 0, token));
        }
        assert_eq!(timers.earliest(), Some(start + Duration::from_millis(10)));
        let mut fired = Vec::new();
        timers.run(start + Duration::from_millis(9), |w: Wakeup| {
            fired.push(w.token)
        });
        assert!(fired.is_empty());
        timers.run(start + Duration::from_millis(20), |w: Wakeup| {
            fired.push(w.token)
        });
        fired[..2].sort_unstable();
        assert_eq!(fired, [1, 4, 2]);
        assert_eq!(timers.earliest(), Some(start + Duration::from_millis(30)));
        timers.run(start + Duration::from_secs(1), |w: Wakeup| {
            fired.push(w.token)
        });
        assert_eq!(fired, [1, 4, 2, 3]);
        assert!(timers.is_empty() && timers.earliest().is_none());
    }

    /// What is scheduled while due entries are taken one by one stays: a QUIC connection
    /// schedules its next deadline while its last one is handled.
    #[test]
    fn entries_scheduled_while_taking_the_due_ones_are_kept() {
        let start = Instant::now();
        let mut timers = Timers::default();
        timers.schedule(start, wakeup(0, 0, 1));
        while let Some(due) = timers.pop_due(start) {
            if due.token < 3 {
                let later = start + Duration::from_millis(due.token);
                timers.schedule(later, wakeup(0, 0, due.token + 1));
            }
        }
        assert_eq!(timers.len(), 1);
        assert_eq!(timers.earliest(), Some(start + Duration::from_millis(1)));
    }

    #[test]
    fn gone_connections_entries_are_swept_once_the_heap_doubles() {
        let start = Instant::now();
        let mut timers = Timers::default();
        let live = |wakeup: &Wakeup| wakeup.ticket.generation == 1;
        // Connections come and go with far-off deadlines: the heap stays within twice the
        // live entries (or the sweep's floor), however many have gone.
        let later = start + Duration::from_secs(60);
        for round in 0..10 * MIN_SWEEP as u32 {
            timers.schedule(later, wakeup(round, round % 8, u64::from(round)));
            timers.run(start, |_| unreachable!());
            timers.sweep_when_grown(live);
            let alive = (round as usize + 1).div_ceil(8);
            assert!(
                timers.len() <= (2 * alive).max(MIN_SWEEP) + 1,
                "{}",
                timers.len()
            );
        }
        let mut fired = 0;
        timers.run(later, |wakeup| fired += usize::from(live(&wakeup)));
        assert_eq!(fired, 10 * MIN_SWEEP / 8);
    }
}
