//! The PostgreSQL links: the backend does what [`Core::link_order`] says, reads when it
//! can, sends [`Core::link_unsent`], and reports back; each link decides the rest for its
//! connection (`pg::link`), and the answers its events finish go to their connections.

use std::io;
use std::time::Instant;

use super::{Core, Deliverer};
use crate::pg::link::Link;
pub(in crate::server) use crate::pg::link::Order as LinkOrder;
use crate::service::Service;

impl<S: Service, K> Core<S, K> {
    /// How many links there are (indexes `0..links()`).
    pub fn links(&self) -> usize {
        self.worker.pool.len()
    }

    /// What the backend must do with link `index`'s socket now, if anything: asked once
    /// per iteration, after the events and the timers.
    pub fn link_order(&mut self, index: usize) -> Option<LinkOrder> {
        self.on_link(index, |link, now, to| {
            link.order(now, &mut |token, event| to.event(token, event))
        })
    }

    /// The connect ordered for the link ended (the socket became writable and this is its
    /// `SO_ERROR`, or the socket could not be made).
    pub fn link_connected(&mut self, index: usize, result: io::Result<()>) {
        self.on_link(index, |link, now, to| {
            link.connected(result, now, &mut |token, event| to.event(token, event))
        });
    }

    /// Room to read the link's bytes into, while its socket is connected and still its
    /// connection's; [`Core::link_filled`] says how many came.
    pub fn link_read_buffer(&mut self, index: usize) -> Option<&mut [u8]> {
        self.worker.pool.link_mut(index).read_buffer()
    }

    /// `n` bytes were read into [`Core::link_read_buffer`]; 0 is the server's EOF.
    pub fn link_filled(&mut self, index: usize, n: usize) {
        self.on_link(index, |link, now, to| {
            link.filled(n, now, &mut |token, event| to.event(token, event))
        });
    }

    /// Bytes that arrived for the link in a buffer of the backend's; none is the EOF.
    pub fn link_received(&mut self, index: usize, bytes: &[u8]) {
        self.on_link(index, |link, now, to| {
            link.receive(bytes, now, &mut |token, event| to.event(token, event))
        });
    }

    /// The link's socket failed (reset, refused, a send error).
    pub fn link_failed(&mut self, index: usize, error: io::Error) {
        self.on_link(index, |link, now, to| {
            link.failed(error, now, &mut |token, event| to.event(token, event))
        });
    }

    /// The bytes the link has to send; they stay as they are until reported sent (or the
    /// socket closed). Empty unless it is connected.
    pub fn link_unsent(&mut self, index: usize) -> &[u8] {
        self.worker.pool.link_mut(index).unsent()
    }

    /// The receive low-water mark for link `index`'s socket, if it changes (`Link::low_water_order`).
    pub fn link_low_water(&mut self, index: usize) -> Option<usize> {
        self.worker.pool.link_mut(index).low_water_order()
    }

    /// Whether the link has bytes to send, for a backend that waits for room to send them;
    /// unlike [`Core::link_unsent`], it changes nothing.
    pub fn link_has_unsent(&self, index: usize) -> bool {
        self.worker.pool.link(index).has_unsent()
    }

    pub fn link_sent(&mut self, index: usize, n: usize) {
        self.worker.pool.link_mut(index).sent(n);
    }

    /// The socket the link ordered closed is closed and nothing refers to it any more.
    pub fn link_closed(&mut self, index: usize) {
        self.worker.pool.link_mut(index).closed();
    }

    /// Runs `f` on link `index` with the clock and what its events are delivered to.
    fn on_link<T>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Link, Instant, &mut Deliverer<'_, S, K>) -> T,
    ) -> T {
        let (pool, mut deliver) = self.split();
        let now = deliver.now;
        f(pool.link_mut(index), now, &mut deliver)
    }
}
