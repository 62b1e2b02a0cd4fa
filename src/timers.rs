//! One worker's answers by time: requests the application answers at a given instant
//! ([`crate::service::Context::answer_at`]) without holding the worker meanwhile.
//!
//! A binary heap ordered by deadline. Pushing and popping cost O(log n) (about 15 steps at
//! 32,000 waiting requests, fewer in practice: requests of one delay arrive in deadline
//! order, so a new entry mostly stays at the bottom), an entry is 40 bytes in one
//! contiguous vector, and deadlines are exact: a timer wheel would give O(1) but round each
//! deadline to its tick, and an answer must not come sooner than asked.
//!
//! A closed connection's entries are not searched for when it closes (a heap cannot remove
//! from its middle cheaply). They are ignored when due, since their ticket names a slot
//! generation that has moved on, and, so that churning clients cannot pile them up, the
//! heap is swept of them whenever it has doubled since the last sweep: the sweep is O(n)
//! once per doubling, O(1) per entry amortised, and dead entries never outnumber twice
//! the live ones plus what arrives between two runs of the timers.

use std::cmp::Ordering;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::time::Instant;

use crate::http::Ticket;

/// Below this many entries the heap is not swept of closed connections' entries.
const MIN_SWEEP: usize = 4096;

/// A request to answer at `at`: its ticket, and the application's token for it.
struct Entry {
    at: Instant,
    ticket: Ticket,
    token: u64,
}

// Ordered by deadline alone, earliest greatest, so that the max-heap pops the earliest.
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.cmp(&self.at)
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Entry {}

#[derive(Default)]
pub struct Timers {
    heap: BinaryHeap<Entry>,
    /// The heap is swept of closed connections' entries once it is this long (and at least
    /// `MIN_SWEEP`).
    sweep_at: usize,
}

impl Timers {
    /// Answers the request of `ticket` at `at`, through the application's `on_timer` with
    /// `token`.
    pub fn schedule(&mut self, at: Instant, ticket: Ticket, token: u64) {
        self.heap.push(Entry { at, ticket, token });
    }

    /// The earliest deadline, if any.
    pub fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|entry| entry.at)
    }

    /// Calls `due` for every entry whose deadline is not after `now`, earliest first.
    pub fn run(&mut self, now: Instant, mut due: impl FnMut(Ticket, u64)) {
        while let Some(entry) = self.heap.peek_mut().filter(|entry| entry.at <= now) {
            let Entry { ticket, token, .. } = PeekMut::pop(entry);
            due(ticket, token);
        }
    }

    /// Drops the entries whose ticket `is_live` says is gone, once the heap has doubled
    /// since the last time.
    pub fn sweep_when_grown(&mut self, is_live: impl Fn(&Ticket) -> bool) {
        if self.heap.len() >= self.sweep_at.max(MIN_SWEEP) {
            self.heap.retain(|entry| is_live(&entry.ticket));
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

    fn ticket(slot: u32, generation: u32) -> Ticket {
        Ticket {
            slot,
            generation,
            seq: 0,
        }
    }

    #[test]
    fn fires_what_is_due_earliest_first_and_not_before() {
        let start = Instant::now();
        let mut timers = Timers::default();
        for (ms, token) in [(30, 3), (10, 1), (20, 2), (10, 4)] {
            timers.schedule(start + Duration::from_millis(ms), ticket(0, 0), token);
        }
        assert_eq!(timers.earliest(), Some(start + Duration::from_millis(10)));
        let mut fired = Vec::new();
        timers.run(start + Duration::from_millis(9), |_, t| fired.push(t));
        assert!(fired.is_empty());
        timers.run(start + Duration::from_millis(20), |_, t| fired.push(t));
        fired[..2].sort_unstable();
        assert_eq!(fired, [1, 4, 2]);
        assert_eq!(timers.earliest(), Some(start + Duration::from_millis(30)));
        timers.run(start + Duration::from_secs(1), |_, t| fired.push(t));
        assert_eq!(fired, [1, 4, 2, 3]);
        assert!(timers.is_empty() && timers.earliest().is_none());
    }

    #[test]
    fn gone_connections_entries_are_swept_once_the_heap_doubles() {
        let start = Instant::now();
        let mut timers = Timers::default();
        let live = |ticket: &Ticket| ticket.generation == 1;
        // Connections come and go with far-off deadlines: the heap stays within twice the
        // live entries (or the sweep's floor), however many have gone.
        let later = start + Duration::from_secs(60);
        for round in 0..10 * MIN_SWEEP as u32 {
            timers.schedule(later, ticket(round, round % 8), u64::from(round));
            timers.run(start, |_, _| unreachable!());
            timers.sweep_when_grown(live);
            let alive = (round as usize + 1).div_ceil(8);
            assert!(
                timers.len() <= (2 * alive).max(MIN_SWEEP) + 1,
                "{}",
                timers.len()
            );
        }
        let mut fired = 0;
        timers.run(later, |ticket, _| fired += usize::from(live(&ticket)));
        assert_eq!(fired, 10 * MIN_SWEEP / 8);
    }
}
