//! The sweep: once a second, the deadlines of every connection, and the connections paused
//! for the budget that may read again.

use super::{Core, Swept, Transport, LINGER, SWEEP_EVERY};
use crate::http::Expiry;
use crate::service::Service;

impl<S: Service, K> Core<S, K> {
    /// Once a second, tells `found` of every connection that idled, lingered or stalled
    /// too long, of every one that wrote its last word for that (HTTP/2's GOAWAY), and of
    /// every one paused for the budget that may read again (one paused with no output to
    /// drain would otherwise never be woken); returns whether it ran.
    pub fn sweep(&mut self, mut found: impl FnMut(usize, Swept)) -> bool {
        if self.worker.now < self.worker.next_sweep {
            return false;
        }
        self.worker.next_sweep = self.worker.now + SWEEP_EVERY;
        for index in 0..self.slots.all.len() {
            let slot = &mut self.slots.all[index];
            if slot.socket.is_none() {
                continue;
            }
            let handshake_late = matches!(&slot.transport, Transport::Tls(tls) if tls.handshake_expired(self.worker.now));
            let expiry = match slot.lingering_since {
                _ if handshake_late => Expiry::Close,
                Some(since) if self.worker.now.duration_since(since) > LINGER => Expiry::Close,
                Some(_) => Expiry::Met,
                None => slot
                    .protocol
                    .wire_mut()
                    .expire(self.worker.now, &self.worker.limits.timeouts),
            };
            match expiry {
                Expiry::Close => found(index, Swept::Expired),
                Expiry::Told => found(index, Swept::Resumable),
                Expiry::Met if slot.paused && !self.over_budget(index) => {
                    self.slots.all[index].paused = false;
                    found(index, Swept::Resumable);
                }
                Expiry::Met => {}
            }
        }
        true
    }
}
