//! Our Redis client, without I/O: a worker's few connections to one Redis server, commands in
//! (`Redis::get`, `set_px`, `del`, `command`), replies or failures out as events by token
//! (`Sink`), the way `upstream` hands out an upstream's responses. Each connection
//! (`conn.rs`) is a link (`crate::link`) whose bytes the worker's backend moves; `protocol/`
//! is the codec (RESP2 spoken, RESP3 read: see there why), `url.rs` reads `REDIS_URL`.
//!
//! What it is for: the production stack's L2 cache behind the application server's
//! in-process one (`app/api.rs`), when `REDIS_URL` is set: `GET item:{id}` on a miss,
//! `SET item:{id} <json> PX 1000` after a database read, `DEL item:{id}` after an UPDATE. Its
//! links are a worker's after the PostgreSQL and upstream ones (`server/core/links.rs`).
//!
//! A command goes to the connection its key hashes to (the second argument: GET's, SET's
//! and DEL's key), so that the commands of one key are run in the order they were given: a
//! DEL is never overtaken by an earlier SET of the old row on another connection. On its
//! connection commands are pipelined: written at once, their replies matched to them in
//! order. A connection holds at most `Settings::max_in_flight` commands and
//! `Settings::queue_bytes` of them unsent (its bounded queue); past either a command is
//! refused ([`Refused::Busy`]), as a cache can be skipped.
//!
//! An error reply (`-ERR ...`) fails its command only ([`Event::Error`]). A command not
//! answered within `Settings::command_timeout` fails ([`Failure::TimedOut`]) and closes its
//! connection: its reply may still come, and the line of replies would be out of step. A
//! connection lost, or sending what is not RESP, fails every command it holds; none is sent
//! again: one may have run or not, and a SET of an old row sent again after a later DEL
//! would put the stale row back in the cache. A cache's caller reads the database instead.
//! The next command reconnects. Failed connects back off (100 ms doubling to 2 s) for the
//! whole server: while it runs, a command for an unconnected connection is refused at once
//! ([`Refused::Unavailable`]).

mod conn;
pub mod protocol;
#[cfg(test)]
mod tests;
mod url;

use std::time::{Duration, Instant};

pub use self::conn::Conn;
pub use self::protocol::{Aggregate, DecodeError, Limits, Value};
pub use self::url::{Endpoint, RedisUrl, Session, UrlError, DEFAULT_PORT};
pub use crate::link::Address;
use crate::link::Backoff;

/// A Redis connection with the socket it wants.
pub type Link = crate::link::Link<Conn>;

/// How a worker talks to its Redis server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Connections per worker.
    pub connections: usize,
    /// Commands on one connection at most, sent or not, whose replies have not come.
    pub max_in_flight: usize,
    /// The bytes of commands one connection holds unsent (while it connects, or while the
    /// socket has no room) at most.
    pub queue_bytes: usize,
    /// A command not answered within it fails with [`Failure::TimedOut`].
    pub command_timeout: Duration,
    /// A connect and its set-up (AUTH, SELECT) not done within it fails as a refused one.
    pub connect_timeout: Duration,
    /// What one reply may hold.
    pub limits: Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            connections: 2,
            max_in_flight: 4096,
            queue_bytes: 4 << 20,
            command_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            limits: Limits::default(),
        }
    }
}

/// What becomes of a command.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event<'a> {
    /// Its reply, borrowed from the connection's input (a GET's miss is [`Value::Null`]).
    Reply(Value<'a>),
    /// The server's error for it (`-ERR ...`, `-WRONGTYPE ...`): the connection is fine.
    Error(&'a [u8]),
    Failed(Failure),
}

/// Why a command has no reply. It may or may not have run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server could not be reached, or the connection was lost before the reply.
    Unavailable,
    /// No reply within [`Settings::command_timeout`].
    TimedOut,
    /// The server refused the connection's AUTH or SELECT: `REDIS_URL` is wrong.
    SetupRefused,
    /// The server sent what is not RESP, over [`Settings::limits`], or a reply to nothing.
    Protocol(DecodeError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unavailable => f.write_str("Redis unreachable, or the connection lost"),
            Failure::TimedOut => f.write_str("no reply within the command timeout"),
            Failure::SetupRefused => f.write_str("Redis refused REDIS_URL's AUTH or SELECT"),
            Failure::Protocol(error) => write!(f, "not a Redis reply: {error}"),
        }
    }
}

