//! `gnosis::redis` over real sockets against a real redis-server of our own (started on a
//! free port, no persistence, killed at the end): a miss, SET PX then GET, DEL, an error
//! reply, 1,000 pipelined commands, and the server restarted under commands in flight. The
//! pool's links are moved by `link::poll::Socket` over poll(2).
//!
//! redis-server must be installed (`apt-get install redis-server`; scripts/test.sh installs
//! it): without it this test fails, it is not skipped.

#[path = "common/mod.rs"]
mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::free_port;
use common::redis::RedisServer as Server;

use gnosis::link::poll::Socket;
use gnosis::redis::{Address, Event, Failure, Redis, Session, Settings, Value};

/// An event, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Null,
    Ok,
    Integer(i64),
    Bulk(Vec<u8>),
    Error(String),
    Failed(Failure),
    Other(String),
}

fn seen(event: Event<'_>) -> Seen {
    match event {
        Event::Reply(Value::Null) => Seen::Null,
        Event::Reply(Value::Simple(b"OK")) => Seen::Ok,
        Event::Reply(Value::Integer(n)) => Seen::Integer(n),
        Event::Reply(Value::Bulk(bytes)) => Seen::Bulk(bytes.to_vec()),
        Event::Reply(other) => Seen::Other(format!("{other:?}")),
        Event::Error(message) => Seen::Error(String::from_utf8_lossy(message).into_owned()),
        Event::Failed(failure) => Seen::Failed(failure),
    }
}

/// The pool, a socket per link, and the events seen, by token, in the order they came.
struct Client {
    redis: Redis,
    sockets: Vec<Socket>,
    seen: Vec<(u64, Seen)>,
}

impl Client {
    fn new(port: u16, settings: Settings) -> Client {
        let address = Address::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
        let redis = Redis::new(address, &Session::default(), settings);
        let sockets = (0..redis.len()).map(|_| Socket::new()).collect();
        Client {
            redis,
            sockets,
            seen: Vec::new(),
        }
    }

    /// One round: the links' orders done and their bytes sent, a wait of up to `timeout`
    /// for the sockets or the pool's deadline, what came read, the timers run.
    fn turn(&mut self, timeout: Duration) {
        let seen = &mut self.seen;
        let mut sink = |token, event: Event<'_>| seen.push((token, self::seen(event)));
        let now = Instant::now();
        for (index, socket) in self.sockets.iter_mut().enumerate() {
            self.redis.on_link(index, &mut sink, |link, around| {
                socket.settle(link, now, around)
            });
        }
        let wake = self
            .redis
            .deadline()
            .map_or(now + timeout, |deadline| deadline.min(now + timeout));
        let interest: Vec<(&Socket, bool)> = self
            .sockets
            .iter()
            .enumerate()
            .map(|(index, socket)| (socket, socket.wants_write(self.redis.link(index))))
            .collect();
        let ready = Socket::wait(&interest, wake.saturating_duration_since(now)).unwrap();
        let now = Instant::now();
        for (index, (socket, readiness)) in self.sockets.iter_mut().zip(ready).enumerate() {
            self.redis.on_link(index, &mut sink, |link, around| {
                socket.ready(link, readiness, now, around)
            });
        }
        self.redis.on_timers(Instant::now(), &mut sink);
    }

