//! The links: the PostgreSQL connections (indexes `0..pool.len()`), in edge mode the
//! upstream's after them, then Redis's when the app has it. The backend does what
//! [`Core::link_order`] says, reads when it can, sends [`Core::link_unsent`], and reports back;
//! each link decides the rest for its connection (`crate::link`), and the answers its events
//! finish go to their connections.

use std::io;

use super::Core;
use crate::link::Link;
pub(in crate::server) use crate::link::Order as LinkOrder;
use crate::pg::PgConn;
use crate::redis;
use crate::service::Service;
use crate::upstream::{Around, Dyn};

/// Which connection a link index names.
enum Which {
    Pg(usize),
    Upstream(usize),
    Redis(usize),
}

/// Runs the same code on a link of either kind, with its sink: `$link` the link, `$sink` what
/// its events are delivered to.
macro_rules! on_link {
    ($core:expr, $index:expr, |$link:ident, $now:ident, $sink:ident| $body:expr) => {{
        let index = $index;
        let which = $core.which(index);
        let super::Split {
            pool,
            mut redis,
            upstream,
            mut deliver,
        } = $core.split();
        let $now = deliver.now;
        match which {
            Which::Pg(i) => {
                let $link = pool.link_mut(i);
                let $sink = &mut |token, event: crate::pg::Event<'_>| {
                    deliver.event(token, event, redis.as_deref_mut())
                };
                $body
            }
            Which::Redis(i) => {
                let redis = redis.expect("a Redis link index");
                let sink =
                    &mut |token, event: redis::Event<'_>| deliver.redis_event(token, event, pool);
                redis.on_link(i, sink, |$link, $sink| $body)
            }
            Which::Upstream(i) => {
                let upstream = upstream.expect("an upstream link index");
                let sink = &mut |token, event: crate::upstream::Event<'_>| {
                    deliver.upstream_event(token, event)
                };
                upstream.on_link(i, $now, sink, |$link, $sink: &mut Around<'_, Dyn<'_>>| {
                    $body
                })
            }
        }
    }};
}

impl<S: Service, K> Core<S, K> {
    /// How many links there are (indexes `0..links()`).
    pub fn links(&self) -> usize {
        self.worker.pool.len() + self.upstream_links() + self.redis_links()
    }

    fn upstream_links(&self) -> usize {
        self.worker.upstream.as_ref().map_or(0, |up| up.len())
    }

    fn redis_links(&self) -> usize {
        self.worker.redis.as_ref().map_or(0, |redis| redis.len())
    }

    fn which(&self, index: usize) -> Which {
        let Some(past_pg) = index.checked_sub(self.worker.pool.len()) else {
            return Which::Pg(index);
        };
        match past_pg.checked_sub(self.upstream_links()) {
            None => Which::Upstream(past_pg),
            Some(i) => Which::Redis(i),
        }
    }

    /// Runs `f` on link `index`, of any kind, for what delivers no event.
    fn link_do<T>(
        &mut self,
        index: usize,
        pg: impl FnOnce(&mut Link<PgConn>) -> T,
        up: impl FnOnce(&mut Link<crate::upstream::Conn>) -> T,
        rd: impl FnOnce(&mut Link<redis::Conn>) -> T,
    ) -> T {
        match self.which(index) {
            Which::Pg(i) => pg(self.worker.pool.link_mut(i)),
            Which::Upstream(i) => {
                let upstream = self.worker.upstream.as_mut();
                up(upstream.expect("an upstream link index").link_mut(i))
            }
            Which::Redis(i) => {
                let redis = self.worker.redis.as_mut();
                rd(redis.expect("a Redis link index").link_mut(i))
            }
        }
    }

    /// Reads link `index`, of any kind.
    fn link_view<T>(
        &self,
        index: usize,
        pg: impl FnOnce(&Link<PgConn>) -> T,
        up: impl FnOnce(&Link<crate::upstream::Conn>) -> T,
        rd: impl FnOnce(&Link<redis::Conn>) -> T,
    ) -> T {
        match self.which(index) {
            Which::Pg(i) => pg(self.worker.pool.link(i)),
            Which::Upstream(i) => {
                let upstream = self.worker.upstream.as_ref();
                up(upstream.expect("an upstream link index").link(i))
            }
            Which::Redis(i) => {
                let redis = self.worker.redis.as_ref();
                rd(redis.expect("a Redis link index").link(i))
            }
        }
    }