/// Where the pool delivers its commands' events, each with its command's token.
pub trait Sink: FnMut(u64, Event<'_>) {}

impl<F: FnMut(u64, Event<'_>)> Sink for F {}

/// Why a command was not taken; nothing of it is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its connection is not open nor may be opened now (the backoff runs).
    Unavailable,
    /// Its connection holds `max_in_flight` commands, or `queue_bytes` unsent.
    Busy,
}

/// What a connection's events reach besides the sink: the pool's backoff.
pub struct Around<'a, S> {
    sink: &'a mut S,
    backoff: &'a mut Backoff,
}

/// One worker's connections to its Redis server.
pub struct Redis {
    links: Vec<Link>,
    settings: Settings,
    backoff: Backoff,
}

impl Redis {
    /// `settings.connections` connections to `address`, each opened at once and set up as
    /// `session` says (AUTH, SELECT).
    pub fn new(address: Address, session: &Session, settings: Settings) -> Redis {
        let setup = session.setup();
        let links = (0..settings.connections.max(1))
            .map(|_| {
                let mut conn = Conn::new(address.clone(), setup.clone(), settings);
                conn.start();
                Link::with_capacity(conn, 0)
            })
            .collect();
        Redis {
            links,
            settings,
            backoff: Backoff::default(),
        }
    }

    /// How many links there are.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn link(&self, index: usize) -> &Link {
        &self.links[index]
    }

    /// For what does not deliver events: the read buffer, the bytes to send, the close.
    pub fn link_mut(&mut self, index: usize) -> &mut Link {
        &mut self.links[index]
    }

    /// `GET key`: the value ([`Value::Bulk`]) or [`Value::Null`].
    pub fn get(&mut self, token: u64, key: &[u8], now: Instant) -> Result<(), Refused> {
        self.command(token, &[b"GET", key], now)
    }

    /// `SET key value PX ttl`: replied `+OK`.
    pub fn set_px(
        &mut self,
        token: u64,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        now: Instant,
    ) -> Result<(), Refused> {
        // PX 0 is an error: a TTL under a millisecond is one.
        let millis = ttl.as_millis().clamp(1, u128::from(u64::MAX));
        let mut number = itoa::Buffer::new();
        let millis = number.format(millis).as_bytes();
        self.command(token, &[b"SET", key, value, b"PX", millis], now)
    }

    /// `DEL key`: replied with how many keys went (0 or 1).
    pub fn del(&mut self, token: u64, key: &[u8], now: Instant) -> Result<(), Refused> {
        self.command(token, &[b"DEL", key], now)
    }

    /// Any command, its name first, its event to come with `token`; it goes to the
    /// connection its second argument (the key, for most commands) hashes to.
    pub fn command(&mut self, token: u64, args: &[&[u8]], now: Instant) -> Result<(), Refused> {
        let index = self.route(args.get(1).copied().unwrap_or_default());
        let conn = self.links[index].conn_mut();
        if conn.is_idle() {
            if !self.backoff.allows(now) {
                return Err(Refused::Unavailable);
            }
            conn.start();
        }
        let deadline = now + self.settings.command_timeout;
        conn.push(token, args, deadline)
    }

    /// The connection of `key`: FNV-1a, for a spread that needs no seed.
    fn route(&self, key: &[u8]) -> usize {
        let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        (hash % self.links.len() as u64) as usize
    }

    /// Runs `f` on link `index` with what its connection's events reach.
    pub fn on_link<S: Sink, T>(
        &mut self,
        index: usize,
        sink: &mut S,
        f: impl FnOnce(&mut Link, &mut Around<'_, S>) -> T,
    ) -> T {
        let mut around = Around {
            sink,
            backoff: &mut self.backoff,
        };
        f(&mut self.links[index], &mut around)
    }

    /// When [`Redis::on_timers`] must run next.
    pub fn deadline(&self) -> Option<Instant> {
        self.links
            .iter()
            .filter_map(|link| link.conn().deadline())
            .min()
    }

    /// Fails what is past its deadline: connects and set-ups (as refused), commands (with
    /// [`Failure::TimedOut`], closing their connections).
    pub fn on_timers(&mut self, now: Instant, sink: &mut impl Sink) {
        let mut around = Around {
            sink,
            backoff: &mut self.backoff,
        };
        for link in &mut self.links {
            if link
                .conn()
                .deadline()
                .is_some_and(|deadline| deadline <= now)
            {
                link.conn_mut().on_timer(now, &mut around);
            }
        }
    }
}
