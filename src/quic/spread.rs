//! How the workers share new QUIC connections evenly. The kernel hands a client's first
//! Initial to the worker its connection ID's first byte picks (`sys::route_by_connection_id`),
//! and that ID is the client's own random choice: by hash luck, some workers get more
//! connections than others (64 connections over 64 workers leave about a third of them
//! with none). A worker that already holds more connections than another sends the client
//! there with a Retry whose connection ID names the other worker, which the client's next
//! Initial then reaches; a client that proved its address with a Retry is taken where it
//! lands. The counts are atomics the workers read and write on the handshake's path only.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

pub struct Spread {
    /// Per worker: the connections it holds.
    open: Box<[AtomicU32]>,
    /// Per worker: the clients sent there with a Retry that have not arrived yet. A client
    /// that never comes back (a forged address) would count for ever: each worker forgets
    /// its own every second ([`Spread::forget_promised`]), far longer than a round trip.
    promised: Box<[AtomicU32]>,
}

impl Spread {
    pub fn new(workers: usize) -> Arc<Spread> {
        let counts = || (0..workers.max(1)).map(|_| AtomicU32::new(0)).collect();
        Arc::new(Spread {
            open: counts(),
            promised: counts(),
        })
    }

    /// Worker `worker` holds `open` connections.
    pub fn set_open(&self, worker: u8, open: usize) {
        if let Some(count) = self.open.get(usize::from(worker)) {
            count.store(u32::try_from(open).unwrap_or(u32::MAX), Relaxed);
        }
    }

    /// The worker a new client of `worker`'s should go to instead: the one with the fewest
    /// connections and clients on their way, if it has fewer than `worker`.
    pub fn elsewhere(&self, worker: u8) -> Option<u8> {
        let load = |index: usize| {
            let open = self.open[index].load(Relaxed);
            open.saturating_add(self.promised[index].load(Relaxed))
        };
        let here = usize::from(worker);
        let least = (0..self.open.len()).min_by_key(|&index| load(index))?;
        match here < self.open.len() && load(least) < load(here) {
            true => u8::try_from(least).ok(),
            false => None,
        }
    }

    /// A client was sent to `worker` with a Retry.
    pub fn promise(&self, worker: u8) {
        if let Some(count) = self.promised.get(usize::from(worker)) {
            count.fetch_add(1, Relaxed);
        }
    }

    /// A client sent with a Retry arrived at `worker`.
    pub fn arrived(&self, worker: u8) {
        if let Some(count) = self.promised.get(usize::from(worker)) {
            let _ = count.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Clients promised to `worker` that have not come within a second are not coming.
    pub fn forget_promised(&self, worker: u8) {
        if let Some(count) = self.promised.get(usize::from(worker)) {
            count.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_with_more_sends_to_the_one_with_fewest_counting_those_on_their_way() {
        let spread = Spread::new(3);
        assert_eq!(spread.elsewhere(0), None);
        spread.set_open(0, 2);
        spread.set_open(1, 1);
        spread.set_open(2, 2);
        assert_eq!(spread.elsewhere(0), Some(1));
        assert_eq!(spread.elsewhere(1), None);
        spread.promise(1);
        assert_eq!(
            spread.elsewhere(0),
            None,
            "1 + 1 on its way is not fewer than 2"
        );
        spread.arrived(1);
        spread.set_open(1, 2);
        assert_eq!(spread.elsewhere(2), None);
        spread.promise(1);
        spread.forget_promised(1);
        spread.arrived(1);
        spread.set_open(0, 3);
        assert_eq!(spread.elsewhere(0), Some(1));
        assert_eq!(spread.elsewhere(9), None);
    }
}