    /// Turns until `count` events are seen, and takes them.
    fn wait_for(&mut self, count: usize) -> Vec<(u64, Seen)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.seen.len() < count {
            assert!(
                Instant::now() < deadline,
                "{} events of {count}: {:?}",
                self.seen.len(),
                self.seen
            );
            self.turn(Duration::from_millis(50));
        }
        assert_eq!(self.seen.len(), count, "{:?}", self.seen);
        std::mem::take(&mut self.seen)
    }

    /// Turns until every link has sent all it had.
    fn flush(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let pending = |client: &Client| {
            (0..client.redis.len()).any(|index| {
                let link = client.redis.link(index);
                link.conn().in_flight() > 0 && (link.has_unsent() || !link.conn().is_open())
            })
        };
        while pending(self) {
            assert!(Instant::now() < deadline, "commands never sent");
            self.turn(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_real_redis_server_answers_pipelined_commands_and_outlives_a_restart() {
    let port = free_port();
    let mut server = Server::start(port);
    let settings = Settings {
        connections: 2,
        command_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        ..Settings::default()
    };
    let mut client = Client::new(port, settings);
    let now = Instant::now;
    let ttl = Duration::from_secs(10);

    // A miss; SET PX then GET, a value of any bytes; its TTL; DEL, then a miss again.
    let value: Vec<u8> = (0..=255u8).chain(*b"\r\n$-1\r\n").collect();
    let redis = &mut client.redis;
    redis.get(1, b"gnosis:item:1", now()).unwrap();
    redis
        .set_px(2, b"gnosis:item:1", &value, ttl, now())
        .unwrap();
    redis.get(3, b"gnosis:item:1", now()).unwrap();
    redis
        .command(4, &[b"PTTL", b"gnosis:item:1"], now())
        .unwrap();
    redis.del(5, b"gnosis:item:1", now()).unwrap();
    redis.get(6, b"gnosis:item:1", now()).unwrap();
    let events = client.wait_for(6);
    assert_eq!(
        events[..3],
        [(1, Seen::Null), (2, Seen::Ok), (3, Seen::Bulk(value))]
    );
    assert!(
        matches!(events[3], (4, Seen::Integer(ms)) if ms > 9_000 && ms <= 10_000),
        "{:?}",
        events[3]
    );
    assert_eq!(events[4..], [(5, Seen::Integer(1)), (6, Seen::Null)]);

    // An error reply fails its command only: the next, on the same connection, is answered.
    let redis = &mut client.redis;
    redis.set_px(7, b"gnosis:text", b"x", ttl, now()).unwrap();
    redis
        .command(8, &[b"LPUSH", b"gnosis:text", b"y"], now())
        .unwrap();
    redis.get(9, b"gnosis:text", now()).unwrap();
    let events = client.wait_for(3);
    assert_eq!(events[0], (7, Seen::Ok));
    assert!(
        matches!(&events[1], (8, Seen::Error(message)) if message.starts_with("WRONGTYPE")),
        "{:?}",
        events[1]
    );
    assert_eq!(events[2], (9, Seen::Bulk(b"x".to_vec())));

    // 1,000 commands pipelined over both connections: each reply its own command's, a key's
    // SET answered before its GET.
    for i in 0..500u64 {
        let key = format!("gnosis:p:{i}");
        let value = format!("v{i}");
        let redis = &mut client.redis;
        redis
            .set_px(1000 + i, key.as_bytes(), value.as_bytes(), ttl, now())
            .unwrap();
        redis.get(2000 + i, key.as_bytes(), now()).unwrap();
    }
    let events = client.wait_for(1000);
    for (at, (token, event)) in events.iter().enumerate() {
        match token {
            1000..=1499 => assert_eq!(*event, Seen::Ok),
            _ => {
                let i = token - 2000;
                assert_eq!(*event, Seen::Bulk(format!("v{i}").into_bytes()));
                let set = events.iter().position(|(t, _)| *t == 1000 + i).unwrap();
                assert!(set < at, "the GET of {i} answered before its SET");
            }
        }
    }

    // A restart: a command the server holds (BLPOP waits for ever) and one pipelined behind
    // it, both on the key's connection, fail when the server goes; none is sent again, and
    // the next ones reconnect.
    let redis = &mut client.redis;
    redis
        .command(20, &[b"BLPOP", b"gnosis:queue", b"0"], now())
        .unwrap();
    redis.get(21, b"gnosis:queue", now()).unwrap();
    client.flush();
    client.turn(Duration::from_millis(100));
    assert_eq!(client.seen, []);
    drop(server);
    let events = client.wait_for(2);
    assert_eq!(
        events,
        [
            (20, Seen::Failed(Failure::Unavailable)),
            (21, Seen::Failed(Failure::Unavailable))
        ]
    );
    server = Server::start(port);
    let redis = &mut client.redis;
    redis
        .set_px(22, b"gnosis:item:2", b"after", ttl, now())
        .unwrap();
    redis.get(23, b"gnosis:item:2", now()).unwrap();
    redis.get(24, b"gnosis:p:1", now()).unwrap();
    let mut events = client.wait_for(3);
    // The third key's may be on the other connection, answered before or after.
    events.sort_by_key(|(token, _)| *token);
    assert_eq!(
        events,
        [
            (22, Seen::Ok),
            (23, Seen::Bulk(b"after".to_vec())),
            // Nothing saved: the restarted server is empty.
            (24, Seen::Null)
        ]
    );
    drop(server);
}
