//! Connection IDs that name the worker owning their connection, so that every packet of a
//! connection reaches that worker's socket: the kernel's `SO_REUSEPORT` group picks the
//! socket by the ID's first byte (`sys::route_quic_by_worker`), as QUIC-LB's plaintext
//! mode does. The other seven bytes are random from the kernel: an observer learns the
//! worker, never which IDs belong to one connection. An ID may name another worker, once,
//! for a Retry that sends a client there ([`NextOwner`], `spread.rs`).

use std::sync::atomic::{AtomicU16, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};

/// 8 bytes: the worker's index, then 7 random ones.
pub const CID_LEN: usize = 8;

/// How many IDs' worth of random bytes one `getrandom` call fetches.
const BATCH: usize = 64;

/// The worker the next ID names instead of the generator's own, for one ID: the endpoint
/// sets it right before a Retry, whose ID is the one the endpoint has quinn-proto make.
#[derive(Clone, Default)]
pub struct NextOwner(Arc<AtomicU16>);

impl NextOwner {
    const NONE: u16 = 0;

    pub fn set(&self, worker: u8) {
        self.0.store(u16::from(worker) + 1, Relaxed);
    }

    pub fn clear(&self) {
        self.0.store(Self::NONE, Relaxed);
    }

    fn take(&self) -> Option<u8> {
        let owner = self.0.swap(Self::NONE, Relaxed);
        owner
            .checked_sub(1)
            .and_then(|worker| u8::try_from(worker).ok())
    }
}

pub struct WorkerCids {
    worker: u8,
    next_owner: NextOwner,
    random: [u8; BATCH * (CID_LEN - 1)],
    /// Where the unused random bytes start.
    used: usize,
}

impl WorkerCids {
    pub fn new(worker: u8, next_owner: NextOwner) -> Self {
        let random = [0; BATCH * (CID_LEN - 1)];
        let used = random.len();
        WorkerCids {
            worker,
            next_owner,
            random,
            used,
        }
    }

    fn random_tail(&mut self) -> [u8; CID_LEN - 1] {
        if self.used == self.random.len() {
            crate::sys::fill_random(&mut self.random);
            self.used = 0;
        }
        let mut tail = [0; CID_LEN - 1];
        let end = self.used + tail.len();
        tail.copy_from_slice(&self.random[self.used..end]);
        self.used = end;
        tail
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [self.next_owner.take().unwrap_or(self.worker); CID_LEN];
        id[1..].copy_from_slice(&self.random_tail());
        ConnectionId::new(&id)
    }

    /// A packet for another worker's connection (the routing failed over, or the ID is
    /// forged) is not this endpoint's.
    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        match cid.len() == CID_LEN && cid[0] == self.worker {
            true => Ok(()),
            false => Err(InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_worker_and_differ() {
        let next_owner = NextOwner::default();
        let mut cids = WorkerCids::new(3, next_owner.clone());
        let ids: Vec<_> = (0..3 * BATCH).map(|_| cids.generate_cid()).collect();
        assert!(ids.iter().all(|id| id.len() == CID_LEN && id[0] == 3));
        assert!(ids.iter().all(|id| cids.validate(id).is_ok()));
        let mut tails: Vec<_> = ids.iter().map(|id| id[1..].to_vec()).collect();
        tails.sort();
        tails.dedup();
        assert_eq!(tails.len(), ids.len());
        let other = WorkerCids::new(4, NextOwner::default()).generate_cid();
        assert!(cids.validate(&other).is_err());
        next_owner.set(5);
        assert_eq!(cids.generate_cid()[0], 5);
        assert_eq!(cids.generate_cid()[0], 3, "for one ID only");
    }
}