    /// What the backend must do with link `index`'s socket now, if anything: asked once
    /// per iteration, after the events and the timers.
    pub fn link_order(&mut self, index: usize) -> Option<LinkOrder> {
        on_link!(self, index, |link, now, sink| link.order(now, sink))
    }

    /// The connect ordered for the link ended (the socket became writable and this is its
    /// `SO_ERROR`, or the socket could not be made).
    pub fn link_connected(&mut self, index: usize, result: io::Result<()>) {
        on_link!(self, index, |link, now, sink| link
            .connected(result, now, sink))
    }

    /// Room to read the link's bytes into, while its socket is connected and still its
    /// connection's, and the connection wants them or `anyway` (the socket hung up);
    /// [`Core::link_filled`] says how many came.
    pub fn link_read_buffer(&mut self, index: usize, anyway: bool) -> Option<&mut [u8]> {
        match self.which(index) {
            Which::Pg(i) => self.worker.pool.link_mut(i).read_buffer(anyway),
            Which::Upstream(i) => {
                let upstream = self.worker.upstream.as_mut()?;
                upstream.link_mut(i).read_buffer(anyway)
            }
            Which::Redis(i) => self.worker.redis.as_mut()?.link_mut(i).read_buffer(anyway),
        }
    }

    /// Whether the link's socket should be read now: an upstream link streaming a body its
    /// client has not taken says no (`Link::wants_input`), until the client takes some.
    pub fn link_wants_input(&self, index: usize) -> bool {
        self.link_view(
            index,
            |link| link.wants_input(),
            |link| link.wants_input(),
            |link| link.wants_input(),
        )
    }

    /// `n` bytes were read into [`Core::link_read_buffer`]; 0 is the peer's EOF.
    pub fn link_filled(&mut self, index: usize, n: usize) {
        on_link!(self, index, |link, now, sink| link.filled(n, now, sink))
    }

    /// Bytes that arrived for the link in a buffer of the backend's; none is the EOF.
    pub fn link_received(&mut self, index: usize, bytes: &[u8]) {
        on_link!(self, index, |link, now, sink| link
            .receive(bytes, now, sink))
    }

    /// The link's socket failed (reset, refused, a send error).
    pub fn link_failed(&mut self, index: usize, error: io::Error) {
        on_link!(self, index, |link, now, sink| link.failed(error, now, sink))
    }

    /// The bytes the link has to send; they stay as they are until reported sent (or the
    /// socket closed). Empty unless it is connected.
    pub fn link_unsent(&mut self, index: usize) -> &[u8] {
        match self.which(index) {
            Which::Pg(i) => self.worker.pool.link_mut(i).unsent(),
            Which::Upstream(i) => match self.worker.upstream.as_mut() {
                Some(upstream) => upstream.link_mut(i).unsent(),
                None => &[],
            },
            Which::Redis(i) => match self.worker.redis.as_mut() {
                Some(redis) => redis.link_mut(i).unsent(),
                None => &[],
            },
        }
    }

    /// The receive low-water mark for link `index`'s socket, if it changes (`Link::low_water_order`).
    pub fn link_low_water(&mut self, index: usize) -> Option<usize> {
        self.link_do(
            index,
            |link| link.low_water_order(),
            |link| link.low_water_order(),
            |link| link.low_water_order(),
        )
    }

    /// Whether the link has bytes to send, for a backend that waits for room to send them;
    /// unlike [`Core::link_unsent`], it changes nothing.
    pub fn link_has_unsent(&self, index: usize) -> bool {
        self.link_view(
            index,
            |link| link.has_unsent(),
            |link| link.has_unsent(),
            |link| link.has_unsent(),
        )
    }

    pub fn link_sent(&mut self, index: usize, n: usize) {
        self.link_do(
            index,
            |link| link.sent(n),
            |link| link.sent(n),
            |link| link.sent(n),
        )
    }

    /// The socket the link ordered closed is closed and nothing refers to it any more.
    pub fn link_closed(&mut self, index: usize) {
        self.link_do(
            index,
            |link| link.closed(),
            |link| link.closed(),
            |link| link.closed(),
        )
    }
}
